import pytest

from conftest import events
from eddy_agent import Emitter, Verdicts


def test_step_index_counts_per_run_unless_given(emitter):
    a = emitter.run_started("a")
    b = emitter.run_started("b")
    assert [emitter.step(a), emitter.step(a), emitter.step(b)] == [1, 2, 1]
    assert emitter.step(a, step_index=10) == 10
    assert emitter.step(a) == 11
    # an explicit index behind the counter does not move it back
    assert emitter.step(a, step_index=4) == 4
    assert emitter.step(a) == 12
    steps = [e for e in events(emitter) if e["kind"] == "step" and e["run_id"] == "a"]
    assert [s["step_index"] for s in steps] == [1, 2, 10, 11, 4, 12]


def test_key_is_run_id_and_envelope_is_v1(emitter):
    emitter.run_started("r-1", input="hi", metadata={"k": 1})
    emitter.step("r-1", tool_name="search", tool_input={"q": "x"})
    emitter.run_finished("r-1")
    for topic, key, ev in emitter._producer.records:
        assert topic == "t.steps"
        assert key == b"r-1"
        assert ev["v"] == 1 and ev["project_id"] == "acme" and ev["run_id"] == "r-1"
        assert isinstance(ev["ts"], int) and ev["ts"] > 1_700_000_000_000
    kinds = [ev["kind"] for ev in events(emitter)]
    assert kinds == ["run_started", "step", "run_finished"]
    started = events(emitter)[0]
    assert started["agent_name"] == "bot" and started["input"] == "hi" and started["metadata"] == {"k": 1}


def test_every_v1_step_field_is_a_keyword(emitter):
    emitter.step("r", step_type="tool_call", content="c", tool_name="t", tool_input=[1, {"a": None}],
                 tool_output={"ok": True}, tool_success=False, tool_latency_ms=1.5, tokens=3,
                 cost_usd=0.01, tokens_in_context=99, agent="child", caller="parent",
                 metadata={"m": 1}, ts="2026-01-01T00:00:00Z")
    ev = events(emitter)[0]
    want = {"step_type": "tool_call", "content": "c", "tool_name": "t",
            "tool_input": [1, {"a": None}], "tool_output": {"ok": True}, "tool_success": False,
            "tool_latency_ms": 1.5, "tokens": 3, "cost_usd": 0.01, "tokens_in_context": 99,
            "agent": "child", "caller": "parent", "metadata": {"m": 1},
            "ts": "2026-01-01T00:00:00Z"}
    for k, v in want.items():
        assert ev[k] == v, k


def test_explicit_nulls_are_kept_unset_fields_left_out(emitter):
    emitter.step("r", tool_name="t", tool_input=None, tool_success=None)
    ev = events(emitter)[0]
    assert ev["tool_input"] is None and ev["tool_success"] is None
    assert "tool_output" not in ev and "content" not in ev and "tokens" not in ev


def test_every_v1_run_finished_field_is_a_keyword(emitter):
    emitter.run_finished("r", status="failed", termination_reason="timeout", output="o",
                         reported_loop_detected=True, reported_loop_step_index=4,
                         reported_totals={"total_steps": 9})
    ev = events(emitter)[0]
    assert (ev["status"], ev["termination_reason"], ev["output"]) == ("failed", "timeout", "o")
    assert ev["reported_loop_detected"] is True and ev["reported_loop_step_index"] == 4
    assert ev["reported_totals"] == {"total_steps": 9}


def test_agent_name_and_project_are_required():
    with pytest.raises(ValueError):
        Emitter("127.0.0.1:1")
    e = Emitter("127.0.0.1:1", project_id="p")
    with pytest.raises(ValueError):
        e.run_started("r")


class VerdictGuard:
    """The Guard's agent-side surface over the pure Verdicts (no consumer)."""

    def __init__(self):
        self.v = Verdicts()

    def watch(self, run_id, project_id=None):
        self.v.watch(run_id, project_id)

    def check(self, run_id):
        self.v.check(run_id)

    def stopped(self, run_id):
        return self.v.stop_of(run_id)


def test_run_started_watches_and_stopped_runs_finish_as_loop_detected(emitter):
    g = VerdictGuard()
    emitter.guard = g
    run = emitter.run_started()
    assert g.v.is_watched(run)
    g.v.offer({"kind": "loop_detected", "event_id": "e", "project_id": "acme", "run_id": run,
               "severity": "stop", "detector": "repeat", "pattern": "p", "step_indices": [1]})
    emitter.run_finished(run, status="failed")
    assert events(emitter)[-1]["termination_reason"] == "loop_detected"
