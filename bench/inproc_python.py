#!/usr/bin/env python3
"""What eddy's in-process guard costs an agent, step by step, beside the peers that also run
inside the agent, all measured in this one process on the same steps.

    python3 bench/inproc_python.py [--trace tests/corpus/events.jsonl] [--repeat 3] [--open 20000]

Per step (every step event of the trace, in its order, each run under a fresh id per repeat):
  eddy Local.observe   the step's fields as the agent has them (a dict) -> the run's signals:
                       the event built and encoded as the Emitter would send it, the crossing into
                       the native engine, the detectors, and the verdict bookkeeping
  eddy Local.check     the check before the next tool call (raises LoopDetected on a stop)
  eddy engine alone    the same steps as ready JSON text straight into the native engine: the
                       detectors and one crossing, without building and encoding the event
  loopguard            loopguard-runtime's Monitor with its default detectors, fed each step as
                       its own offline adapter maps it (bench/peers.py has the details)
  loopctl-style        the repeated-call rule every in-agent guard starts from: per run, a
                       counter per sha256(tool + sorted-keys JSON input), reset when the output
                       changes, stop at 10
Each line: min / p50 / p99 / max in microseconds, over every step.

Memory per open run: RSS growth while `--open` runs are held open with 5 steps each, divided by
the runs (eddy: Local; loopguard: one Monitor each; loopctl-style: its counters).
"""
import argparse
import gc
import hashlib
import json
import os
import time
from collections import defaultdict

STEP_FIELDS = ("step_type", "step_index", "content", "tool_name", "tool_input", "tool_output",
               "tool_success", "tool_latency_ms", "tokens", "cost_usd", "tokens_in_context",
               "agent", "caller", "metadata", "ts")


def steps_of(path, repeat):
    """(run id, step fields) of every step event, the trace repeated under fresh run ids."""
    events = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    out = []
    for r in range(repeat):
        for ev in events:
            if ev.get("kind") == "step":
                out.append((f"{ev['run_id']}~{r}", {k: ev[k] for k in STEP_FIELDS if k in ev}))
    return out


def stats(name, ns):
    ns = sorted(ns)
    at = lambda q: ns[min(len(ns) - 1, int(q * len(ns)))] / 1000  # noqa: E731
    print(f"{name:<22} steps={len(ns):<7} min={ns[0] / 1000:8.2f}us p50={at(0.50):8.2f}us "
          f"p99={at(0.99):8.2f}us max={ns[-1] / 1000:9.2f}us")


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class LoopctlStyle:
    """The repeated-call rule: the same call answered the same way, counted per run."""

    def __init__(self, stop_at=10):
        self.stop_at = stop_at
        self.runs = defaultdict(dict)

    def observe(self, run_id, step):
        if step.get("tool_name") is None:
            return False
        key = hashlib.sha256((step["tool_name"] + "\0" + json.dumps(
            step.get("tool_input"), sort_keys=True, separators=(",", ":"))).encode()).hexdigest()
        out = hashlib.sha256(json.dumps(step.get("tool_output"), sort_keys=True).encode()).digest()
        calls = self.runs[run_id]
        last, n = calls.get(key, (None, 0))
        n = n + 1 if last == out else 1
        calls[key] = (out, n)
        return n >= self.stop_at


def loopguard_monitor():
    from loopguard.guard import default_detectors
    from loopguard.monitor import Monitor

    return Monitor(detectors=default_detectors())


def loopguard_feed(mon, step):
    from loopguard.ingest import _steps_to_observations

    obs = {"step": step.get("step_index"), "agent": step.get("agent") or "agent",
           "tool": step.get("tool_name"), "args": step.get("tool_input"),
           "output": step.get("tool_output") if step.get("tool_output") is not None
           else step.get("content"), "caller": step.get("caller")}
    flagged = False
    for node, action, sig, payload in _steps_to_observations([obs]):
        flagged = bool(mon.observe(node, action, sig, **payload)) or flagged
    return flagged


def bench_steps(steps):
    from eddy_agent import Local, LoopDetected

    eddy = Local()
    observe_ns, check_ns = [], []
    clock = time.perf_counter_ns
    gc.disable()
    for run, step in steps:
        t0 = clock()
        eddy.observe(run, step)
        t1 = clock()
        try:
            eddy.check(run)
        except LoopDetected:
            pass
        t2 = clock()
        observe_ns.append(t1 - t0)
        check_ns.append(t2 - t1)
    gc.enable()
    stats("eddy Local.observe", observe_ns)
    stats("eddy Local.check", check_ns)

    from eddy_agent import _engine

    engine, ns, ts = _engine.Engine(), [], 0
    texts = []
    for i, (run, step) in enumerate(steps):
        ev = {"v": 1, "kind": "step", "project_id": "default", "run_id": run, "ts": i,
              "step_type": "tool_call", **step}
        texts.append(json.dumps(ev, separators=(",", ":"), ensure_ascii=False))
    gc.disable()
    for text in texts:
        t0 = clock()
        engine.observe(text)
        ns.append(clock() - t0)
    gc.enable()
    stats("eddy engine alone", ns)

    try:
        loopguard_monitor()
    except ImportError:
        print("loopguard              not installed (pip install loopguard-runtime)")
    else:
        monitors, ns = {}, []
        gc.disable()
        for run, step in steps:
            t0 = clock()
            mon = monitors.get(run)
            if mon is None:
                mon = monitors[run] = loopguard_monitor()
            loopguard_feed(mon, step)
            ns.append(clock() - t0)
        gc.enable()
        stats("loopguard Monitor", ns)

    lc, ns = LoopctlStyle(), []
    gc.disable()
    for run, step in steps:
        t0 = clock()
        lc.observe(run, step)
        ns.append(clock() - t0)
    gc.enable()
    stats("loopctl-style", ns)


def bench_memory(n, steps):
    """RSS per open run: `n` runs, each given the first 5 steps of a trace run, none ended."""
    from eddy_agent import Local

    per_run = [s for _, s in steps[:5]]

    def measure(name, make, feed):
        gc.collect()
        before = rss_bytes()
        holder = make()
        for i in range(n):
            for s in per_run:
                feed(holder, f"open-{i}", s)
        gc.collect()
        grown = rss_bytes() - before
        print(f"{name:<22} open_runs={n} rss_growth={grown / 2**20:7.1f}MiB "
              f"per_run={grown / n / 1024:6.2f}KiB")
        return holder

    eddy = measure("eddy Local", Local, lambda h, r, s: h.observe(r, s))
    assert eddy.open_runs == n, eddy.open_runs
    del eddy
    try:
        loopguard_monitor()
    except ImportError:
        pass
    else:
        def lg_feed(h, r, s):
            mon = h.get(r)
            if mon is None:
                mon = h[r] = loopguard_monitor()
            loopguard_feed(mon, s)

        measure("loopguard Monitor", dict, lg_feed)
    measure("loopctl-style", LoopctlStyle, lambda h, r, s: h.observe(r, s))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--trace", default=os.path.join(here, "..", "tests", "corpus", "events.jsonl"))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--open", type=int, default=20000, help="open runs for the memory figure")
    args = p.parse_args()
    steps = steps_of(args.trace, args.repeat)
    # Memory first, in a process that has not grown yet.
    bench_memory(args.open, steps)
    bench_steps(steps)


if __name__ == "__main__":
    main()
