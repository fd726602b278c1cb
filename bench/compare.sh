#!/usr/bin/env bash
# Peer comparison: the same simulated trace through loopguard-runtime, keelwave's fingerprint
# check and `eddy replay`, each pinned to one core (CPU 0), printing events/s and the ratio.
#
#   bench/compare.sh [--runs N] [--repeat K] [--eddy PATH]
#
#   --runs N     simulated runs in the trace (default 5000, ~75k events)
#   --repeat K   time each contender K times and print min/median/max (default 3)
#   --eddy PATH  the eddy binary (default: $CARGO_TARGET_DIR/release/eddy, built if missing)
#
# The peers come from PyPI, installed by `scripts/bootstrap --dev` into its venv ($EDDY_BENCH_VENV
# overrides it). eddy's figure is the whole process (start-up, reading,
# decoding, all detectors, writing its output events to /dev/null); the Python figures cover only
# the loop over the trace (their interpreter start-up and imports are left out, which favours
# them). Nothing here asserts on timings.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=5000
repeat=3
eddy=
while (($#)); do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --eddy) eddy=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done

target=${CARGO_TARGET_DIR:-target}
if [[ -z $eddy ]]; then
    eddy=$target/release/eddy
    [[ -x $eddy ]] || cargo build --release --quiet --bin eddy
fi

# The peers come from PyPI through `scripts/bootstrap --dev`, into its venv.
venv=${EDDY_BENCH_VENV:-${EDDY_CACHE_DIR:-$HOME/.cache/eddy}/venv}
if ! "$venv/bin/python" -c 'import loopguard, keelwave' 2>/dev/null; then
    echo "compare.sh: the peers are not installed in $venv: run scripts/bootstrap --dev" >&2
    exit 1
fi
py=$venv/bin/python
pin=(taskset -c 0)
command -v taskset >/dev/null || pin=()

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trace=$work/trace.jsonl
"$eddy" simulate --runs "$runs" --out "$trace" 2>"$work/sim.log"
events=$(grep -c . "$trace")
bytes=$(wc -c <"$trace")
echo "trace: $runs runs, $events events, $((bytes / events)) bytes/event (eddy simulate, seed 7)"
# How repetitive the trace is: memoised work (error texts, tool names) pays off in proportion.
"$py" - "$trace" <<'PY'
import json, sys
seen, tools, repeats = set(), 0, 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("kind") != "step" or not e.get("tool_name"):
        continue
    tools += 1
    k = (e["tool_name"], json.dumps(e.get("tool_input")), json.dumps(e.get("tool_output")))
    repeats += k in seen
    seen.add(k)
print(f"trace: {repeats / max(tools, 1):.0%} of its {tools} tool steps repeat an earlier one byte for byte (name, input, output)")
PY
echo "versions: $("$venv/bin/pip" list 2>/dev/null | grep -Ei '^(loopguard-runtime|keelwave) ' | tr -s ' ' | paste -sd, -)"

# stats VALUES... -> "min median max" (events/s)
stats() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {printf "%.0f %.0f %.0f", a[1], a[int((NR+1)/2)], a[NR]}'; }

declare -A med
row() { # name, then events/s samples
    local name=$1; shift
    read -r lo mid hi <<<"$(stats "$@")"
    med[$name]=$mid
    printf '%-34s %12s %12s %12s\n' "$name" "$lo" "$mid" "$hi"
}

eddy_eps=() lg_eps=() kw_eps=()
for ((i = 0; i < repeat; i++)); do
    t0=$(date +%s%N)
    "${pin[@]}" "$eddy" replay "$trace" >/dev/null
    t1=$(date +%s%N)
    eddy_eps+=("$(awk -v n="$events" -v ns=$((t1 - t0)) 'BEGIN {print n / (ns / 1e9)}')")
    lg_eps+=("$("${pin[@]}" "$py" bench/peers.py loopguard "$trace" | sed -E 's/.*events_per_s=([0-9.]+).*/\1/')")
    kw_eps+=("$("${pin[@]}" "$py" bench/peers.py keelwave "$trace" | sed -E 's/.*events_per_s=([0-9.]+).*/\1/')")
done

printf '%-34s %12s %12s %12s   (events/s, %d runs, one core)\n' "contender" "min" "median" "max" "$repeat"
row "eddy replay (all detectors)" "${eddy_eps[@]}"
row "loopguard-runtime (defaults)" "${lg_eps[@]}"
row "keelwave check_fingerprint (ref)" "${kw_eps[@]}"
awk -v e="${med[eddy replay (all detectors)]}" -v l="${med[loopguard-runtime (defaults)]}" \
    -v k="${med[keelwave check_fingerprint (ref)]}" \
    'BEGIN {printf "ratio eddy/loopguard-runtime: %.1fx   eddy/keelwave fingerprint: %.1fx (medians)\n", e / l, e / k}'
