{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "eddy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: release-chart, unless the release name already holds it. */}}
{{- define "eddy.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "eddy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "eddy.labels" -}}
helm.sh/chart: {{ include "eddy.chart" . }}
{{ include "eddy.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "eddy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eddy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "eddy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "eddy.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "eddy.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The effective eddy config: .Values.config (secrets come from the environment, not from here).
*/}}
{{- define "eddy.config" -}}
{{- toYaml (default dict .Values.config) }}
{{- end }}

{{/*
Render a map as TOML. Helm's own toToml turns every YAML integer into a float (12 → 12.0), which
eddy's integer settings reject, so scalars are formatted here: whole numbers as integers, strings
as TOML basic strings (JSON escaping is valid TOML), keys quoted when they are not bare keys.
Arguments: (dict "m" MAP "path" LIST-OF-TABLE-KEYS)
*/}}
{{- define "eddy.toml.key" -}}
{{- if regexMatch "^[A-Za-z0-9_-]+$" . }}{{ . }}{{ else }}{{ toJson . }}{{ end }}
{{- end }}

{{- define "eddy.toml.value" -}}
{{- $v := . }}
{{- $k := kindOf $v }}
{{- if eq $k "string" }}{{ toJson $v }}
{{- else if eq $k "bool" }}{{ $v }}
{{- else if or (eq $k "float64") (eq $k "float32") }}
{{- if eq $v (floor $v) }}{{ int64 $v }}{{ else }}{{ $v }}{{ end }}
{{- else if hasPrefix "int" $k }}{{ $v }}
{{- else if hasPrefix "uint" $k }}{{ $v }}
{{- else if eq $k "slice" }}[{{ range $i, $e := $v }}{{ if $i }}, {{ end }}{{ include "eddy.toml.value" $e }}{{ end }}]
{{- else if eq $k "map" }}{ {{- range $i, $key := keys $v | sortAlpha }}{{ if $i }},{{ end }} {{ include "eddy.toml.key" $key }} = {{ include "eddy.toml.value" (get $v $key) }}{{ end }} }
{{- else }}{{ fail (printf "eddy.toml: cannot render %v (%s)" $v $k) }}
{{- end }}
{{- end }}

{{- define "eddy.toml.table" -}}
{{- $m := .m }}
{{- $path := .path }}
{{- range $key := keys $m | sortAlpha }}
{{- $v := get $m $key }}
{{- if and (ne (kindOf $v) "map") (ne (kindOf $v) "invalid") }}
{{ include "eddy.toml.key" $key }} = {{ include "eddy.toml.value" $v }}
{{- end }}
{{- end }}
{{- range $key := keys $m | sortAlpha }}
{{- $v := get $m $key }}
{{- if eq (kindOf $v) "map" }}
{{- $sub := append $path (include "eddy.toml.key" $key) }}

[{{ join "." $sub }}]
{{- include "eddy.toml.table" (dict "m" $v "path" $sub) }}
{{- end }}
{{- end }}
{{- end }}

{{- define "eddy.toml" -}}
# Rendered by the eddy Helm chart from .Values.config.
{{- include "eddy.toml.table" (dict "m" (fromYaml (include "eddy.config" .)) "path" (list)) }}
{{- end }}

{{/* The partition count KEDA may scale up to. */}}
{{- define "eddy.keda.maxReplicas" -}}
{{- $k := .Values.autoscaling.keda }}
{{- $parts := int (default (default 12 .Values.config.topic_partitions) $k.partitions) }}
{{- min (int $k.maxReplicaCount) $parts }}
{{- end }}

{{/* The OTLP receiver's pods: a name of their own, so the worker's selector never takes them. */}}
{{- define "eddy.otlp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eddy.name" . }}-otlp
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: otlp-receiver
{{- end }}

{{- define "eddy.otlp.labels" -}}
helm.sh/chart: {{ include "eddy.chart" . }}
{{ include "eddy.otlp.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* `eddy fleet-watch`'s pod: a name of its own, so no other selector takes it. */}}
{{- define "eddy.fleetWatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eddy.name" . }}-fleet-watch
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: fleet-watch
{{- end }}

{{- define "eddy.fleetWatch.labels" -}}
helm.sh/chart: {{ include "eddy.chart" . }}
{{ include "eddy.fleetWatch.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}
