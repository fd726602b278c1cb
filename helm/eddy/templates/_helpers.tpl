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

{{/*
API keys and UI tokens: from a Secret, never from .Values.config (which is the ConfigMap).
The Secret is auth.existingSecret, or <fullname>-auth made from auth.ingestApiKeys / auth.uiTokens.
*/}}
{{- define "eddy.auth.secretName" -}}
{{- default (printf "%s-auth" (include "eddy.fullname" .)) .Values.auth.existingSecret }}
{{- end }}

{{/* "true" when the Secret holds ingest API keys (empty otherwise). */}}
{{- define "eddy.auth.hasIngestKeys" -}}
{{- $a := .Values.auth }}
{{- if $a.existingSecret }}{{ if $a.ingestApiKeysKey }}true{{ end }}
{{- else if $a.ingestApiKeys }}true{{ end }}
{{- end }}

{{/* "true" when the Secret holds UI tokens (empty otherwise). */}}
{{- define "eddy.auth.hasUiTokens" -}}
{{- $a := .Values.auth }}
{{- if $a.existingSecret }}{{ if $a.uiTokensKey }}true{{ end }}
{{- else if $a.uiTokens }}true{{ end }}
{{- end }}

{{/*
A secret table as eddy reads it from the environment: `secret=name` lines. Refuses what would
not read back: a name with `=`, `,` or a line break, a secret with `,` or a line break.
Arguments: (dict "m" MAP "what" VALUES-PATH)
*/}}
{{- define "eddy.auth.table" -}}
{{- $what := .what }}
{{- range $secret, $name := .m }}
{{- if or (regexMatch "[,\\r\\n]" $secret) (not $secret) }}
{{- fail (printf "%s: a key is empty or holds a comma or line break" $what) }}
{{- end }}
{{- if or (regexMatch "[=,\\r\\n]" (toString $name)) (not $name) }}
{{- fail (printf "%s: the name %q is empty or holds `=`, a comma or a line break" $what (toString $name)) }}
{{- end }}
{{- printf "%s=%s\n" $secret (toString $name) }}
{{- end }}
{{- end }}

{{/*
The pod environment carrying the secrets a daemon needs, from the Secret.
Arguments: (dict "root" $ "ingestKeys" BOOL "uiTokens" BOOL)
*/}}
{{- define "eddy.auth.env" -}}
{{- $root := .root }}
{{- $name := include "eddy.auth.secretName" $root }}
{{- if and .ingestKeys (include "eddy.auth.hasIngestKeys" $root) }}
- name: EDDY_INGEST_API_KEYS
  valueFrom:
    secretKeyRef:
      name: {{ $name }}
      key: {{ $root.Values.auth.ingestApiKeysKey }}
{{- end }}
{{- if and .uiTokens (include "eddy.auth.hasUiTokens" $root) }}
- name: EDDY_UI_TOKENS
  valueFrom:
    secretKeyRef:
      name: {{ $name }}
      key: {{ $root.Values.auth.uiTokensKey }}
{{- end }}
{{- end }}

