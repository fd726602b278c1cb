"""The LangChain 1.x hook, offline: `create_agent` with LangChain's own fake chat model, real
tools and `EddyMiddleware`; eddy's verdicts come from `fake_eddy` (eddy's documented rule for
identical calls) through a real Guard."""
import itertools

import pytest

pytest.importorskip("langchain.agents", reason="pip install langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

from eddy_agent import LoopDetected  # noqa: E402
from eddy_agent.middleware import EddyMiddleware  # noqa: E402
from fake_eddy import fleet  # noqa: E402
from lc_models import agent_model, told_by_eddy  # noqa: E402

CALLS = []


@tool
def web_search(query: str) -> str:
    """Search the web."""
    CALLS.append(query)
    if "changelog" in query:
        return "eddy 1.0 was released on 2026-03-02"
    return "no results"


def invoke(model, middleware):
    agent = create_agent(model, [web_search], middleware=[middleware])
    return agent.invoke({"messages": [{"role": "user", "content": "When was eddy 1.0 released?"}]})


def test_an_agent_that_heeds_the_message_finishes_its_task():
    CALLS.clear()
    emitter, guard, eddy = fleet()
    mw = EddyMiddleware(emitter, guard, agent_name="researcher")
    model = agent_model(heeds=True)
    out = invoke(model, mw)
    assert out["messages"][-1].content == "eddy 1.0 came out on 2026-03-02."
    assert CALLS == ["eddy release date"] * 3 + ["eddy changelog"]
    alert = next(s for s in eddy.signals if s["severity"] == "alert")
    assert not any(s["severity"] == "stop" for s in eddy.signals)
    # The model saw eddy's message exactly once, in the call after the alert.
    told = [i for i, sent in enumerate(model.sent) if told_by_eddy(sent)]
    assert told and told[0] == 3, told
    eddy_msgs = [m for m in model.sent[-1] if getattr(m, "name", None) == "eddy"]
    assert [m.content for m in eddy_msgs] == [alert["advice"]]
    # ...and eddy was told it steered: one steer step, naming the alert.
    steers = eddy.steps(step_type="steer")
    assert [(s["content"], s["signal_event_id"]) for s in steers] == [
        (alert["advice"], alert["event_id"])]
    kinds = [e["kind"] for e in eddy.events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert eddy.events[-1]["status"] == "completed"
    assert [s.event_id for s in mw.steers] == [alert["event_id"]]


def test_an_agent_that_ignores_the_message_is_stopped():
    CALLS.clear()
    emitter, guard, eddy = fleet()
    mw = EddyMiddleware(emitter, guard, agent_name="researcher")
    model = agent_model(heeds=False)
    with pytest.raises(LoopDetected) as stop:
        invoke(model, mw)
    assert stop.value.severity == "stop" and stop.value.detector == "repeated_operation"
    assert CALLS == ["eddy release date"] * 4, "no tool call after the stop"
    assert len(eddy.steps(step_type="steer")) == 1, "steered once per loop, not every call"
    last = eddy.events[-1]
    assert (last["kind"], last["status"], last["termination_reason"]) == (
        "run_finished", "failed", "loop_detected")
    assert mw.stopped is not None


def test_without_steering_the_loop_runs_to_its_stop():
    CALLS.clear()
    emitter, guard, eddy = fleet(steer_on=None)
    model = agent_model(heeds=True)
    with pytest.raises(LoopDetected):
        invoke(model, EddyMiddleware(emitter, guard))
    assert not any(told_by_eddy(sent) for sent in model.sent)
    assert eddy.steps(step_type="steer") == []
    assert len(CALLS) == 4


def test_steps_are_reported_as_eddy_reads_them():
    CALLS.clear()
    emitter, guard, eddy = fleet()
    invoke(agent_model(heeds=True), EddyMiddleware(emitter, guard))
    tools = eddy.steps(step_type="tool_call")
    assert [(t["tool_name"], t["tool_input"], t["tool_output"], t["tool_success"])
            for t in tools][:2] == [("web_search", {"query": "eddy release date"}, "no results",
                                     True)] * 2
    thinks = eddy.steps(step_type="think")
    assert [t["content"] for t in thinks] == ["eddy 1.0 came out on 2026-03-02."]
    indices = [s["step_index"] for s in eddy.steps()]
    assert indices == list(range(1, len(indices) + 1))
