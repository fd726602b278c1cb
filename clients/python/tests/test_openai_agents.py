"""The OpenAI Agents SDK hook, offline: `Runner.run` with the SDK's own `ScriptedModel` and a
real function tool; eddy's verdicts come from `fake_eddy` through a real Guard."""
import asyncio
import itertools

import pytest

pytest.importorskip("agents.testing", reason="pip install openai-agents")

from agents import Agent, Runner, function_tool  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402

from eddy_agent import LoopDetected  # noqa: E402
from eddy_agent.openai_agents import EddyRunHooks  # noqa: E402
from fake_eddy import fleet  # noqa: E402

CALLS = []
IDS = itertools.count()


@function_tool
def web_search(query: str) -> str:
    """Search the web."""
    CALLS.append(query)
    return "eddy 1.0 was released on 2026-03-02" if "changelog" in query else "no results"


def told_by_eddy(call) -> bool:
    return any(isinstance(i, dict) and i.get("role") == "user"
               and str(i.get("content", "")).startswith("eddy:") for i in call.input)


def scripted(heeds: bool) -> ScriptedModel:
    """Searches the same thing over and over; when `heeds`, changes its search once eddy's
    message is in its input, then answers."""
    def respond(call):
        if heeds and told_by_eddy(call):
            done = any(getattr(i, "get", lambda _k: None)("type") == "function_call_output"
                       and "2026-03-02" in str(i.get("output")) for i in call.input)
            if done:
                return [assistant_message("eddy 1.0 came out on 2026-03-02.")]
            return [function_call("web_search", {"query": "eddy changelog"},
                                  call_id=f"c{next(IDS)}")]
        return [function_call("web_search", {"query": "eddy release date"},
                              call_id=f"c{next(IDS)}")]

    return ScriptedModel([ModelStep.respond(respond) for _ in range(20)])


def run(model, hooks):
    agent = Agent(name="researcher", instructions="Answer.", tools=[web_search], model=model)
    return asyncio.run(Runner.run(agent, "When was eddy 1.0 released?", hooks=hooks,
                                  run_config=hooks.run_config(tracing_disabled=True)))


def test_an_agent_that_heeds_the_message_finishes_its_task():
    CALLS.clear()
    emitter, guard, eddy = fleet()
    hooks = EddyRunHooks(emitter, guard)
    model = scripted(heeds=True)
    result = run(model, hooks)
    assert result.final_output == "eddy 1.0 came out on 2026-03-02."
    assert CALLS == ["eddy release date"] * 3 + ["eddy changelog"]
    alert = next(s for s in eddy.signals if s["severity"] == "alert")
    calls = model.calls
    told = [i for i, c in enumerate(calls) if told_by_eddy(c)]
    assert told == [3, 4], "given once, kept where it was given in the next call"
    assert [i["content"] for i in calls[4].input
            if isinstance(i, dict) and i.get("role") == "user"][-1] == alert["advice"]
    steers = eddy.steps(step_type="steer")
    assert [(s["content"], s["signal_event_id"]) for s in steers] == [
        (alert["advice"], alert["event_id"])]
    tools = eddy.steps(step_type="tool_call")
    assert tools[0]["tool_name"] == "web_search"
    assert tools[0]["tool_input"] == {"query": "eddy release date"}
    assert tools[0]["tool_output"] == "no results"
    assert [e["content"] for e in eddy.steps(step_type="think")] == [
        "eddy 1.0 came out on 2026-03-02."]
    assert (eddy.events[-1]["kind"], eddy.events[-1]["status"]) == ("run_finished", "completed")


def test_an_agent_that_ignores_the_message_is_stopped():
    CALLS.clear()
    emitter, guard, eddy = fleet()
    hooks = EddyRunHooks(emitter, guard)
    with pytest.raises(LoopDetected) as stop:
        run(scripted(heeds=False), hooks)
    assert stop.value.severity == "stop"
    assert CALLS == ["eddy release date"] * 4, "no tool call after the stop"
    assert len(eddy.steps(step_type="steer")) == 1
    last = eddy.events[-1]
    assert (last["kind"], last["status"], last["termination_reason"]) == (
        "run_finished", "failed", "loop_detected")
    assert hooks.stopped is not None
