#!/usr/bin/env bash
# Resident memory per open run: `eddy replay` over simulated runs that never finish (the
# simulator's default step mix, `--unfinished-rate 1`), so every run is open at the end; peak RSS
# (GNU time's %M) is taken at several fleet sizes and the per-run figure is the slope between
# them (start-up, buffers and the allocator's base cost cancel out).
#
#   bench/memory.sh [--eddy PATH] [RUNS...]        # default: 20000 100000 200000
#
# Runs are generated in chunks of at most 100k with different seeds and concatenated, so a
# large fleet never has to fit in the generator's memory; all chunks share the same ten minutes of
# event time, so no run reaches the 30-minute idle timeout. Nothing here asserts.
set -euo pipefail
cd "$(dirname "$0")/.."
eddy=${CARGO_TARGET_DIR:-target}/release/eddy
if [[ ${1:-} == --eddy ]]; then eddy=$2; shift 2; fi
sizes=("$@")
((${#sizes[@]})) || sizes=(20000 100000 200000)
[[ -x $eddy ]] || cargo build --release --quiet --bin eddy
timebin=/usr/bin/time
[[ -x $timebin ]] || { echo "needs GNU time (/usr/bin/time)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

prev_runs= prev_kib=
printf '%10s %10s %12s %14s\n' open_runs events peak_rss_MiB KiB/run_slope
for n in "${sizes[@]}"; do
    trace=$work/open-$n.jsonl
    : >"$trace"
    left=$n seed=100
    while ((left > 0)); do
        chunk=$((left < 100000 ? left : 100000))
        "$eddy" simulate --runs "$chunk" --seed "$seed" --unfinished-rate 1 --out - 2>/dev/null >>"$trace"
        left=$((left - chunk)) seed=$((seed + 1))
    done
    events=$(wc -l <"$trace")
    # No eviction cap (default 100k open runs per partition), or larger fleets would measure it.
    kib=$(EDDY_ENGINE__MAX_OPEN_RUNS=0 "$timebin" -f %M "$eddy" replay "$trace" 2>&1 >/dev/null | tail -1)
    slope=-
    if [[ -n $prev_runs ]]; then
        slope=$(awk -v a="$prev_kib" -v b="$kib" -v m="$prev_runs" -v n="$n" 'BEGIN {printf "%.2f", (b - a) / (n - m)}')
    fi
    printf '%10d %10d %12.1f %14s\n' "$n" "$events" "$(awk -v k="$kib" 'BEGIN {print k / 1024}')" "$slope"
    prev_runs=$n prev_kib=$kib
    rm -f "$trace"
done
