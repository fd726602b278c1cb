"""Which signals become a steer, through the real Guard's delivery path (records handed to it
as its consumer thread hands them)."""
import json

import pytest

from eddy_agent import Emitter, Guard, LoopDetected, Steer, SteeringGuard, StepSink
from eddy_agent.steering import Steering, steer_or_stop


def signal(event_id, severity, *, step=5, first=3, detector="repeated_operation", fp="f1",
           run_id="r1", advice=True):
    kind = "loop_detected" if severity in ("alert", "stop") else "loop_warning"
    s = {"kind": kind, "event_id": event_id, "project_id": "p", "run_id": run_id,
         "step_index": step, "ts": "2026-01-01T00:00:00Z", "detector": detector,
         "severity": severity, "pattern": "search(same call, same result) x3", "fingerprint": fp,
         "hits": 3, "step_indices": [first, step], "first_step_index": first, "evidence": {}}
    if advice:
        s["advice"] = f"eddy: advice for {event_id}"
    return s


@pytest.fixture
def guard():
    g = Guard("127.0.0.1:1", topic="t.signals", start=False)
    g.watch("r1", "p")
    yield g
    g.close()


def give(g, sig):
    g._take(sig["run_id"].encode(), json.dumps(sig).encode())


def test_an_alert_is_handed_over_once(guard):
    assert guard.steer("r1") is None
    give(guard, signal("w", "warn"))
    assert guard.steer("r1") is None, "a warning does not steer by default"
    give(guard, signal("a", "alert"))
    give(guard, signal("a", "alert"))  # at-least-once delivery: a copy
    s = guard.steer("r1")
    assert isinstance(s, Steer)
    assert (s.message, s.event_id, s.detector, s.first_step_index) == (
        "eddy: advice for a", "a", "repeated_operation", 3)
    assert guard.steer("r1") is None
    guard.check("r1")  # an alert never stops


def test_one_loop_reported_by_several_detectors_is_steered_once(guard):
    give(guard, signal("a", "alert"))
    give(guard, signal("c", "alert", detector="cycle", fp="f2", step=6, first=2))
    assert guard.steer("r1").event_id == "a"
    assert guard.steer("r1") is None
    # Reported again after the steer, about repetition that began before it: the same loop.
    give(guard, signal("n", "alert", detector="near_duplicate", fp="f3", step=8, first=4))
    assert guard.steer("r1") is None
    # A loop that began after the steered signal's step is a new one.
    give(guard, signal("new", "alert", detector="repeated_failure", fp="f4", step=12, first=9))
    assert guard.steer("r1").event_id == "new"


def test_a_run_only_checked_is_stopped_on_its_first_stop(guard):
    give(guard, signal("a", "alert"))
    give(guard, signal("s", "stop", step=6))
    with pytest.raises(LoopDetected):
        guard.check("r1")
    assert guard.steer("r1") is None, "a stopped run is not steered"


def test_a_stop_on_a_loop_the_agent_was_not_told_about_is_steered_first(guard):
    assert guard.steer("r1") is None  # the hook asks before each model call
    give(guard, signal("s1", "stop", step=3, first=1))
    guard.check("r1")  # held for the steer
    s = guard.steer("r1")
    assert (s.event_id, s.severity, s.message) == ("s1", "stop", "eddy: advice for s1")
    # The loop goes on after the steer: eddy stops it again, and that stop raises.
    give(guard, signal("s2", "stop", step=5, first=1))
    with pytest.raises(LoopDetected) as e:
        guard.check("r1")
    assert e.value.event_id == "s2"
    assert guard.steer("r1") is None


def test_a_stop_while_an_alert_steer_waits_is_held_until_after_it(guard):
    guard.steer("r1")
    give(guard, signal("a", "alert", step=5, first=3))
    give(guard, signal("s", "stop", step=6, first=3))
    guard.check("r1")
    assert guard.steer("r1").event_id == "a"
    give(guard, signal("s2", "stop", step=8, first=3))
    with pytest.raises(LoopDetected):
        guard.check("r1")


def test_a_budget_stop_is_never_steered(guard):
    guard.steer("r1")
    give(guard, signal("b", "stop", detector="budget", fp="steps"))
    with pytest.raises(LoopDetected):
        guard.check("r1")


def test_at_most_max_steers_then_the_next_new_loop_stops():
    g = Guard("127.0.0.1:1", topic="t.signals", start=False, max_steers=2)
    g.watch("r1", "p")
    g.steer("r1")
    for n, (first, step) in enumerate([(1, 3), (10, 12)]):
        give(g, signal(f"s{n}", "stop", step=step, first=first, fp=f"f{n}"))
        g.check("r1")
        assert g.steer("r1").event_id == f"s{n}"
    give(g, signal("s2", "stop", step=22, first=20, fp="f2"))
    with pytest.raises(LoopDetected):
        g.check("r1")
    g.close()


def test_steer_on_warn_and_off():
    g = Guard("127.0.0.1:1", topic="t.signals", start=False, steer_on="warn")
    g.watch("r1")
    give(g, signal("w", "warn"))
    assert g.steer("r1").event_id == "w"
    g.close()
    off = Guard("127.0.0.1:1", topic="t.signals", start=False, steer_on=None)
    off.watch("r1")
    give(off, signal("a", "alert"))
    assert off.steer("r1") is None
    off.close()
    with pytest.raises(ValueError):
        Steering("stop")


def test_a_signal_without_advice_gets_eddys_fallback(guard):
    give(guard, signal("old", "alert", advice=False))
    s = guard.steer("r1")
    assert s.message.startswith("eddy: this run is repeating itself. Since step 3: search(")


def test_steer_or_stop_reports_the_steer_as_a_step(guard, emitter):
    give(guard, signal("a", "alert"))
    s = steer_or_stop(guard, emitter, "r1")
    assert s.event_id == "a"
    sent = [v for _, _, v in emitter._producer.records]
    assert [(e["step_type"], e["content"], e["signal_event_id"]) for e in sent] == [
        ("steer", "eddy: advice for a", "a")]
    assert steer_or_stop(guard, emitter, "r1") is None
    give(guard, signal("s", "stop"))
    with pytest.raises(LoopDetected):
        steer_or_stop(guard, emitter, "r1")


def test_the_guard_and_emitter_fit_the_hooks_interfaces(guard, emitter):
    assert isinstance(guard, SteeringGuard)
    assert isinstance(emitter, Emitter) and isinstance(emitter, StepSink)

    class StopOnly:  # a guard from before steering: hooks still stop with it
        def check(self, run_id):
            pass

    assert steer_or_stop(StopOnly(), emitter, "r1") is None
