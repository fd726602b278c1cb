#!/usr/bin/env python3
"""Kafka `Guard` vs `HttpGuard` side by side (narrowed to its runs, `http`, and following its
whole project, `http-project`): N guards (one per simulated agent process, each
watching its one run), a workload of looping runs, and what each kind costs the broker, the
bridge and the agent.

    eval "$(scripts/stack env)"          # Kafka + ClickHouse
    python3 bench/guards.py --eddy $CARGO_TARGET_DIR/debug/eddy --guards 1000

It starts its own `eddy run` and `eddy ingest-http` on fresh topics, then for each kind:
- spawns --procs child processes holding --guards guards in all (threads; each guard has its
  own consumer or connection, as separate agent processes would);
- sends --loops looping runs watched by guards of project `bench` and as many looping runs of
  --other-projects other projects nobody here watches (the rest of a shared fleet);
- measures, over the whole phase:
  * broker egress to the guards: librdkafka's `rx_bytes` (bytes read from the brokers' sockets,
    from its statistics) summed over the Kafka guards; for the HTTP kind, one Kafka guard runs
    alongside as a stand-in for the bridge's single consumer of the topic;
  * the broker's CPU time (its JVM process, /proc), the bridge's CPU time, its open project
    streams (its /metrics) and the bytes the HTTP guards read from it;
  * the guard processes' own CPU time (what the agents' machines pay);
  * produce -> LoopDetected latency: from the producer's send of the step that shows the loop
    (the signal's `step_index`) to the guard's `on_stop`, per watched looping run.
Prints min/median/max and p50/p99 per kind, and one JSON line per kind.
"""
import argparse
import json
import os
import queue
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "clients", "python", "src"))


def now() -> float:
    return time.time()


# ---------------------------------------------------------------------------------- child side
def child(args) -> None:
    """Hold guards, report when ready, record stops, report on `report`."""
    import logging

    from eddy_agent import Guard, HttpGuard

    logging.getLogger("eddy_agent.kafka").setLevel(logging.CRITICAL)
    runs = json.loads(sys.stdin.readline())
    stops = {}
    stats_last = {}
    lock = threading.Lock()

    def on_stop(stop):
        with lock:
            stops.setdefault(stop.run_id, (now(), stop.step_index))

    guards = []
    for i, run in enumerate(runs):
        if args.kind == "kafka" or run is None:
            def stats_cb(s, i=i):
                stats_last[i] = s
            g = Guard(args.brokers, args.signals_topic, on_stop=on_stop, wait_ready=None,
                      lookback_s=0, stats_cb=stats_cb, statistics_interval_ms=1000)
        else:
            # http: the stream narrowed to the guard's runs; http-project: the whole project's.
            narrow = 0 if args.kind == "http-project" else 200
            g = HttpGuard(args.url, args.key, on_stop=on_stop, wait_ready=None,
                          max_narrowed_runs=narrow)
        if run is not None:
            g.watch(run, "bench")
        guards.append(g)
    deadline = time.monotonic() + 120
    for g in guards:
        if not g.wait_ready(max(1.0, deadline - time.monotonic())):
            print(json.dumps({"event": "not_ready"}), flush=True)
            os._exit(1)
    print(json.dumps({"event": "ready"}), flush=True)
    sys.stdin.readline()  # "report"
    time.sleep(2.5)  # one more statistics interval: the rx_bytes cover the whole phase
    rx = [json.loads(s)["rx_bytes"] for s in stats_last.values()]
    http_bytes = [g.bytes for g in guards if isinstance(g, HttpGuard)]
    http_connects = [g.connects for g in guards if isinstance(g, HttpGuard)]
    with lock:
        out = {"event": "report", "stops": stops, "rxbytes": rx, "http_bytes": http_bytes,
               "http_connects": http_connects}
    print(json.dumps(out), flush=True)
    os._exit(0)  # closing a thousand consumers one by one only adds minutes


# --------------------------------------------------------------------------------- parent side
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime, stime (and the children's) in clock ticks: fields 14-17 of stat(5).
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def metric(admin: str, name: str, label: str) -> float:
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name) and label in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_port(addr: str, proc: subprocess.Popen, timeout=60) -> None:
    host, port = addr.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args} exited ({proc.returncode})")
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {addr} after {timeout}s")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def summary(xs, unit=""):
    if not xs:
        return "n/a"
    return (f"min {min(xs):.1f}{unit} median {statistics.median(xs):.1f}{unit} "
            f"max {max(xs):.1f}{unit}")


