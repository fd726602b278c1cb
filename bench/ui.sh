#!/usr/bin/env bash
# `eddy ui` page-load times on a synthetic fleet of N steps (default 1M) in ClickHouse.
#
#   eval "$(scripts/stack env)"; bench/ui.sh [STEPS] [REPEATS]
#
# Seeds (or reuses) the scratch database exactly as bench/queries.sh does, starts `eddy ui` on
# it, fetches each page REPEATS times with curl and prints min / median / max milliseconds to
# the last byte of the HTML (the server runs every query of the page before it answers). The UI
# runs as deployed, with a bearer token, so the times include checking it.
set -euo pipefail
cd "$(dirname "$0")/.."

STEPS=${1:-1000000}
REPEATS=${2:-9}
export EDDY_BENCH_DB=${EDDY_BENCH_DB:-eddy_bench_ui}
: "${EDDY_CLICKHOUSE_URL:?run: eval \"\$(scripts/stack env)\"}"
EDDY=${EDDY_BIN:-}
if [[ -z $EDDY ]]; then
    cargo build --release --quiet
    EDDY=${CARGO_TARGET_DIR:-target}/release/eddy
fi
export EDDY_BIN=$EDDY
# Seeding only: one pass over the query pack, its table discarded.
bench/queries.sh "$STEPS" 1 >/dev/null

out=$(mktemp)
token=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
EDDY_CLICKHOUSE_DATABASE=$EDDY_BENCH_DB EDDY_OUTPUT_TOPIC=${EDDY_BENCH_TOPIC:-eddy.bench.ui.signals} \
    EDDY_UI_TOKENS="$token=bench" EDDY_LOG=warn "$EDDY" ui --listen 127.0.0.1:0 >"$out" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$out"' EXIT
for _ in $(seq 100); do
    grep -q '^eddy ui: ' "$out" && break
    sleep 0.1
done
base=$(sed -n 's/^eddy ui: \(http[^ ]*\)\/$/\1/p' "$out")
[[ -n $base ]] || { echo "eddy ui did not start" >&2; exit 1; }

runs=$((STEPS / 50))
printf 'ClickHouse %s, %s steps; %s loads of each page (ms)\n\n' \
    "$(curl -sS "$EDDY_CLICKHOUSE_URL/" --data-binary 'SELECT version()')" "$STEPS" "$REPEATS"
printf '| page | min | median | max | bytes |\n|---|---:|---:|---:|---:|\n'
pages=(
    "/"
    "/?range=7d&bucket=3600"
    "/?range=30d&bucket=86400"
    "/?range=7d&bucket=3600&project=proj-3"
    "/runs/proj-0/run-$(((runs - 1) / 10 * 10))"
    "/search?agent=agent-5"
    "/search?run_id=run-$((runs - 1))"
    "/search?from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z"
)
for page in "${pages[@]}"; do
    times=()
    bytes=0
    for ((i = 0; i < REPEATS; i++)); do
        read -r code secs bytes < <(curl -sS -o /dev/null -H "Authorization: Bearer $token" \
            -w '%{http_code} %{time_total} %{size_download}\n' "$base$page")
        [[ $code == 200 ]] || { echo "$page: HTTP $code" >&2; exit 1; }
        times+=("$(awk -v s="$secs" 'BEGIN { printf "%d", s * 1000 + 0.5 }')")
    done
    sorted=$(printf '%s\n' "${times[@]}" | sort -n)
    printf '| `%s` | %s | %s | %s | %s |\n' "$page" "$(head -1 <<<"$sorted")" \
        "$(sed -n "$(((REPEATS + 1) / 2))p" <<<"$sorted")" "$(tail -1 <<<"$sorted")" "$bytes"
done
