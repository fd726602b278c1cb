#!/usr/bin/env python3
"""Feed an eddy v1 JSONL trace to a Python peer, one run at a time as the events arrive.

    python3 bench/peers.py loopguard TRACE.jsonl
    python3 bench/peers.py keelwave  TRACE.jsonl

Prints one line: `<peer> events=N seconds=S events_per_s=R flagged_runs=K`, where the time covers
reading, JSON-decoding and checking every line (the same work `eddy replay` does per line), not the
interpreter's start-up.

loopguard-runtime (PyPI `loopguard-runtime`): one `loopguard.Monitor` per open run with the
package's own default detectors (`loopguard.guard.default_detectors()`: LoopDetector,
StallDetector, ProgressDetector, RepeatedFailureDetector, CycleDetector, HandoffLoopDetector).
Each step is mapped onto Monitor observations by the package's own offline adapter
(`loopguard.ingest._steps_to_observations`, the code behind `loopguard-ingest`), so the decision
and the result of a tool call are two observations exactly as loopguard itself replays a trace.
A run's Monitor is dropped at its `run_finished`.

keelwave (PyPI `keelwave`): its in-SDK loop check, `keelwave.run.Run.check_fingerprint`
(SHA-256 of tool_name + sorted-keys JSON of tool_input; a loop is the first exact duplicate), one
`Run` per open run, called unbound from the package so no HTTP client is involved. It is a
reference point only: it does far less than either eddy or loopguard.
"""
import json
import sys
import time


def run_loopguard(lines):
    from loopguard.guard import default_detectors
    from loopguard.ingest import _steps_to_observations
    from loopguard.monitor import Monitor

    monitors = {}
    flagged = set()
    n = 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        ev = json.loads(line)
        n += 1
        key = (ev.get("project_id"), ev.get("run_id"))
        kind = ev.get("kind")
        if kind == "run_finished":
            monitors.pop(key, None)
            continue
        mon = monitors.get(key)
        if mon is None:
            mon = monitors[key] = Monitor(detectors=default_detectors())
        if kind != "step":
            continue
        step = {
            "step": ev.get("step_index"),
            "agent": ev.get("agent") or "agent",
            "tool": ev.get("tool_name"),
            "args": ev.get("tool_input"),
            "output": ev.get("tool_output") if ev.get("tool_output") is not None else ev.get("content"),
            "caller": ev.get("caller"),
        }
        for node, action, sig, payload in _steps_to_observations([step]):
            if mon.observe(node, action, sig, **payload):
                flagged.add(key)
    return n, len(flagged)


def run_keelwave(lines):
    from keelwave.run import Run

    runs = {}
    flagged = 0
    n = 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        ev = json.loads(line)
        n += 1
        key = (ev.get("project_id"), ev.get("run_id"))
        kind = ev.get("kind")
        if kind == "run_finished":
            r = runs.pop(key, None)
            if r is not None and r._loop_detected:
                flagged += 1
            continue
        r = runs.get(key)
        if r is None:
            r = runs[key] = Run(client=None, agent_name=ev.get("agent_name") or ev.get("agent") or "")
        if kind != "step" or ev.get("tool_name") is None:
            continue
        r._step_index = ev.get("step_index", 0)
        tool_input = ev.get("tool_input")
        r.check_fingerprint(ev["tool_name"], tool_input if tool_input is not None else {})
    flagged += sum(1 for r in runs.values() if r._loop_detected)
    return n, flagged


def main():
    peer, path = sys.argv[1], sys.argv[2]
    fn = {"loopguard": run_loopguard, "keelwave": run_keelwave}[peer]
    with open(path, encoding="utf-8") as f:
        t0 = time.perf_counter()
        n, flagged = fn(f)
        dt = time.perf_counter() - t0
    print(f"{peer} events={n} seconds={dt:.3f} events_per_s={n / dt:.0f} flagged_runs={flagged}")


if __name__ == "__main__":
    main()
