"""The guard's delivery side without a broker: records are handed to it as its consumer thread
would (key = run_id, value = eddy's JSON)."""
import asyncio
import json

import pytest

from eddy_agent import Guard, LoopDetected


def record(event_id, severity, run_id="r1", project_id="p"):
    kind = "loop_detected" if severity in ("alert", "stop") else "loop_warning"
    ev = {"kind": kind, "event_id": event_id, "project_id": project_id, "run_id": run_id,
          "step_index": 9, "ts": "2026-01-01T00:00:00Z", "detector": "cycle",
          "severity": severity, "pattern": "a -> b", "fingerprint": "f", "hits": 3,
          "step_indices": [1, 2, 3], "first_step_index": 1, "evidence": {}}
    return run_id.encode(), json.dumps(ev).encode()


@pytest.fixture
def guard():
    stops = []
    # No consumer thread: the test hands records over itself.
    g = Guard("127.0.0.1:1", topic="t.signals", on_stop=stops.append, start=False)
    g.stops = stops
    yield g
    g.close()


def test_on_stop_fires_once_for_repeated_copies(guard):
    guard.watch("r1", "p")
    guard._take(*record("w", "warn"))
    guard.check("r1")
    for _ in range(3):
        guard._take(*record("s", "stop"))
    assert len(guard.stops) == 1 and guard.stops[0].event_id == "s"
    assert guard.stats()["duplicates"] == 2
    with pytest.raises(LoopDetected):
        guard.check("r1")
    assert guard.verdict("r1")["event_id"] == "s"
    assert [s["event_id"] for s in guard.signals("r1")] == ["w", "s"]


def test_records_of_other_runs_and_bad_json_are_dropped(guard):
    guard.watch("r1")
    guard._take(*record("x", "stop", run_id="r2"))
    guard._take(b"r1", b"not json")
    guard._take(None, b"{}")
    guard.check("r1")
    assert guard.stops == []


def test_wait_for_stop_resolves_from_the_consumer_thread(guard):
    guard.watch("r1")

    async def main():
        loop = asyncio.get_running_loop()
        waiter = asyncio.ensure_future(guard.wait_for_stop("r1", timeout=5))
        await asyncio.sleep(0)  # the waiter is registered
        # deliver from another thread, as the consumer does
        await loop.run_in_executor(None, guard._take, *record("s", "stop"))
        stop = await waiter
        assert isinstance(stop, LoopDetected) and stop.event_id == "s"
        # already stopped: resolves at once
        assert (await guard.wait_for_stop("r1", timeout=0.01)).event_id == "s"
        with pytest.raises(LoopDetected):
            await guard.acheck("r1")

    asyncio.run(main())


def test_wait_for_stop_times_out(guard):
    guard.watch("r1")
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(guard.wait_for_stop("r1", timeout=0.05))


def test_shared_is_one_guard_per_topic():
    a = Guard.shared("127.0.0.1:1", "t.shared", start=False)
    try:
        assert Guard.shared("127.0.0.1:1", "t.shared") is a
        b = Guard.shared("127.0.0.1:1", "t.other", start=False)
        assert b is not a
        b.close()
    finally:
        a.close()
    # a closed one is replaced
    c = Guard.shared("127.0.0.1:1", "t.shared", start=False)
    assert c is not a
    c.close()
