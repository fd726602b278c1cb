import pytest

from eddy_agent import LoopDetected, Verdicts, severity_rank


def sig(event_id, severity, run_id="r1", project_id="p", kind=None, **kw):
    kind = kind or ("loop_detected" if severity in ("alert", "stop") else "loop_warning")
    return {"kind": kind, "event_id": event_id, "project_id": project_id, "run_id": run_id,
            "step_index": kw.get("step_index", 7), "ts": "2026-01-01T00:00:00Z",
            "detector": kw.get("detector", "repeat"), "severity": severity,
            "pattern": "web_search(q=weather)", "fingerprint": "ab", "hits": 5,
            "step_indices": [3, 5, 7], "first_step_index": 3, "evidence": {"window": 20}}


def test_severity_order():
    assert [severity_rank(s) for s in ("info", "warn", "alert", "stop")] == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        severity_rank("fatal")
    with pytest.raises(ValueError):
        Verdicts("critical")


def test_unwatched_runs_are_ignored():
    v = Verdicts()
    assert v.offer(sig("a", "stop")) is None
    v.check("r1")  # nothing raised
    assert v.ignored == 1


def test_stop_raises_with_the_signal_fields():
    v = Verdicts()
    v.watch("r1", "p")
    stop = v.offer(sig("a", "stop"))
    assert isinstance(stop, LoopDetected)
    with pytest.raises(LoopDetected) as e:
        v.check("r1")
    assert e.value.detector == "repeat"
    assert e.value.pattern == "web_search(q=weather)"
    assert e.value.step_indices == [3, 5, 7]
    assert e.value.evidence == {"window": 20}
    assert e.value.signal["event_id"] == "a"
    # each check raises a fresh exception, the run stays stopped
    with pytest.raises(LoopDetected) as e2:
        v.check("r1")
    assert e2.value is not e.value


def test_duplicates_stop_once():
    v = Verdicts()
    v.watch("r1")
    first = v.offer(sig("a", "stop"))
    assert first is not None
    assert v.offer(sig("a", "stop")) is None
    assert v.offer(dict(sig("a", "stop"))) is None
    assert v.duplicates == 2
    assert [s["event_id"] for s in v.signals("r1")] == ["a"]
    # a different stop signal of an already stopped run does not stop it again either
    assert v.offer(sig("b", "stop", detector="cycle")) is None
    assert v.stop_of("r1").signal["event_id"] == "a"


def test_severity_filter():
    v = Verdicts("alert")
    v.watch("r1")
    assert v.offer(sig("w", "warn")) is None
    assert v.offer(sig("i", "info")) is None
    v.check("r1")
    assert v.offer(sig("a", "alert")) is not None
    with pytest.raises(LoopDetected):
        v.check("r1")

    strict = Verdicts("stop")
    strict.watch("r1")
    assert strict.offer(sig("a", "alert")) is None
    strict.check("r1")
    assert strict.verdict("r1")["severity"] == "alert"


def test_verdict_is_the_strongest_first_of_equals():
    v = Verdicts("stop")
    v.watch("r1")
    v.offer(sig("w1", "warn"))
    v.offer(sig("a1", "alert"))
    v.offer(sig("w2", "warn"))
    v.offer(sig("a2", "alert"))
    assert v.verdict("r1")["event_id"] == "a1"
    assert v.verdict("other") is None


def test_project_scoping():
    v = Verdicts()
    v.watch("r1", "acme")
    assert v.offer(sig("x", "stop", project_id="other")) is None
    v.check("r1")
    assert v.offer(sig("y", "stop", project_id="acme")) is not None


def test_run_terminated_is_kept_not_a_stop():
    v = Verdicts()
    v.watch("r1")
    term = {"kind": "run_terminated", "event_id": "t", "project_id": "p", "run_id": "r1",
            "loop_detected": True}
    assert v.offer(term) is None
    v.check("r1")
    assert v.terminated("r1")["event_id"] == "t"


def test_unwatch_and_bounded_watch_set():
    v = Verdicts(max_watched=2)
    for r in ("r1", "r2", "r3"):
        v.watch(r)
    assert not v.is_watched("r1")
    assert v.is_watched("r2") and v.is_watched("r3")
    v.offer(sig("s", "stop", run_id="r3"))
    v.unwatch("r3")
    v.check("r3")  # forgotten: no raise


def test_loop_detected_pickles():
    import pickle

    e = LoopDetected(sig("a", "stop"))
    back = pickle.loads(pickle.dumps(e))
    assert back.pattern == e.pattern and back.signal == e.signal
