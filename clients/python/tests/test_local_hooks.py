"""The framework hooks with a Local as emitter and guard: eddy's real detectors decide, in this
process, with no broker. What stopped the agent is held to `eddy replay` of the very events the
hook produced (recorded through the Local's tee)."""
import json

import pytest

from conftest import RecordingProducer, events
from eddy_agent import Emitter, Local, LoopDetected, replay


def teed(project_id="acme"):
    tee = Emitter("127.0.0.1:1", project_id=project_id, agent_name="bot")
    tee._producer = RecordingProducer()
    return Local(project_id=project_id, tee=tee), tee


def replayed(tmp_path, evs):
    """`eddy replay` of the events as the tee put them on the topic."""
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False) + "\n"
                            for e in evs))
    return replay(path)


def replayed_stop(tmp_path, evs):
    return next(o for o in replayed(tmp_path, evs) if o.get("severity") == "stop")


def test_langchain_looping_agent_is_stopped_in_process(tmp_path):
    pytest.importorskip("langchain_core", reason="pip install langchain-core")
    from test_langchain import CALLS, looping_model, react

    from eddy_agent.langchain import EddyCallbackHandler

    CALLS.clear()
    eddy, tee = teed()
    handler = EddyCallbackHandler(eddy, agent_name="researcher")  # the Local is the guard too
    with pytest.raises(LoopDetected) as stop:
        react(looping_model()).invoke({"question": "when is eddy released?"},
                                      config={"callbacks": [handler]})
    evs = events(tee)
    want = replayed_stop(tmp_path, evs)
    assert stop.value.signal == want
    tool_steps = [e["step_index"] for e in evs if e["kind"] == "step" and e.get("tool_name")]
    # The verdict came with the step that showed it: no tool ran after it.
    assert tool_steps[-1] == want["step_index"] and len(CALLS) == len(tool_steps)
    assert (evs[-1]["kind"], evs[-1]["termination_reason"]) == ("run_finished", "loop_detected")
    assert eddy.open_runs == 0


def test_langchain_healthy_agent_completes_in_process(tmp_path):
    pytest.importorskip("langchain_core", reason="pip install langchain-core")
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from test_langchain import react

    from eddy_agent.langchain import EddyCallbackHandler

    eddy, tee = teed()
    model = FakeMessagesListChatModel(responses=[
        AIMessage(content="", tool_calls=[{"name": "get_weather", "args": {"city": c}, "id": c}])
        for c in ("Paris", "Oslo", "Rome", "Lima")
    ] + [AIMessage(content="All sunny.")])
    handler = EddyCallbackHandler(eddy, agent_name="weather")
    assert react(model).invoke({"question": "weather?"}, config={"callbacks": [handler]}) == \
        "All sunny."
    run = events(tee)[0]["run_id"]
    assert eddy.terminated(run)["status"] == "completed"
    outs = replayed(tmp_path, events(tee))
    assert outs[-1]["kind"] == "run_terminated"
    assert all(o.get("severity") != "stop" for o in outs)


def test_gymnasium_stuck_episode_is_truncated_in_process(tmp_path):
    gymnasium = pytest.importorskip("gymnasium", reason="pip install gymnasium")
    from eddy_agent.gymnasium import EddyEpisodes

    eddy, tee = teed()
    env = EddyEpisodes(gymnasium.make("FrozenLake-v1", is_slippery=False), eddy)
    obs, info = env.reset(seed=0)
    taken = 0
    for _ in range(200):
        # LEFT from the start cell: the agent bumps the wall, the observation never changes.
        obs, reward, terminated, truncated, info = env.step(0)
        if truncated:
            break
        taken += 1
    assert truncated and "eddy_stop" in info
    want = replayed_stop(tmp_path, events(tee))
    assert info["eddy_stop"].signal == want
    steps = [e for e in events(tee) if e["kind"] == "step"]
    assert len(steps) == taken and steps[-1]["step_index"] == want["step_index"]
