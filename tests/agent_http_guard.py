#!/usr/bin/env python3
"""An agent stopped through `eddy ingest-http`'s project stream (eddy_agent.HttpGuard), against a
real `eddy run` and bridge. Driven by tests/agent_http_guard.rs:

    python3 tests/agent_http_guard.py --brokers B --steps-topic T --url U --key K --project P \
        --other-key K2 --other-project P2

Phases, each announced with a JSON line; the test answers on stdin where it says so:
1. `stopped`: a looping run emits the same call until HttpGuard raises LoopDetected.
2. `cut`: the stream's connection is cut and held down while a second looping run is stopped
   at the bridge (its /verdict route says so); the guard then reconnects with Last-Event-ID and
   must get that stop from the bridge's journal (no resync).
3. `bridge_down?`: the test restarts the bridge; meanwhile a third looping run is emitted
   (`emitted`); the test answers `restarted` once the worker published the stop and the new
   bridge listens; the stop must arrive (a resync, the new bridge holds none of the ids).
Then `report`: the guards' counters, and what a guard on another project's key saw (nothing).
"""
import argparse
import json
import sys
import threading
import time
import urllib.request
import uuid

try:
    from eddy_agent import Emitter, HttpGuard, LoopDetected
except ImportError as e:
    print(f"cannot import eddy_agent ({e}): pip install ./clients/python", file=sys.stderr)
    sys.exit(3)


def say(**obj):
    print(json.dumps(obj), flush=True)


def wait_line(want):
    line = sys.stdin.readline().strip()
    if line != want:
        raise SystemExit(f"expected {want!r} on stdin, got {line!r}")


def step(eddy, run_id):
    return eddy.step(run_id, tool_name="web_search", tool_input={"q": "eddy release date"},
                     tool_output={"results": [], "note": "no results"}, tool_success=True)


def loop_until_stopped(guard, eddy, run_id, max_steps=200, pace_s=0.05):
    """The agent's loop: check the guard before each call. Returns (steps, LoopDetected)."""
    for i in range(max_steps):
        try:
            guard.check(run_id)
        except LoopDetected as stop:
            return i, stop
        step(eddy, run_id)
        eddy.flush(10)
        time.sleep(pace_s)  # the tool's latency
    raise SystemExit(f"{run_id}: not stopped after {max_steps} steps")


def verdict(url, key, run_id):
    req = urllib.request.Request(f"{url}/v1/ingest/agent/runs/{run_id}/verdict?min_severity=stop",
                                 headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.load(r)["data"]["verdict"]


def main():
    ap = argparse.ArgumentParser()
    for a in ("brokers", "steps-topic", "url", "key", "project", "other-key", "other-project"):
        ap.add_argument(f"--{a}", required=True)
    args = ap.parse_args()

    guard = HttpGuard(args.url, args.key, wait_ready=30)
    # Following its whole project (not narrowed to its runs): the bridge still sends it nothing
    # of project A's.
    other = HttpGuard(args.url, args.other_key, wait_ready=30, max_narrowed_runs=0)
    if not (guard.connected and other.connected):
        raise SystemExit("the bridge's stream did not open in 30 s")
    eddy = Emitter(args.brokers, topic=args.steps_topic, project_id=args.project,
                   agent_name="http-guarded-agent", guard=guard)
    say(event="ready")

    # 1. A looping run, stopped over the stream.
    run1 = f"loop1-{uuid.uuid4()}"
    eddy.run_started(run1)
    other.watch(run1, args.other_project)  # the same run id, another project's key
    steps, stop = loop_until_stopped(guard, eddy, run1)
    eddy.run_finished(run1, status="failed")
    eddy.flush(10)
    say(event="stopped", run_id=run1, steps=steps, signal=stop.signal)

    # 2. The connection is cut and kept down while the next run's stop is published.
    gate = threading.Event()
    real = guard._connection

    def held():
        gate.wait(60)
        return real()

    guard._connection = held
    guard._drop_connection()
    down_since = time.monotonic()
    while guard.connected and time.monotonic() - down_since < 10:
        time.sleep(0.01)
    assert not guard.connected, "the cut connection is noticed"
    run2 = f"loop2-{uuid.uuid4()}"
    eddy.run_started(run2)
    for _ in range(200):
        step(eddy, run2)
        eddy.flush(10)
        if verdict(args.url, args.key, run2):
            break
        time.sleep(0.05)
    else:
        raise SystemExit("run 2 never got a stop verdict at the bridge")
    assert guard.stopped(run2) is None, "no stream, no stop yet"
    resyncs = guard.resyncs
    guard._connection = real
    gate.set()
    stop2 = guard_stop(guard, run2, 30)
    say(event="cut", run_id=run2, signal=stop2.signal, resynced=guard.resyncs - resyncs,
        last_event_id=guard.last_event_id)

    # 3. The bridge restarts: its journal is gone, a resync brings the stop.
    say(event="bridge_down?")
    wait_line("down")
    run3 = f"loop3-{uuid.uuid4()}"
    eddy.run_started(run3)
    for _ in range(30):
        step(eddy, run3)
    eddy.flush(10)
    say(event="emitted", run_id=run3)
    wait_line("restarted")
    stop3 = guard_stop(guard, run3, 60)
    eddy.run_finished(run2, status="failed")
    eddy.run_finished(run3, status="failed")
    eddy.flush(10)
    say(event="report", run_id=run3, signal=stop3.signal, stats=guard.stats(),
        other_stats=other.stats(), other_verdict=other.verdict(run1), errors=guard.errors,
        emitter_errors=eddy.close())
    guard.close()
    other.close()


def guard_stop(guard, run_id, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stop = guard.stopped(run_id)
        if stop is not None:
            return stop
        time.sleep(0.01)
    raise SystemExit(f"{run_id}: no stop from the guard in {timeout}s ({guard.stats()})")


if __name__ == "__main__":
    main()