def phase(args, kind, worker_cfg, bridge, url, key) -> dict:
    from eddy_agent import Emitter

    tag = uuid.uuid4().hex[:8]
    watched = [f"{kind}-{tag}-loop-{i}" for i in range(args.loops)]
    # Guard i watches run i (an agent process and its run); the rest watch runs that stay quiet.
    runs = watched + [f"{kind}-{tag}-idle-{i}" for i in range(args.guards - args.loops)]
    runs = [runs[i::args.procs] for i in range(args.procs)]
    if kind.startswith("http"):
        runs[0] = runs[0] + [None]  # the bridge's stand-in: one Kafka reader of the topic
    procs = []
    for part in runs:
        p = subprocess.Popen(
            [sys.executable, __file__, "--child", "--kind", kind, "--brokers", args.brokers,
             "--signals-topic", worker_cfg["output_topic"], "--url", url, "--key", key],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        p.stdin.write(json.dumps(part) + "\n")
        p.stdin.flush()
        procs.append(p)
    for p in procs:
        line = json.loads(p.stdout.readline() or '{"event": "exited"}')
        if line["event"] != "ready":
            raise SystemExit(f"a {kind} guard process is not ready: {line}")
    broker0, bridge0, t0 = cpu_seconds(args.broker_pid), cpu_seconds(bridge.pid), now()
    guards0 = sum(cpu_seconds(p.pid) for p in procs)
    streams = metric(bridge.admin, "eddy_ingest_signal_streams", 'route="project"')

    # The workload: looping runs of `bench` (watched) and of other projects (nobody here).
    em = Emitter(args.brokers, worker_cfg["input_topic"], "bench", agent_name="bench-agent",
                 linger_ms=1)
    others = [(f"other-{i % args.other_projects}", f"{kind}-{tag}-other-{i}")
              for i in range(args.loops)]
    sent = {}
    for run in watched:
        em.run_started(run, watch=False)
    for project, run in others:
        em.run_started(run, project_id=project, watch=False)
    em.flush(10)
    for step in range(1, args.steps + 1):
        for run in watched:
            sent[(run, step)] = now()
            em.step(run, tool_name="web_search", tool_input={"q": "same"}, tool_output="none")
            em.poll(0)
        for project, run in others:
            em.step(run, project_id=project, tool_name="web_search", tool_input={"q": "x"},
                    tool_output="none")
        em.flush(10)
        time.sleep(args.pace_ms / 1000)
    for run in watched:
        em.run_finished(run, status="failed")
    for project, run in others:
        em.run_finished(run, project_id=project, status="failed")
    em.flush(10)
    time.sleep(args.tail_s)  # quiet time: what idle guards cost
    broker_cpu = cpu_seconds(args.broker_pid) - broker0
    bridge_cpu = cpu_seconds(bridge.pid) - bridge0
    guards_cpu = sum(cpu_seconds(p.pid) for p in procs) - guards0
    seconds = now() - t0
    reports = []
    for p in procs:
        p.stdin.write("report\n")
        p.stdin.flush()
    for p in procs:
        reports.append(json.loads(p.stdout.readline()))
        p.wait(60)
    stops = {}
    for r in reports:
        stops.update(r["stops"])
    lat = [(at - sent[(run, idx)]) * 1000 for run, (at, idx) in stops.items()
           if (run, idx) in sent]
    rx = [b for r in reports for b in r["rxbytes"]]
    http_bytes = [b for r in reports for b in r["http_bytes"]]
    res = {
        "kind": kind, "guards": args.guards, "seconds": round(seconds, 1),
        "watched_loops": len(watched), "stopped": len(stops),
        "latency_ms": {"min": min(lat, default=None), "p50": pct(lat, 50) if lat else None,
                       "p99": pct(lat, 99) if lat else None, "max": max(lat, default=None)},
        "broker_cpu_s": round(broker_cpu, 2), "bridge_cpu_s": round(bridge_cpu, 2),
        "guards_cpu_s": round(guards_cpu, 2),
        "bridge_rss_mb": round(rss_mb(bridge.pid), 1), "bridge_project_streams": streams,
        "kafka_readers": len(rx), "kafka_rx_bytes_total": sum(rx),
        "kafka_rx_bytes_per_reader": summary(rx, " B"),
        "http_bytes_total": sum(http_bytes), "http_bytes_per_guard": summary(http_bytes, " B"),
    }
    print(f"\n== {kind}: {args.guards} guards, {len(watched)} watched looping runs, "
          f"{len(others)} other projects' looping runs, {seconds:.1f} s")
    print(f"  stopped {len(stops)}/{len(watched)}; produce -> LoopDetected: {summary(lat, ' ms')}"
          + (f", p50 {pct(lat, 50):.1f} ms, p99 {pct(lat, 99):.1f} ms" if lat else ""))
    print(f"  the guards' own CPU (all {args.procs} processes): {guards_cpu:.1f} s")
    print(f"  broker -> Kafka readers: {len(rx)} readers, {sum(rx) / 1e6:.2f} MB "
          f"({summary(rx, ' B')} each); broker CPU {broker_cpu:.1f} s")
    if kind.startswith("http"):
        print(f"  bridge -> guards: {streams:.0f} streams, {sum(http_bytes) / 1e6:.3f} MB "
              f"({summary(http_bytes, ' B')} each); bridge CPU {bridge_cpu:.1f} s, "
              f"RSS {rss_mb(bridge.pid):.0f} MB")
    print(json.dumps(res))
    return res


class Proc:
    def __init__(self, popen, admin):
        self.popen, self.admin, self.pid = popen, admin, popen.pid


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--kind", default="all", choices=["all", "http", "http-project", "kafka"])
    ap.add_argument("--eddy", default=None)
    ap.add_argument("--brokers", default=os.environ.get("EDDY_KAFKA_BROKERS"))
    ap.add_argument("--clickhouse", default=os.environ.get("EDDY_CLICKHOUSE_URL"))
    ap.add_argument("--broker-pid", type=int, default=None,
                    help="the Kafka broker's pid (default: $EDDY_STACK_DIR/kafka/kafka.pid)")
    ap.add_argument("--guards", type=int, default=1000)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--loops", type=int, default=50)
    ap.add_argument("--other-projects", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--pace-ms", type=int, default=200)
    ap.add_argument("--tail-s", type=float, default=10.0)
    ap.add_argument("--signals-topic")
    ap.add_argument("--url")
    ap.add_argument("--key")
    args = ap.parse_args()
    if args.child:
        return child(args)
    if not (args.eddy and args.brokers and args.clickhouse):
        raise SystemExit("--eddy, and EDDY_KAFKA_BROKERS / EDDY_CLICKHOUSE_URL, are required")
    if args.broker_pid is None:
        stack = os.environ.get("EDDY_STACK_DIR", "/tmp/eddy-stack")
        with open(os.path.join(stack, "kafka", "kafka.pid")) as f:
            args.broker_pid = int(f.read().split()[0])
    name = f"bench_guards_{os.getpid()}_{int(time.time())}"
    key = "kw_bench_guards"
    addr, admin = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    cfg = {"kafka_brokers": args.brokers, "input_topic": f"{name}.steps",
           "output_topic": f"{name}.signals", "dlq_topic": f"{name}.dlq",
           "group_id": f"{name}.group", "clickhouse_url": args.clickhouse,
           "clickhouse_database": name, "topic_partitions": 3, "ingest_addr": addr,
           "ingest_admin_addr": admin, "admin_addr": f"127.0.0.1:{free_port()}"}
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "eddy.toml")
    with open(path, "w") as f:
        for k, v in cfg.items():
            f.write(f"{k} = {json.dumps(v)}\n")
        f.write(f'\n[ingest_api_keys]\n"{key}" = "bench"\n')
    env = {"PATH": os.environ.get("PATH", ""), "EDDY_LOG": "warn"}
    worker = subprocess.Popen([args.eddy, "run", "--config", path], env=env)
    time.sleep(0)  # the worker creates the topics; the bridge waits for them on its own
    bridge_p = subprocess.Popen([args.eddy, "ingest-http", "--config", path], env=env)
    bridge = Proc(bridge_p, admin)
    try:
        wait_port(addr, bridge_p)
        url = f"http://{addr}"
        deadline = time.monotonic() + 60
        while True:  # the bridge answers once its read of the signals topic caught up
            try:
                urllib.request.urlopen(urllib.request.Request(
                    f"{url}/v1/ingest/agent/runs/x/verdict",
                    headers={"Authorization": f"Bearer {key}"}), timeout=2)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise SystemExit("the bridge did not catch up in 60 s")
                time.sleep(0.2)
        kinds = ["http", "http-project", "kafka"] if args.kind == "all" else [args.kind]
        for kind in kinds:
            phase(args, kind, cfg, bridge, url, key)
    finally:
        for p in (bridge_p, worker):
            p.send_signal(signal.SIGTERM)
        for p in (bridge_p, worker):
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
