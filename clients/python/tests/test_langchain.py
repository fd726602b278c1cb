"""The LangChain hook, offline: LangChain's own fake chat models and real tools in a small ReAct
loop; eddy's verdict is injected into the guard's bookkeeping when the run reaches step k."""
import itertools

import pytest

pytest.importorskip("langchain_core", reason="pip install langchain-core")

from langchain_core.language_models.fake_chat_models import (  # noqa: E402
    FakeMessagesListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

from conftest import events  # noqa: E402
from eddy_agent import LoopDetected, Verdicts  # noqa: E402
from eddy_agent.langchain import EddyCallbackHandler  # noqa: E402

CALLS = []


@tool
def web_search(query: str) -> str:
    """Search the web."""
    CALLS.append(query)
    return '{"results": [], "note": "no results"}'


@tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    CALLS.append(city)
    return f"sunny in {city}"


TOOLS = {t.name: t for t in (web_search, get_weather)}


def react(model, max_turns=50):
    def run(inputs, config):
        messages = [HumanMessage(inputs["question"])]
        for _ in range(max_turns):
            ai = model.invoke(messages, config=config)
            messages.append(ai)
            if not ai.tool_calls:
                return ai.content
            for call in ai.tool_calls:
                messages.append(TOOLS[call["name"]].invoke(call, config=config))
        return "gave up"

    return RunnableLambda(run)


def looping_model():
    msgs = (AIMessage(content="Let me search again.",
                      tool_calls=[{"name": "web_search", "args": {"query": "eddy release date"},
                                   "id": f"call_{i}"}])
            for i in itertools.count())
    return GenericFakeChatModel(messages=msgs)


class InjectingGuard:
    """Guard surface over Verdicts; 'eddy' says stop once the run has `stop_after` tool steps."""

    def __init__(self, emitter, stop_after):
        self.v = Verdicts()
        self.emitter = emitter
        self.stop_after = stop_after

    def watch(self, run_id, project_id=None):
        self.v.watch(run_id, project_id)

    def stopped(self, run_id):
        return self.v.stop_of(run_id)

    def check(self, run_id):
        tool_steps = [e["step_index"] for e in events(self.emitter)
                      if e["kind"] == "step" and e["run_id"] == run_id and e.get("tool_name")]
        if len(tool_steps) >= self.stop_after:
            for copy in range(2):  # at-least-once delivery: the same signal twice
                self.v.offer({"kind": "loop_detected", "event_id": "sig-1", "project_id": "acme",
                              "run_id": run_id, "severity": "stop", "detector": "repeat",
                              "pattern": "web_search(query=eddy release date)",
                              "step_indices": tool_steps[-3:], "first_step_index": tool_steps[0],
                              "evidence": {"hits": len(tool_steps)}})
        self.v.check(run_id)


@pytest.mark.parametrize("check_before_model", [True, False])
def test_looping_agent_raises_loop_detected_before_its_next_tool_call(emitter, check_before_model):
    CALLS.clear()
    guard = InjectingGuard(emitter, stop_after=4)
    emitter.guard = guard
    handler = EddyCallbackHandler(emitter, guard, agent_name="researcher",
                                  check_before_model=check_before_model)
    with pytest.raises(LoopDetected) as stop:
        react(looping_model()).invoke({"question": "when is eddy released?"},
                                      config={"callbacks": [handler]})
    assert stop.value.detector == "repeat"
    assert stop.value.pattern.startswith("web_search")
    assert len(CALLS) == 4, "no tool ran after the verdict"
    evs = events(emitter)
    run_id = evs[0]["run_id"]
    assert evs[0]["kind"] == "run_started" and evs[0]["agent_name"] == "researcher"
    tool_steps = [e for e in evs if e["kind"] == "step" and e.get("tool_name")]
    assert len(tool_steps) == 4
    assert all(e["tool_input"] == {"query": "eddy release date"} for e in tool_steps)
    assert all(e["tool_output"] == {"results": [], "note": "no results"} for e in tool_steps)
    assert all(e["tool_success"] is True for e in tool_steps)
    thinks = [e for e in evs if e["kind"] == "step" and e["step_type"] == "think"]
    assert thinks and all(e["content"] == "Let me search again." for e in thinks)
    indices = [e["step_index"] for e in evs if e["kind"] == "step"]
    assert indices == list(range(1, len(indices) + 1))
    assert evs[-1]["kind"] == "run_finished" and evs[-1]["run_id"] == run_id
    assert (evs[-1]["status"], evs[-1]["termination_reason"]) == ("failed", "loop_detected")
    assert guard.v.duplicates >= 1 and len(guard.v.signals(run_id)) == 1


def test_healthy_agent_completes(emitter):
    CALLS.clear()
    guard = InjectingGuard(emitter, stop_after=10**9)
    model = FakeMessagesListChatModel(responses=[
        AIMessage(content="", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "1"}]),
        AIMessage(content="", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "2"}]),
        AIMessage(content="Paris is sunny, Oslo too."),
    ])
    handler = EddyCallbackHandler(emitter, guard, agent_name="weather")
    out = react(model).invoke({"question": "weather?"}, config={"callbacks": [handler]})
    assert out == "Paris is sunny, Oslo too."
    evs = events(emitter)
    tool_steps = [e for e in evs if e["kind"] == "step" and e.get("tool_name")]
    assert [(e["tool_name"], e["tool_input"], e["tool_output"]) for e in tool_steps] == [
        ("get_weather", {"city": "Paris"}, "sunny in Paris"),
        ("get_weather", {"city": "Oslo"}, "sunny in Oslo"),
    ]
    # answers that only call tools carry no text: no empty think steps
    assert [e["content"] for e in evs if e["kind"] == "step" and e["step_type"] == "think"] == [
        "Paris is sunny, Oslo too."]
    assert (evs[-1]["kind"], evs[-1]["status"]) == ("run_finished", "completed")
    assert "termination_reason" not in evs[-1]


def test_fixed_run_id_is_started_once_and_finished_by_the_caller(emitter):
    guard = InjectingGuard(emitter, stop_after=10**9)
    handler = EddyCallbackHandler(emitter, guard, run_id="fixed-1", agent_name="a")
    model = FakeMessagesListChatModel(responses=[AIMessage(content="done")])
    for _ in range(2):
        react(model).invoke({"question": "q"}, config={"callbacks": [handler]})
    handler.finish()
    kinds = [(e["kind"], e["run_id"]) for e in events(emitter)]
    assert kinds.count(("run_started", "fixed-1")) == 1
    assert kinds.count(("run_finished", "fixed-1")) == 1
    assert kinds[-1] == ("run_finished", "fixed-1")
