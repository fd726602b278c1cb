#!/usr/bin/env bash
# Failover pause: from a worker's SIGKILL to its partitions producing signals again on the other
# worker of the group, with RUNS simulated runs open (`--unfinished-rate 1 --loop-rate 0`).
#
#   eval "$(scripts/stack env)"
#   bench/failover.sh [--eddy PATH] [--probe PATH] [RUNS] [REPEATS] [PARTITIONS]
#                                                   # default: 100000 3 4
#
# Every invocation uses fresh topics, group and ClickHouse database (all named failover_<time>),
# and deletes them at the end (EDDY_FAILOVER_KEEP=1 keeps them). Two `eddy run` workers (A and B,
# admin ports 19470/19471) share the group, with session_timeout_ms = 6000 (the brokers' minimum;
# the default 45000 would add ~39 s to every figure) and max_open_runs = 0 (no eviction cap).
# Each repetition:
#   1. waits until both workers own partitions and the group's committed offsets cover the input
#      topic (lag 0), i.e. flushed (restores are lazy: a partition restores at its first message);
#   2. SIGKILLs the older worker at T0 and at once produces, into every input partition, a fresh
#      run whose identical tool calls fire the detectors at its 2nd step
#      (examples/failover_probe.rs: run ids picked by `partition_for`, as the producer's murmur2);
#   3. reads the output topic until each of those runs has its first signal;
#   4. starts a new worker in the killed one's place (it takes partitions back at the next
#      rebalance, which step 1 of the next repetition waits for).
# The pause of a killed partition = its first signal read - T0, split by the survivor's log into
# detection (T0 -> "partitions assigned" with it: session timeout + rebalance), restore ("state
# restored from changelog": its `ms`, and when it ended) and processing (restore end -> signal).
# The survivor's own partitions give the latency of the same probe without a rebalance (but with
# a restore when the survivor was (re)started since its partitions last saw a message, as the
# restarted worker is from the second repetition on). Nothing asserts.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
eddy=$target/release/eddy
probe=$target/release/examples/failover_probe
while [[ ${1:-} == --* ]]; do
    case $1 in
    --eddy) eddy=$2 ;;
    --probe) probe=$2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done
