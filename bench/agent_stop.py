#!/usr/bin/env python3
"""Stop latency and waste: eddy's verdict reaching a Python agent (clients/python) through the
real local stack, with simulated fleet traffic in the background.

    eval "$(scripts/stack up)"; pip install ./clients/python
    python3 bench/agent_stop.py [--rates 1000,10000] [--rounds 5] [--agents 40] [--eddy PATH]
    python3 bench/agent_stop.py --smoke          # ~30 s: one rate, one short round

It starts its own `eddy run` (fresh topics, group and database), and per offered fleet rate a
child process that replays `eddy simulate`'s fleet onto the input topic at that many events/s
(timestamps set to the send time, so the fleet is live traffic). Meanwhile agents run through
eddy_agent: each emits a step every --interval-ms (distinct calls, then from step --loop-at on
a loop of its kind, see LOOP_KINDS) and checks the guard before each step; while it waits
between steps it checks every millisecond, so the moment the verdict is seen is known to ~1 ms.
The agents take the --kinds in turn (by default every kind, so the worker's default settings
are measured on each).

- latency: time from producing the step that eddy's stop verdict names (its step_index) to
  LoopDetected raised in the agent (one process, one monotonic clock);
- waste: steps the agent executed after that step (0 when the verdict beats the next step);
- steps from onset to stop: the stop verdict's step minus the step at which the loop became
  evident (its onset, as `eddy eval` counts it: e.g. the third identical call; each kind says
  where), per loop kind; how many steps the agent spends in a loop that is already plain.

Per round: p50/p99 latency, p50/p99 waste over the round's agents; printed as min/median/max over
the rounds; then, pooled over all rounds and rates, the steps from onset to stop per loop kind.
Nothing here asserts on timings.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------------- the fleet
def fleet_child(args):
    """Replay the simulated fleet at --rate events/s until SIGTERM; print what was offered."""
    from confluent_kafka import Producer

    # Templates: the run id and the envelope's ts (keys are sorted, so a nested "ts" inside
    # tool_output can come first) become placeholders, filled at send time.
    templates = []
    with open(args.fleet_file, "rb") as f:
        for ln in f:
            if ln.strip():
                ev = json.loads(ln)
                run = ev["run_id"].encode()
                ev["run_id"], ev["ts"] = "@@RUN@@", "@@TS@@"
                templates.append((run, json.dumps(ev, separators=(",", ":")).encode()))
    p = Producer({"bootstrap.servers": args.brokers, "partitioner": "murmur2_random",
                  "linger.ms": 5, "compression.type": "lz4",
                  "queue.buffering.max.messages": 1_000_000})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    start = time.monotonic()
    sent, cycle, i = 0, 0, 0
    while not stop.is_set():
        due = int((time.monotonic() - start) * args.rate)
        if sent >= due:
            time.sleep(0.001)
            continue
        now = str(int(time.time() * 1000)).encode()
        while sent < due:
            run, tpl = templates[i]
            # Each pass over the trace is a new set of runs, at the time it is sent.
            key = run + b"~%d" % cycle
            line = tpl.replace(b'"@@TS@@"', now).replace(b"@@RUN@@", key)
            try:
                p.produce(args.topic, key=key, value=line)
            except BufferError:
                p.poll(0.01)
                continue
            sent += 1
            i += 1
            if i == len(templates):
                i, cycle = 0, cycle + 1
        p.poll(0)
    secs = time.monotonic() - start
    p.flush(10)
    print(json.dumps({"sent": sent, "secs": secs, "rate": sent / secs}), flush=True)


# ---------------------------------------------------------------------------------- the loops
# Each kind: (the loop's step k = 0, 1, ... as Emitter.step keyword arguments; the k at which a
# careful reviewer would call it a loop, the onset). Shapes as tests/corpus*/gen.py write them.
def _exact(k):
    return dict(tool_name="web_search", tool_input={"q": "eddy release date"},
                tool_output={"results": []}, tool_success=True)


def _permanent(k):
    return dict(tool_name="github_api", tool_input={"path": "/repos/acme/app/pulls"},
                tool_output={"status": 401, "message": "Bad credentials"}, tool_success=False)


def _pingpong(k):
    branch = ["main", "feature/login"][k % 2]
    return dict(tool_name="git_checkout", tool_input={"branch": branch},
                tool_output={"ok": True, "head": ["a1b2c3d", "d4e5f6a"][k % 2]}, tool_success=True)


_QUERIES = ["acme corp ceo name", "who is the ceo of acme corp", "name of the acme corp ceo",
            "acme corp ceo", "current ceo of acme corp"]


def _paraphrase(k):
    return dict(tool_name="web_search", tool_input={"query": _QUERIES[k % len(_QUERIES)]},
                tool_output={"results": []}, tool_success=True)


def _monologue(k):
    lines = ["Let me check the deployment configuration first.", "I'll look at the service logs now.",
             "Now I'm going to verify the settings.", "Let me check the configuration again."]
    return dict(step_type="message", content=lines[k % len(lines)])


_PLAN = ["The dashboard shows stale numbers because the cache TTL is 24 hours; lowering the TTL for the revenue panel should make it refresh hourly.",
         "Stale revenue figures come from the day-long cache TTL. If I set that panel's TTL to an hour, it will refresh often enough.",
         "The root cause is the 24h cache on the revenue panel, so reducing its TTL to one hour fixes the staleness.",
         "Revenue panel is stale since its cache lives a whole day; an hourly TTL on that panel is the fix I'll make."]


def _restated_plan(k):
    return dict(step_type="reasoning", content=_PLAN[k % len(_PLAN)])


def _context(k):
    got = 208310 - 2400 * k
    return dict(tool_name="llm_call", tool_input={"model": "claude-sonnet-4", "messages": 180 - 2 * k},
                tool_output={"type": "error", "error": {"type": "invalid_request_error",
                                                        "message": f"prompt is too long: {got} tokens > 200000 maximum"}},
                tool_success=False, tokens_in_context=got)


def _headers(k):
    return dict(tool_name="http_request",
                tool_input={"method": "GET", "url": "https://api.github.com/repos/acme/ledger/issues"},
                tool_output={"status": 200, "headers": {
                    "Date": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()),
                    "ETag": f'W/"{uuid.uuid4().hex}"', "X-RateLimit-Remaining": str(4990 - k),
                    "X-GitHub-Request-Id": uuid.uuid4().hex[:20].upper()},
                    "body": [{"number": 4411, "title": "Ledger close called twice", "state": "open"}]},
                tool_success=True)


_COLUMNS = ["signup_date", "signupDate", "signup_day", "u.signup_date", "signup_ts"]


def _refusal(k):
    col = _COLUMNS[k % len(_COLUMNS)]
    msg = f"Unrecognized name: {col} at [1:{8 + k % 5}]"
    return dict(tool_name="bigquery_query",
                tool_input={"query": f"SELECT {col}, COUNT(*) FROM `acme.analytics.users` GROUP BY 1"},
                tool_output={"error": {"code": 400, "message": msg, "status": "INVALID_ARGUMENT",
                                       "errors": [{"message": msg, "reason": "invalidQuery"}]}},
                tool_success=False)


LOOP_KINDS = {
    # kind: (step k of the loop, onset k)
    "exact": (_exact, 2),              # the third identical call
    "permanent": (_permanent, 1),      # the second identical permanent failure
    "pingpong": (_pingpong, 3),        # the end of the second round
    "paraphrase": (_paraphrase, 2),    # the third reworded search finding nothing
    "monologue": (_monologue, 2),      # the third message with nothing new
    "restated_plan": (_restated_plan, 2),  # the third statement of one plan
    "context": (_context, 2),          # the third context-window failure
    "headers": (_headers, 2),          # the third same answer under new headers
    "refusal": (_refusal, 2),          # the third refusal of a varied call
}


# ---------------------------------------------------------------------------------- the agents
# run id -> when the guard's consumer thread took the stop (its on_stop callback)
RECEIVED = {}


def one_agent(eddy, guard, a, out, lock, kind):
    from eddy_agent import LoopDetected

    loop, onset_k = LOOP_KINDS[kind]
    run = eddy.run_started(agent_name="bench-agent")
    sent = {}
    last = 0
    stop = raised_at = None
    try:
        for i in range(1, a.max_steps + 1):
            guard.check(run)  # before each step
            if i >= a.loop_at:
                step = loop(i - a.loop_at)
            else:
                step = dict(tool_name="web_search", tool_input={"q": f"question {i}"},
                            tool_output={"results": [f"answer {i}"]}, tool_success=True)
            if "tool_name" in step:
                step["tool_latency_ms"] = 2
            last = eddy.step(run, **step)
            sent[last] = time.monotonic()
            due = sent[last] + a.interval_ms / 1000
            while time.monotonic() < due:
                guard.check(run)
                time.sleep(0.001)
    except LoopDetected as e:
        raised_at = time.monotonic()
        stop = e
    eddy.run_finished(run, status="failed" if stop else "completed")
    guard.unwatch(run)
    onset = a.loop_at + onset_k
    with lock:
        if stop is None or stop.step_index not in sent:
            out.append({"stopped": False, "kind": kind})
        else:
            out.append({"stopped": True, "kind": kind, "from_onset": stop.step_index - onset,
                        "latency_ms": (raised_at - sent[stop.step_index]) * 1000,
                        "pipeline_ms": (RECEIVED.get(run, raised_at) - sent[stop.step_index]) * 1000,
                        "waste": last - stop.step_index,
                        "verdict_step": stop.step_index, "detector": stop.detector})


def agent_round(eddy, guard, a):
    out, lock = [], threading.Lock()
    kinds = a.kinds.split(",")
    todo = [kinds[i % len(kinds)] for i in range(a.agents)]
    tlock = threading.Lock()

    def worker():
        while True:
            with tlock:
                if not todo:
                    return
                kind = todo.pop()
            one_agent(eddy, guard, a, out, lock, kind)

    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    # nearest-rank percentile
    k = max(0, min(len(xs) - 1, int(-(-q * len(xs) // 100)) - 1))
    return xs[k]


# ---------------------------------------------------------------------------------- set-up
def find_eddy(a):
    if a.eddy:
        return a.eddy
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    for prof in ("release", "debug"):
        p = os.path.join(target, prof, "eddy")
        if os.access(p, os.X_OK):
            return p
    sys.exit("no eddy binary: cargo build --release --bin eddy, or --eddy PATH")


def ch(url, sql):
    req = urllib.request.Request(url, data=sql.encode(), method="POST")
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default=os.environ.get("EDDY_KAFKA_BROKERS", "127.0.0.1:19092"))
    ap.add_argument("--clickhouse", default=os.environ.get("EDDY_CLICKHOUSE_URL", "http://127.0.0.1:18123"))
    ap.add_argument("--eddy", help="eddy binary (default: $CARGO_TARGET_DIR/{release,debug}/eddy)")
    ap.add_argument("--rates", default="1000,10000", help="fleet events/s, comma-separated")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--agents", type=int, default=40, help="agents per round")
    ap.add_argument("--concurrency", type=int, default=4, help="agents running at once")
    ap.add_argument("--interval-ms", type=int, default=50)
    ap.add_argument("--loop-at", type=int, default=5, help="step k at which an agent starts looping")
    ap.add_argument("--kinds", default=",".join(LOOP_KINDS),
                    help="loop kinds the agents take in turn (default: all): " + ", ".join(LOOP_KINDS))
    ap.add_argument("--max-steps", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--warmup-s", type=float, default=5)
    ap.add_argument("--worker-env", action="append", default=[],
                    help="KEY=VALUE for eddy run, e.g. EDDY_FLUSH_INTERVAL_MS=1000")
    ap.add_argument("--guard-isolation", default="read_committed",
                    choices=["read_committed", "read_uncommitted"],
                    help="the guard's isolation.level (matters with delivery = exactly_once)")
    ap.add_argument("--smoke", action="store_true", help="one rate (1000/s), one round of 8 agents")
    ap.add_argument("--fleet-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--fleet-file", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--rate", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.fleet_child:
        return fleet_child(a)
    if a.smoke:
        a.rates, a.rounds, a.agents, a.warmup_s = "1000", 1, 2 * len(a.kinds.split(",")), 3
    unknown = set(a.kinds.split(",")) - set(LOOP_KINDS)
    if unknown:
        sys.exit(f"unknown loop kinds {sorted(unknown)}: pick from {', '.join(LOOP_KINDS)}")
    try:
        from eddy_agent import Emitter, Guard
    except ImportError as e:
        sys.exit(f"cannot import eddy_agent ({e}): pip install ./clients/python")

    eddy_bin = find_eddy(a)
    nonce = f"agentbench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    topics = {"in": f"b.{nonce}.steps", "out": f"b.{nonce}.signals", "dlq": f"b.{nonce}.dlq"}
    db = f"eddy_b_{nonce}"
    tmp = tempfile.mkdtemp(prefix="eddy-agent-bench-")
    rates = [int(r) for r in a.rates.split(",")]
    fleet_file = os.path.join(tmp, "fleet.jsonl")
    # ~14 events a run; enough distinct runs for a minute of the highest rate, then it cycles.
    runs = max(200, int(max(rates) * 60 / 14))
    subprocess.run([eddy_bin, "simulate", "--runs", str(runs), "--seed", "11", "--out", fleet_file],
                   check=True, stdout=subprocess.DEVNULL)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "EDDY_KAFKA_BROKERS": a.brokers, "EDDY_CLICKHOUSE_URL": a.clickhouse,
        "EDDY_CLICKHOUSE_DATABASE": db, "EDDY_INPUT_TOPIC": topics["in"],
        "EDDY_OUTPUT_TOPIC": topics["out"], "EDDY_DLQ_TOPIC": topics["dlq"],
        "EDDY_GROUP_ID": f"b.{nonce}.group", "EDDY_ADMIN_ADDR": "127.0.0.1:0",
        "EDDY_TOPIC_PARTITIONS": str(a.partitions), "EDDY_PROGRESS_INTERVAL_S": "0",
        "EDDY_LOG": "warn",
    }
    for kv in a.worker_env:
        k, _, v = kv.partition("=")
        env[k] = v
    worker = subprocess.Popen([eddy_bin, "run"], env=env, stdout=subprocess.DEVNULL)
    fleet = None
    results = {}
    try:
        guard = Guard(a.brokers, topic=topics["out"], wait_ready=None,
                      on_stop=lambda stop: RECEIVED.__setitem__(stop.run_id, time.monotonic()),
                      isolation_level=a.guard_isolation)
        if not guard.wait_ready(60):
            sys.exit("the worker did not create the signals topic within 60 s")
        eddy = Emitter(a.brokers, topic=topics["in"], project_id="bench", guard=guard)
        settings = {k: v for k, v in env.items() if k.startswith("EDDY_") and k not in (
            "EDDY_KAFKA_BROKERS", "EDDY_CLICKHOUSE_URL", "EDDY_CLICKHOUSE_DATABASE",
            "EDDY_INPUT_TOPIC", "EDDY_OUTPUT_TOPIC", "EDDY_DLQ_TOPIC", "EDDY_GROUP_ID",
            "EDDY_ADMIN_ADDR", "EDDY_LOG", "EDDY_PROGRESS_INTERVAL_S")}
        print(f"eddy {eddy_bin}; worker settings {settings} (others default); agent linger.ms 5, "
              f"guard {a.guard_isolation}, fetch.wait.max.ms 100; step every {a.interval_ms} ms, loop from step "
              f"{a.loop_at}; {a.agents} agents x {a.rounds} rounds per rate, {a.concurrency} at once",
              flush=True)
        for rate in rates:
            fleet = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--fleet-child", "--brokers", a.brokers,
                 "--fleet-file", fleet_file, "--topic", topics["in"], "--rate", str(rate)],
                stdout=subprocess.PIPE, text=True)
            time.sleep(a.warmup_s)  # a fixed warm-up of the fleet, not a wait on a condition
            rounds = []
            for r in range(a.rounds):
                if worker.poll() is not None:
                    sys.exit(f"eddy run exited ({worker.returncode})")
                out = agent_round(eddy, guard, a)
                stopped = [o for o in out if o["stopped"]]
                lat = [o["latency_ms"] for o in stopped]
                waste = [o["waste"] for o in stopped]
                row = {"agents": len(out), "stopped": len(stopped),
                       "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "max_ms": max(lat, default=float("nan")),
                       "pipe_p50": pct([o["pipeline_ms"] for o in stopped], 50),
                       "pipe_p99": pct([o["pipeline_ms"] for o in stopped], 99),
                       "waste_p50": pct(waste, 50), "waste_p99": pct(waste, 99),
                       "verdict_after_loop_start": statistics.median(
                           [o["verdict_step"] - a.loop_at for o in stopped]) if stopped else None,
                       "lat": lat, "waste": waste, "agents_out": out}
                rounds.append(row)
                print(f"rate {rate}/s round {r + 1}: {len(stopped)}/{len(out)} stopped, latency p50 "
                      f"{row['p50_ms']:.1f} ms p99 {row['p99_ms']:.1f} ms max {row['max_ms']:.1f} ms "
                      f"(to the guard's thread: p50 {row['pipe_p50']:.1f} p99 {row['pipe_p99']:.1f} ms), "
                      f"waste p50 {row['waste_p50']} p99 {row['waste_p99']}, verdict "
                      f"{row['verdict_after_loop_start']} steps after the loop began", flush=True)
            fleet.send_signal(signal.SIGTERM)
            offered = json.loads(fleet.communicate(timeout=60)[0].strip().splitlines()[-1])
            fleet = None
            results[rate] = (rounds, offered)
        eddy.flush(10)
        guard.close()
    finally:
        if fleet is not None:
            fleet.kill()
        worker.terminate()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            from confluent_kafka.admin import AdminClient
            admin = AdminClient({"bootstrap.servers": a.brokers})  # alive until the futures end
            futs = admin.delete_topics(
                list(topics.values()) + [f"b.{nonce}.group.changelog"], operation_timeout=30)
            for f in futs.values():
                f.result(60)
        except Exception as e:
            print(f"clean-up of topics b.{nonce}.*: {e}", file=sys.stderr)
        try:
            ch(a.clickhouse, f"DROP DATABASE IF EXISTS {db}")
        except Exception as e:
            print(f"clean-up of database {db}: {e}", file=sys.stderr)

    print()
    print("| fleet load (offered) | metric | min | median | max |")
    print("|---|---|---|---|---|")
    for rate, (rounds, offered) in results.items():
        load = f"{rate}/s ({offered['rate']:.0f}/s)"
        for key, name, fmt in (("p50_ms", "latency p50, ms", "{:.1f}"),
                               ("p99_ms", "latency p99, ms", "{:.1f}"),
                               ("waste_p50", "waste p50, steps", "{}"),
                               ("waste_p99", "waste p99, steps", "{}")):
            vals = [r[key] for r in rounds]
            print(f"| {load} | {name} | {fmt.format(min(vals))} | "
                  f"{fmt.format(statistics.median(vals))} | {fmt.format(max(vals))} |")
        lat = [x for r in rounds for x in r["lat"]]
        waste = [x for r in rounds for x in r["waste"]]
        stopped = sum(r["stopped"] for r in rounds)
        agents = sum(r["agents"] for r in rounds)
        print(f"| {load} | all rounds pooled: {stopped}/{agents} stopped, latency p50 "
              f"{pct(lat, 50):.1f} / p99 {pct(lat, 99):.1f} ms, waste p50 {pct(waste, 50)} / "
              f"p99 {pct(waste, 99)} | | | |")

    print()
    print("| loop kind | agents | stopped | steps from onset to stop, median (p90) | "
          "waste after the verdict's step, p50 (p99) |")
    print("|---|---|---|---|---|")
    everyone = [o for rounds, _ in results.values() for r in rounds for o in r["agents_out"]]
    for kind in a.kinds.split(","):
        mine = [o for o in everyone if o["kind"] == kind]
        done = [o for o in mine if o["stopped"]]
        steps = [o["from_onset"] for o in done]
        waste = [o["waste"] for o in done]
        print(f"| {kind} | {len(mine)} | {len(done)} | {pct(steps, 50)} ({pct(steps, 90)}) | "
              f"{pct(waste, 50)} ({pct(waste, 99)}) |")


if __name__ == "__main__":
    main()
