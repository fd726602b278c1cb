"""The steering hooks with a Local as emitter and guard: eddy's real detectors (the wheel's
engine) decide in this process, with no broker. Each framework's own fake model, scripted as in
the hooks' own tests: one that heeds eddy's message finishes its task, one that ignores it is
stopped. What the agent was told and where it was stopped is held to `eddy replay` of the very
events the hook produced (recorded through the Local's tee)."""
import json

import pytest

from conftest import RecordingProducer, events
from eddy_agent import Emitter, Local, LoopDetected, replay


def local_fleet(steer_on="alert"):
    tee = Emitter("127.0.0.1:1", project_id="acme", agent_name="bot")
    tee._producer = RecordingProducer()
    return Local(project_id="acme", agent_name="bot", steer_on=steer_on, tee=tee), tee


def replayed(tmp_path, tee):
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False) + "\n"
                            for e in events(tee)))
    return [o for o in replay(path) if o["kind"] != "run_terminated"]


def steps(tee, step_type):
    return [e for e in events(tee) if e["kind"] == "step" and e["step_type"] == step_type]


def first_verdict(sigs):
    """The first signal a guard acts on at the default steer_on: an alert, or a stop that came
    with no alert before it (eddy stops at conclusive evidence)."""
    return next(s for s in sigs if s["severity"] in ("alert", "stop"))


def check_heeded(tmp_path, tee, steers):
    """Steered once, with the first verdict eddy replay gives for these events, and not stopped
    after it: a stop that came first was held for the steer."""
    sigs = replayed(tmp_path, tee)
    first = first_verdict(sigs)
    assert [s.event_id for s in steers] == [first["event_id"]]
    assert steers[0].message == first["advice"] and first["advice"]
    steered = steps(tee, "steer")
    assert [(s["content"], s["signal_event_id"]) for s in steered] == [
        (first["advice"], first["event_id"])]
    assert not any(s["severity"] == "stop" and s["step_index"] > steered[0]["step_index"]
                   for s in sigs), "the agent changed course: no stop after the steer"
    assert (events(tee)[-1]["kind"], events(tee)[-1]["status"]) == ("run_finished", "completed")
    return first


def check_stopped(tmp_path, tee, stop, calls):
    """Steered once, then stopped at the first stop eddy replay gives after the steer, with no
    call after it."""
    steered = steps(tee, "steer")
    assert len(steered) == 1, "steered once per loop, not every call"
    want = next(s for s in replayed(tmp_path, tee)
                if s["severity"] == "stop" and s["step_index"] > steered[0]["step_index"])
    assert stop.signal == want
    tools = steps(tee, "tool_call")
    assert tools[-1]["step_index"] == want["step_index"] and len(calls) == len(tools)
    assert events(tee)[-1]["termination_reason"] == "loop_detected"


def test_langchain_middleware(tmp_path):
    pytest.importorskip("langchain.agents", reason="pip install langchain")
    from lc_models import agent_model
    from test_middleware import CALLS, invoke

    from eddy_agent.middleware import EddyMiddleware

    CALLS.clear()
    eddy, tee = local_fleet()
    mw = EddyMiddleware(eddy, agent_name="researcher")
    out = invoke(agent_model(heeds=True), mw)
    assert out["messages"][-1].content == "eddy 1.0 came out on 2026-03-02."
    assert CALLS[-1] == "eddy changelog"
    check_heeded(tmp_path, tee, mw.steers)

    CALLS.clear()
    eddy, tee = local_fleet()
    with pytest.raises(LoopDetected) as stop:
        invoke(agent_model(heeds=False), EddyMiddleware(eddy, agent_name="researcher"))
    check_stopped(tmp_path, tee, stop.value, CALLS)


def test_langgraph_node(tmp_path):
    pytest.importorskip("langgraph", reason="pip install langgraph")
    from lc_models import agent_model
    from test_langgraph import CALLS, run

    from eddy_agent.langchain import EddyCallbackHandler
    from eddy_agent.langgraph import EddyNode

    CALLS.clear()
    eddy, tee = local_fleet()
    handler = EddyCallbackHandler(eddy, agent_name="graph-agent")
    node = EddyNode(handler)
    out = run(agent_model(heeds=True), handler, node)
    assert out["messages"][-1].content == "eddy 1.0 came out on 2026-03-02."
    check_heeded(tmp_path, tee, node.steers)

    CALLS.clear()
    eddy, tee = local_fleet()
    handler = EddyCallbackHandler(eddy, agent_name="graph-agent")
    with pytest.raises(LoopDetected) as stop:
        run(agent_model(heeds=False), handler, EddyNode(handler))
    check_stopped(tmp_path, tee, stop.value, CALLS)


def test_openai_agents_hooks(tmp_path):
    pytest.importorskip("agents.testing", reason="pip install openai-agents")
    from test_openai_agents import CALLS, run, scripted

    from eddy_agent.openai_agents import EddyRunHooks

    CALLS.clear()
    eddy, tee = local_fleet()
    hooks = EddyRunHooks(eddy)
    result = run(scripted(heeds=True), hooks)
    assert result.final_output == "eddy 1.0 came out on 2026-03-02."
    check_heeded(tmp_path, tee, hooks.steers)

    CALLS.clear()
    eddy, tee = local_fleet()
    with pytest.raises(LoopDetected) as stop:
        run(scripted(heeds=False), EddyRunHooks(eddy))
    check_stopped(tmp_path, tee, stop.value, CALLS)


def test_without_steering_a_local_only_stops():
    eddy, tee = local_fleet(steer_on=None)
    run_id = eddy.run_started("r")
    for _ in range(50):
        try:
            eddy.check(run_id)
        except LoopDetected:
            break
        assert eddy.steer(run_id) is None
        eddy.step(run_id, tool_name="web_search", tool_input={"query": "x"}, tool_output="none")
    assert eddy.stopped(run_id) is not None and eddy.steer_on is None