{{/* Secrets written into config would be rendered into the ConfigMap: refuse them. */}}
{{- define "eddy.auth.guardConfig" -}}
{{- $config := default dict .Values.config }}
{{- $instead := dict
    "ingest_api_keys" "auth.ingestApiKeys, or auth.existingSecret"
    "ui_tokens" "auth.uiTokens, or auth.existingSecret"
    "clickhouse_password" "clickhouse.auth.existingSecret"
    "kafka_sasl_password" "kafka.sasl.existingSecret" }}
{{- range $key := keys $instead | sortAlpha }}
{{- if hasKey $config $key }}
{{- fail (printf "config.%s would put a secret into the ConfigMap: use %s (docs/security.md)" $key (get $instead $key)) }}
{{- end }}
{{- end }}
{{- range $dname, $d := (dig "fleet" "notify" "destinations" dict $config) }}
{{- range $field := list "secret" "routing_key" "bearer_token" }}
{{- if hasKey $d $field }}
{{- fail (printf "config.fleet.notify.destinations.%s.%s would put a secret into the ConfigMap: use fleetWatch.destinationSecrets (docs/fleet-alerts.md)" $dname $field) }}
{{- end }}
{{- end }}
{{- if and (eq (toString (get $d "kind")) "slack") (hasKey $d "url") }}
{{- fail (printf "config.fleet.notify.destinations.%s.url (a Slack webhook URL is a secret) would put a secret into the ConfigMap: use fleetWatch.destinationSecrets (docs/fleet-alerts.md)" $dname) }}
{{- end }}
{{- end }}
{{- range $table := list "kafka_consumer" "kafka_producer" }}
{{- if hasKey (default dict (get $config $table)) "sasl.password" }}
{{- fail (printf "config.%s.\"sasl.password\" would put a secret into the ConfigMap: use kafka.sasl.existingSecret (docs/security.md)" $table) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A daemon's labels, by component: its own name, so no other Deployment's or Service's selector
takes its pods. Arguments: (dict "root" $ "component" NAME)
*/}}
{{- define "eddy.component.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eddy.name" .root }}-{{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "eddy.component.labels" -}}
helm.sh/chart: {{ include "eddy.chart" .root }}
{{ include "eddy.component.selectorLabels" . }}
{{- if .root.Chart.AppVersion }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end }}

{{/* ClickHouse credentials from clickhouse.auth.existingSecret, as pod environment. */}}
{{- define "eddy.clickhouse.env" -}}
{{- with .Values.clickhouse.auth }}
{{- if .existingSecret }}
{{- if .userKey }}
- name: EDDY_CLICKHOUSE_USER
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .userKey }}
{{- end }}
- name: EDDY_CLICKHOUSE_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .passwordKey }}
{{- end }}
{{- end }}
{{- end }}

{{/* Kafka SASL credentials from kafka.sasl.existingSecret, as pod environment. */}}
{{- define "eddy.kafka.env" -}}
{{- with .Values.kafka.sasl }}
{{- if .existingSecret }}
- name: EDDY_KAFKA_SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .usernameKey }}
- name: EDDY_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .passwordKey }}
{{- end }}
{{- end }}
{{- end }}

{{/*
fleet-watch's destination secrets (fleetWatch.destinationSecrets: destination → field → key of
the auth Secret), as EDDY_FLEET__NOTIFY__DESTINATIONS__<NAME>__<FIELD>.
*/}}
{{- define "eddy.notify.env" -}}
{{- $name := include "eddy.auth.secretName" . }}
{{- range $dest, $fields := .Values.fleetWatch.destinationSecrets }}
{{- if not (regexMatch "^[a-z][a-z0-9_]*$" $dest) }}
{{- fail (printf "fleetWatch.destinationSecrets: destination %q: lower case letters, digits and _, starting with a letter" $dest) }}
{{- end }}
{{- range $field, $key := $fields }}
{{- if not (has $field (list "url" "secret" "routing_key" "bearer_token")) }}
{{- fail (printf "fleetWatch.destinationSecrets.%s.%s: a destination's secret is its url, secret, routing_key or bearer_token" $dest $field) }}
{{- end }}
- name: EDDY_FLEET__NOTIFY__DESTINATIONS__{{ upper $dest }}__{{ upper $field }}
  valueFrom:
    secretKeyRef:
      name: {{ $name }}
      key: {{ $key }}
{{- end }}
{{- end }}
{{- end }}

{{/* "true" when `eddy ui` would start: tokens from the Secret, a trusted proxy, or open. */}}
{{- define "eddy.ui.hasAccess" -}}
{{- if or (include "eddy.auth.hasUiTokens" .) (dig "ui_trusted_proxies" "" (default dict .Values.config)) (dig "ui_insecure_open" false (default dict .Values.config)) }}true{{ end }}
{{- end }}