runs=${1:-100000} repeats=${2:-3} parts=${3:-4}
[[ -x $eddy ]] || cargo build --release --quiet --bin eddy
[[ -x $probe ]] || cargo build --release --quiet --example failover_probe
: "${EDDY_KAFKA_BROKERS:?eval \"\$(scripts/stack env)\" first}"
brokers=$EDDY_KAFKA_BROKERS
ch_url=${EDDY_CLICKHOUSE_URL:-http://127.0.0.1:18123}

tag=failover_$(date +%s)_$$
work=$(mktemp -d)
export EDDY_INPUT_TOPIC=$tag.steps EDDY_OUTPUT_TOPIC=$tag.signals EDDY_DLQ_TOPIC=$tag.dlq
export EDDY_GROUP_ID=$tag EDDY_CLICKHOUSE_DATABASE=$tag EDDY_TOPIC_PARTITIONS=$parts
export EDDY_SESSION_TIMEOUT_MS=6000 EDDY_ENGINE__MAX_OPEN_RUNS=0 EDDY_LOG_FORMAT=json
export EDDY_CLICKHOUSE_URL=$ch_url

declare -A pid=() log=() born=()
gen=0
start_worker() { # NAME PORT
    gen=$((gen + 1))
    log[$1]=$work/$1.$gen.log
    EDDY_ADMIN_ADDR=127.0.0.1:$2 "$eddy" run >"${log[$1]}" 2>&1 &
    pid[$1]=$!
    born[$1]=$gen
}
cleanup() {
    kill "${watchdog:-}" 2>/dev/null || true
    for w in "${!pid[@]}"; do kill -9 "${pid[$w]}" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [[ ${EDDY_FAILOVER_KEEP:-} != 1 ]]; then
        for t in "$EDDY_INPUT_TOPIC" "$EDDY_OUTPUT_TOPIC" "$EDDY_DLQ_TOPIC" "$tag.changelog"; do
            scripts/stack kafka topics --bootstrap-server "$brokers" --delete --topic "$t" \
                >/dev/null 2>&1 || true
        done
        curl -fsS "$ch_url" --data-binary "DROP DATABASE IF EXISTS $tag" >/dev/null 2>&1 || true
        rm -rf "$work"
    else
        echo "kept: topics and database $tag, logs in $work" >&2
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A million open runs write ~5 GB to Kafka (input ~2.6 GB, changelog ~2.4 GB) plus ClickHouse's
# rows: stop (and delete everything) before the disk holding the working directory runs low.
min_free_gb=${EDDY_FAILOVER_MIN_FREE_GB:-3}
(
    while sleep 5; do
        free_kb=$(df -Pk "${EDDY_STACK_DIR:-/tmp/eddy-stack}" | awk 'NR == 2 {print $4}')
        if ((free_kb < min_free_gb * 1024 * 1024)); then
            echo "less than $min_free_gb GB free on disk: stopping" >&2
            kill -TERM $$
            exit
        fi
    done
) &
watchdog=$!

# logq LOG what [ARGS]: facts from a worker's JSON log (stdlib Python only).
logq() {
    python3 - "$@" <<'EOF'
import json, sys, datetime
path, what, args = sys.argv[1], sys.argv[2], sys.argv[3:]
def ms(ts):
    return int(datetime.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)
def parts(s):
    return [int(x) for x in s.strip("[]").split(",") if x.strip()]
lines = []
for l in open(path, errors="replace"):
    try:
        lines.append(json.loads(l))
    except ValueError:
        pass
owned, assigned, restored = set(), 0, 0
for l in lines:
    f = l.get("fields", {})
    m = f.get("message", "")
    if m == "partitions assigned":
        owned |= set(parts(f["partitions"]))
        assigned += len(parts(f["partitions"]))
    elif m.startswith("partitions revoked"):
        owned -= set(parts(f["partitions"]))
    elif m == "state restored from changelog":
        restored += 1
if what == "owned":          # partitions owned now
    print(" ".join(map(str, sorted(owned))))
elif what == "since":        # per partition assigned after T0: assigned_ms restored_end_ms ms open_runs records
    t0, want = int(args[0]), set(int(p) for p in args[1:])
    got = {}
    for l in lines:
        f = l.get("fields", {})
        m, t = f.get("message", ""), ms(l["timestamp"])
        if t < t0:
            continue
        if m == "partitions assigned":
            for p in parts(f["partitions"]):
                if p in want and p not in got:
                    got[p] = [t, None, None, None, None]
        elif m == "state restored from changelog":
            p = int(f["partition"])
            if p in got and got[p][1] is None:
                got[p][1:] = [t, int(f["ms"]), int(f["open_runs"]), int(f["records"])]
    for p in sorted(want):
        g = got.get(p, [None] * 5)
        print(p, *["-" if x is None else x for x in g])
EOF
}

now_ms() { date +%s%3N; }

# await_ready: both workers alive, each owns >= 1 partition, together all of them, group lag 0
# (everything flushed and committed) — on two checks in a row, a second apart. A partition's
# restore is not awaited: a worker restores a partition when its first message arrives, so the
# probe's message starts the restore of every partition that moved.
await_ready() {
    local deadline=$(($(date +%s) + ${1:-1800})) ok=0
    while ((ok < 2)); do
        if (($(date +%s) > deadline)); then
            echo "workers never became ready; logs:" >&2
            for w in "${!log[@]}"; do tail -5 "${log[$w]}" >&2; done
            exit 1
        fi
        sleep 1
        local all="" w o good=1
        for w in A B; do
            kill -0 "${pid[$w]}" 2>/dev/null || { echo "worker $w died:" >&2; tail -20 "${log[$w]}" >&2; exit 1; }
            o=$(logq "${log[$w]}" owned)
            [[ -n $o ]] || good=0
            all+=" $o"
        done
        local n
        n=$(tr ' ' '\n' <<<"$all" | grep -E '^[0-9]+$' | sort -un | wc -l)
        ((n == parts)) || good=0
        ((good)) && [[ $("$probe" lag "$brokers" "$EDDY_GROUP_ID" "$EDDY_INPUT_TOPIC") == 0 ]] || good=0
        if ((good)); then ok=$((ok + 1)); else ok=0; fi
    done
}

echo "# failover pause: $runs open runs, $parts partitions, $repeats repetitions, session_timeout_ms=$EDDY_SESSION_TIMEOUT_MS"
echo "# eddy: $eddy  topics/group/database: $tag  host: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
t=$(date +%s)
left=$runs seed=100
while ((left > 0)); do
    chunk=$((left < 100000 ? left : 100000))
    "$eddy" simulate --runs "$chunk" --seed "$seed" --unfinished-rate 1 --loop-rate 0 2>"$work/simulate.log" \
        || { cat "$work/simulate.log" >&2; exit 1; }
    left=$((left - chunk)) seed=$((seed + 1))
done
echo "# produced $runs runs in $(($(date +%s) - t)) s"

t=$(date +%s)
start_worker A 19470
until [[ $(logq "${log[A]}" owned) =~ ^[0-9] ]]; do sleep 0.5; kill -0 "${pid[A]}" || { tail "${log[A]}" >&2; exit 1; }; done
until [[ $("$probe" lag "$brokers" "$EDDY_GROUP_ID" "$EDDY_INPUT_TOPIC") == 0 ]]; do sleep 1; kill -0 "${pid[A]}" || { tail "${log[A]}" >&2; exit 1; }; done
echo "# worker A consumed and committed everything in $(($(date +%s) - t)) s"
start_worker B 19471
t=$(date +%s)
await_ready
echo "# worker B joined, group rebalanced and flushed in $(($(date +%s) - t)) s"

# Event time of the probe runs: within the simulated fleet's ten minutes, so the partition
# watermarks do not move and no open run times out.
probe_ts=$((1767225600000 + 600000))
results=$work/results
: >"$results"
printf '%4s %6s %9s %5s %9s %9s %10s %9s %9s %10s %9s\n' rep killed partition owner pause_ms detect_ms restore_ms open_runs records process_ms baseline
for rep in $(seq 1 "$repeats"); do
    # The older worker dies.
    if ((born[A] < born[B])); then victim=A survivor=B; else victim=B survivor=A; fi
    vparts=$(logq "${log[$victim]}" owned)
    t0=$(now_ms)
    kill -9 "${pid[$victim]}"
    out=$("$probe" probe "$brokers" "$EDDY_INPUT_TOPIC" "$EDDY_OUTPUT_TOPIC" "${tag}_$rep" "$probe_ts" 600)
    wait "${pid[$victim]}" 2>/dev/null || true
    unset "pid[$victim]"
    # shellcheck disable=SC2086
    split=$(logq "${log[$survivor]}" since "$t0" $vparts)
    sent=() sig=()
    for p in $(seq 0 $((parts - 1))); do sent[p]=- sig[p]=-; done
    while read -r kind p run a b _; do
        case $kind in
        sent) sent[p]=$a ;;
        signal) sig[p]=$a ;;
        missing) sig[p]=- ;;
        esac
    done <<<"$out"
    for p in $(seq 0 $((parts - 1))); do
        if [[ " $vparts " == *" $p "* ]]; then
            read -r _ assigned restored rms open recs < <(grep "^$p " <<<"$split")
            pause=- detect=- process=-
            if [[ ${sig[p]} != - ]]; then pause=$((sig[p] - t0)); fi
            [[ $assigned == - ]] || detect=$((assigned - t0))
            [[ $restored == - || ${sig[p]} == - ]] || process=$((sig[p] - restored))
            printf '%4d %6s %9d %5s %9s %9s %10s %9s %9s %10s %9s\n' "$rep" "$victim" "$p" "$survivor" "$pause" "$detect" "$rms" "$open" "$recs" "$process" -
            echo "killed $pause $detect $rms $process" >>"$results"
        else
            base=-
            [[ ${sig[p]} == - || ${sent[p]} == - ]] || base=$((sig[p] - sent[p]))
            printf '%4d %6s %9d %5s %9s %9s %10s %9s %9s %10s %9s\n' "$rep" "-" "$p" "$survivor" - - - - - - "$base"
            echo "survivor $base" >>"$results"
        fi
    done
    if ((rep < repeats)); then
        if [[ $victim == A ]]; then start_worker A 19470; else start_worker B 19471; fi
        await_ready
    fi
done

stats() { # column of numbers on stdin -> "min median max (n)"
    sort -n | awk '{v[NR] = $1} END {if (!NR) {print "-"; exit}
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%s / %s / %s ms (n=%d)", v[1], m, v[NR], NR}'
}
echo
echo "min / median / max over every killed partition of $repeats repetitions ($runs open runs):"
echo "  pause (SIGKILL -> first signal):  $(awk '$1 == "killed" && $2 != "-" {print $2}' "$results" | stats)"
echo "  detection (-> assigned on B):     $(awk '$1 == "killed" && $3 != "-" {print $3}' "$results" | stats)"
echo "  restore (log ms):                 $(awk '$1 == "killed" && $4 != "-" {print $4}' "$results" | stats)"
echo "  processing (restored -> signal):  $(awk '$1 == "killed" && $5 != "-" {print $5}' "$results" | stats)"
echo "  undisturbed partitions, probe latency: $(awk '$1 == "survivor" && $2 != "-" {print $2}' "$results" | stats)"
missing=$(awk '$1 == "killed" && $2 == "-"' "$results" | wc -l)
((missing == 0)) || echo "  $missing killed partitions never signalled within 600 s"
