"""The LangGraph hook, offline: a StateGraph (model node, LangGraph's ToolNode, and
`EddyNode` before the model) with LangChain's fake chat model; the callback handler reports
the steps, and eddy's verdicts come from `fake_eddy` through a real Guard."""
import pytest

pytest.importorskip("langgraph", reason="pip install langgraph")

from langchain_core.tools import tool  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode, tools_condition  # noqa: E402

from eddy_agent import LoopDetected  # noqa: E402
from eddy_agent.langchain import EddyCallbackHandler  # noqa: E402
from eddy_agent.langgraph import EddyNode  # noqa: E402
from fake_eddy import fleet  # noqa: E402
from lc_models import agent_model, told_by_eddy  # noqa: E402

CALLS = []


@tool
def web_search(query: str) -> str:
    """Search the web."""
    CALLS.append(query)
    return "eddy 1.0 was released on 2026-03-02" if "changelog" in query else "no results"


def graph(model, node):
    def call_model(state: MessagesState):
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("eddy", node)
    g.add_node("model", call_model)
    g.add_node("tools", ToolNode([web_search]))
    g.add_edge(START, "eddy")
    g.add_edge("eddy", "model")
    g.add_conditional_edges("model", tools_condition)
    g.add_edge("tools", "eddy")
    return g.compile()


def run(model, handler, node):
    return graph(model, node).invoke(
        {"messages": [("user", "When was eddy 1.0 released?")]},
        config={"callbacks": [handler], "recursion_limit": 60})


def test_a_graph_whose_model_heeds_the_message_finishes():
    CALLS.clear()
    emitter, guard, eddy = fleet()
    handler = EddyCallbackHandler(emitter, guard, agent_name="graph-agent")
    node = EddyNode(handler)
    model = agent_model(heeds=True)
    out = run(model, handler, node)
    assert out["messages"][-1].content == "eddy 1.0 came out on 2026-03-02."
    assert CALLS == ["eddy release date"] * 3 + ["eddy changelog"]
    alert = next(s for s in eddy.signals if s["severity"] == "alert")
    assert [s.event_id for s in node.steers] == [alert["event_id"]]
    assert sum(told_by_eddy(sent) for sent in model.sent) == 2, "told once, kept in history"
    steers = eddy.steps(step_type="steer")
    assert [(s["signal_event_id"], s["run_id"]) for s in steers] == [
        (alert["event_id"], eddy.events[0]["run_id"])]
    assert (eddy.events[-1]["kind"], eddy.events[-1]["status"]) == ("run_finished", "completed")


def test_a_graph_whose_model_ignores_it_is_stopped():
    CALLS.clear()
    emitter, guard, eddy = fleet()
    handler = EddyCallbackHandler(emitter, guard, agent_name="graph-agent")
    with pytest.raises(LoopDetected):
        run(agent_model(heeds=False), handler, EddyNode(handler))
    assert CALLS == ["eddy release date"] * 4
    assert len(eddy.steps(step_type="steer")) == 1
    last = eddy.events[-1]
    assert (last["kind"], last["termination_reason"]) == ("run_finished", "loop_detected")


def test_a_fixed_run_id_needs_no_handler():
    CALLS.clear()
    emitter, guard, eddy = fleet()
    handler = EddyCallbackHandler(emitter, guard, run_id="fixed", agent_name="g")
    node = EddyNode(run_id="fixed", guard=guard, emitter=emitter)
    run(agent_model(heeds=True), handler, node)
    handler.finish()
    assert [s["run_id"] for s in eddy.steps(step_type="steer")] == ["fixed"]
    with pytest.raises(ValueError):
        EddyNode()