{{/*
Prometheus scrape annotations for a daemon's Service (prometheusAnnotations.enabled), for a
Prometheus that discovers targets by annotation instead of ServiceMonitors.
Arguments: (dict "root" $ "port" ADMIN-PORT)
*/}}
{{- define "eddy.scrapeAnnotations" -}}
{{- if .root.Values.prometheusAnnotations.enabled }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: {{ .root.Values.admin.metricsPath | quote }}
{{- end }}
{{- end }}

{{/*
A stateless daemon's Deployment (eddy ui, eddy ingest-http): the image's eddy with `args`, the
chart's eddy.toml, probes on its admin port, and `env` (a YAML list, as text) for its settings
and secrets. Arguments: (dict "root" $ "component" NAME "args" LIST "values" ITS-VALUES
"env" TEXT "checksumAuth" BOOL)
*/}}
{{- define "eddy.daemon.deployment" -}}
{{- $root := .root }}
{{- $v := .values }}
{{- $ctx := dict "root" $root "component" .component }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "eddy.fullname" $root }}-{{ .component }}
  labels:
    {{- include "eddy.component.labels" $ctx | nindent 4 }}
spec:
  replicas: {{ $v.replicaCount }}
  selector:
    matchLabels:
      {{- include "eddy.component.selectorLabels" $ctx | nindent 6 }}
  template:
    metadata:
      annotations:
        checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
        {{- if .checksumAuth }}
        # New keys in a chart-made Secret roll the pods (an existing Secret: roll them yourself).
        checksum/auth: {{ include (print $root.Template.BasePath "/auth-secret.yaml") $root | sha256sum }}
        {{- end }}
        {{- with $root.Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      labels:
        {{- include "eddy.component.labels" $ctx | nindent 8 }}
        {{- with $root.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      serviceAccountName: {{ include "eddy.serviceAccountName" $root }}
      automountServiceAccountToken: {{ $root.Values.serviceAccount.automount }}
      # eddy reads every EDDY_* variable as a setting: no service links.
      enableServiceLinks: false
      {{- with $root.Values.podSecurityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      # In-flight requests finish before exit.
      terminationGracePeriodSeconds: 30
      containers:
        - name: {{ .component }}
          image: {{ include "eddy.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args: {{ toJson .args }}
          env:
            - name: EDDY_CONFIG
              value: /etc/eddy/eddy.toml
            {{- .env | trim | nindent 12 }}
            {{- with $root.Values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: http
              containerPort: {{ $v.port }}
              protocol: TCP
            - name: admin
              containerPort: {{ $v.adminPort }}
              protocol: TCP
          livenessProbe:
            httpGet:
              path: {{ $root.Values.admin.livenessPath }}
              port: admin
            {{- toYaml $root.Values.livenessProbe | nindent 12 }}
          readinessProbe:
            httpGet:
              path: {{ $root.Values.admin.readinessPath }}
              port: admin
            {{- toYaml $root.Values.readinessProbe | nindent 12 }}
          {{- with $root.Values.securityContext }}
          securityContext:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with $v.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          volumeMounts:
            - name: config
              mountPath: /etc/eddy
              readOnly: true
            {{- with $root.Values.volumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        - name: config
          configMap:
            name: {{ include "eddy.fullname" $root }}
        {{- with $root.Values.volumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $root.Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}

{{/*
A daemon's Service: its HTTP port (if any) and its admin port (metrics, probes).
Arguments: (dict "root" $ "component" NAME "port" PORT-OR-0 "adminPort" PORT "type" TYPE
"annotations" MAP)
*/}}
{{- define "eddy.daemon.service" -}}
{{- $ctx := dict "root" .root "component" .component }}
{{- $ann := merge (fromYaml (include "eddy.scrapeAnnotations" (dict "root" .root "port" .adminPort))) (default dict .annotations) }}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "eddy.fullname" .root }}-{{ .component }}
  labels:
    {{- include "eddy.component.labels" $ctx | nindent 4 }}
  {{- with $ann }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ default "ClusterIP" .type }}
  ports:
    {{- if .port }}
    - name: http
      port: {{ .port }}
      targetPort: http
      protocol: TCP
    {{- end }}
    - name: admin
      port: {{ .adminPort }}
      targetPort: admin
      protocol: TCP
  selector:
    {{- include "eddy.component.selectorLabels" $ctx | nindent 4 }}
{{- end }}
