#!/usr/bin/env bash
# Query-pack timings on a synthetic fleet of N steps (default 10M) in ClickHouse.
#
#   eval "$(scripts/stack env)"; bench/queries.sh [STEPS] [REPEATS]
#
# Applies eddy's migrations to a scratch database (`eddy migrate`), fills steps / runs /
# signals / rollup_minute with INSERT ... SELECT FROM numbers() (50 steps per run, 10 projects,
# 100 agents, one run in five looping from step 20, 3 signals per looping run, half the looping
# runs steered at step 24 and half of those looping again, runs started 3 s
# apart), then runs every query of the pack with `eddy query` REPEATS times and prints
# min / median / max wall milliseconds: what an analyst waits for, process start included.
# Reuses the data when the scratch database already holds STEPS steps.
set -euo pipefail
cd "$(dirname "$0")/.."

STEPS=${1:-10000000}
REPEATS=${2:-5}
DB=${EDDY_BENCH_DB:-eddy_bench_queries}
URL=${EDDY_CLICKHOUSE_URL:?run: eval \"\$(scripts/stack env)\"}
EDDY=${EDDY_BIN:-}
if [[ -z $EDDY ]]; then
    cargo build --release --quiet
    EDDY=${CARGO_TARGET_DIR:-target}/release/eddy
fi
RUNS=$((STEPS / 50))
T0=1767225600 # 2026-01-01T00:00:00Z

ch() { curl -sS --fail-with-body "$URL/" --data-binary @- ; }

export EDDY_CLICKHOUSE_DATABASE=$DB
have=$(echo "SELECT count() FROM $DB.steps" | ch 2>/dev/null || echo 0)
if [[ $have != "$STEPS" ]]; then
    echo "DROP DATABASE IF EXISTS $DB" | ch
    "$EDDY" migrate >/dev/null
    echo "loading $STEPS steps, $RUNS runs into $DB ..." >&2
    t=$(date +%s%N)
    ch <<SQL
INSERT INTO $DB.steps (project_id, run_id, step_index, ts, ts_ms, step_type, agent, caller,
    tool_name, raw_fp, has_raw_fp, canonical_input_fp, canonical_output_fp, tool_success,
    tool_latency_ms, tokens, cost_usd, tokens_in_context, content_len, src_partition, src_offset)
SELECT
    concat('proj-', toString(r % 10)), concat('run-', toString(r)), s,
    toDateTime($T0 + r * 3 + s * 2), ($T0 + r * 3 + s * 2) * 1000, 'tool_call',
    concat('agent-', toString(r % 100)), '',
    concat('tool-', toString(if(looping, 0, cityHash64(number) % 20))),
    SHA256(concat(toString(r), '/', toString(if(looping, 0, s)))), 1,
    SHA256(concat('in', toString(r), '/', toString(if(looping, 0, s)))),
    SHA256(concat('out', toString(number))),
    if(number % 17 = 0, 0, 1), 120.5, 400, 0.002, 8000, 0, toInt32(r % 12), toInt64(number)
FROM (SELECT number, intDiv(number, 50) AS r, number % 50 AS s,
             (r % 5 = 0 AND s >= 20) AS looping FROM numbers($STEPS))
SQL
    ch <<SQL
INSERT INTO $DB.runs (project_id, run_id, event_id, agent_name, started_at, ended_at, ended_ms,
    status, termination_reason, termination_reason_reported, loop_detected, has_loop_step_index,
    loop_step_index, loop_caught_step_index, signals, redeliveries, steps, tool_calls, tokens,
    cost_usd, duration_ms, src_partition, src_offset, steers, has_steered_step_index,
    steered_step_index, steer_outcome)
SELECT
    concat('proj-', toString(r % 10)), concat('run-', toString(r)), hex(SHA256(toString(r))),
    concat('agent-', toString(r % 100)), toDateTime($T0 + r * 3), toDateTime($T0 + r * 3 + 100),
    ($T0 + r * 3 + 100) * 1000, if(lp, 'failed', 'completed'), if(lp, 'loop_detected', 'clean'), 1,
    lp, lp, if(lp, 20, 0), if(lp, 23, 0), if(lp, 3, 0), 0, 50, 50, 20000, 0.1, 100000,
    toInt32(r % 12), toInt64(r * 50 + 49), st, st, if(st, 24, 0),
    if(st, if(r % 20 = 0, 'looped_again', 'recovered'), '')
FROM (SELECT number AS r, r % 5 = 0 AS lp, r % 10 = 0 AS st FROM numbers($RUNS))
SQL
    ch <<SQL
INSERT INTO $DB.signals (event_id, kind, project_id, run_id, agent_name, step_index, ts, ts_ms,
    detector, severity, pattern, fingerprint, hits, step_indices, first_step_index, evidence,
    src_partition, src_offset)
SELECT
    hex(SHA256(concat(toString(r), '/', toString(k)))), if(k = 0, 'loop_warning', 'loop_detected'),
    concat('proj-', toString(r % 10)), concat('run-', toString(r)), concat('agent-', toString(r % 100)),
    22 + k, toDateTime($T0 + r * 3 + (22 + k) * 2), ($T0 + r * 3 + (22 + k) * 2) * 1000,
    'repeat', if(k = 0, 'warning', 'critical'), 'exact_repeat', hex(SHA256(toString(r))), 3 + k,
    [20, 21, 22], 20, '{}', toInt32(r % 12), toInt64(r * 50 + 22 + k)
FROM (SELECT intDiv(number, 3) * 5 AS r, number % 3 AS k FROM numbers(intDiv($RUNS, 5) * 3))
SQL
    ch <<SQL
INSERT INTO $DB.rollup_minute (project_id, bucket, run_id, agent_name, runs_started, runs_ended,
    loop_runs, termination_reason, steps, tool_calls, errors, tokens, cost_usd, loop_steps,
    loop_cost_usd, loops_caught, caught_after_steps, src_partition, src_offset, loops_counted,
    steps_to_catch)
SELECT
    concat('proj-', toString(r % 10)), toDateTime(intDiv($T0 + r * 3, 60) * 60 + m * 60),
    concat('run-', toString(r)), concat('agent-', toString(r % 100)), m = 0, m = 1,
    m = 1 AND r % 5 = 0, if(m = 1, if(r % 5 = 0, 'loop_detected', 'clean'), ''), 25, 25, 1,
    10000, 0.05, if(r % 5 = 0 AND m = 1, 25, 0), if(r % 5 = 0 AND m = 1, 0.05, 0),
    m = 0 AND r % 5 = 0, if(m = 0 AND r % 5 = 0, 3, 0), toInt32(r % 12), toInt64(r * 50 + m),
    m = 0 AND r % 5 = 0, if(m = 0 AND r % 5 = 0, 3, 0)
FROM (SELECT intDiv(number, 2) AS r, number % 2 AS m FROM numbers($RUNS * 2))
SQL
    for table in steps runs signals rollup_minute; do
        echo "OPTIMIZE TABLE $DB.$table FINAL" | ch
    done
    echo "loaded in $((($(date +%s%N) - t) / 1000000)) ms" >&2
fi

rows=$(echo "SELECT count() FROM $DB.steps" | ch)
last_run=$((RUNS - 1))
printf 'ClickHouse %s, %s steps, %s runs; %s runs of each query (ms)\n\n' \
    "$(echo 'SELECT version()' | ch)" "$rows" "$RUNS" "$REPEATS"
printf '| query | min | median | max | result rows |\n|---|---:|---:|---:|---:|\n'
window=(--param project_id=proj-0 --param from=2026-01-01T00:00:00Z --param to=2026-01-08T00:00:00Z)
for name in $("$EDDY" query --list | awk '$1 ~ /^[a-z_]+$/ {print $1}'); do
    args=("${window[@]}")
    case $name in
        run_loops) args=(--param project_id=proj-0 --param run_id=run-$((last_run / 10 * 10))) ;;
        runs_timeseries | agent_rollup) args+=(--param bucket_seconds=3600) ;;
    esac
    times=()
    n=0
    for ((i = 0; i < REPEATS; i++)); do
        t=$(date +%s%N)
        n=$("$EDDY" query "$name" "${args[@]}" | tail -1 | tr -dc 0-9)
        times+=($((($(date +%s%N) - t) / 1000000)))
    done
    sorted=$(printf '%s\n' "${times[@]}" | sort -n)
    printf '| %s | %s | %s | %s | %s |\n' "$name" "$(head -1 <<<"$sorted")" \
        "$(sed -n "$(((REPEATS + 1) / 2))p" <<<"$sorted")" "$(tail -1 <<<"$sorted")" "${n:-0}"
done
