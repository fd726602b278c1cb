"""The gymnasium wrapper offline: a real FrozenLake, eddy's verdict injected into the guard."""
import pytest

pytest.importorskip("gymnasium", reason="pip install gymnasium")

import gymnasium  # noqa: E402

from conftest import events  # noqa: E402
from eddy_agent import Verdicts  # noqa: E402
from eddy_agent.gymnasium import EddyEpisodes  # noqa: E402

LEFT, DOWN, RIGHT = 0, 1, 2


class VerdictGuard:
    def __init__(self):
        self.v = Verdicts()

    def watch(self, run_id, project_id=None):
        self.v.watch(run_id, project_id)

    def unwatch(self, run_id):
        pass  # keep the record for the assertions

    def stopped(self, run_id):
        return self.v.stop_of(run_id)


def stop(run_id, step):
    return {"kind": "loop_detected", "event_id": f"s-{run_id}", "project_id": "acme",
            "run_id": run_id, "severity": "stop", "detector": "repeat", "step_index": step,
            "pattern": "env.step(action=0)", "step_indices": [step - 2, step - 1, step]}


def test_stuck_episode_is_truncated_before_its_next_step(emitter):
    guard = VerdictGuard()
    emitter.guard = guard
    env = EddyEpisodes(gymnasium.make("FrozenLake-v1", is_slippery=False), emitter)
    obs, info = env.reset(seed=0)
    run = info["eddy_run_id"]
    taken = 0
    for t in range(100):
        if t == 6:
            guard.v.offer(stop(run, 6))  # eddy's verdict on step 6 arrives
        obs, reward, terminated, truncated, info = env.step(LEFT)
        if truncated:
            break
        taken += 1
    assert truncated and not terminated
    assert info["eddy_stop"].detector == "repeat"
    assert taken == 6
    evs = [e for e in events(emitter) if e["run_id"] == run]
    steps = [e for e in evs if e["kind"] == "step"]
    assert len(steps) == 6
    assert all(s["tool_name"] == "env.step" and s["tool_input"] == {"action": 0} for s in steps)
    assert all(s["tool_output"] == {"obs": 0, "reward": 0.0} for s in steps)
    # Ended as every hook ends a stopped run.
    assert (evs[-1]["kind"], evs[-1]["status"], evs[-1]["termination_reason"]) == (
        "run_finished", "failed", "loop_detected")


def test_healthy_episode_reaches_the_goal_as_one_clean_run(emitter):
    guard = VerdictGuard()
    env = EddyEpisodes(gymnasium.make("FrozenLake-v1", is_slippery=False), emitter, guard)
    env.reset(seed=0)
    for a in [DOWN, DOWN, RIGHT, RIGHT, DOWN, RIGHT]:
        obs, reward, terminated, truncated, info = env.step(a)
    assert terminated and reward == 1.0
    evs = events(emitter)
    assert [e["kind"] for e in evs] == ["run_started"] + ["step"] * 6 + ["run_finished"]
    assert evs[-1]["termination_reason"] == "clean"
    assert [e["step_index"] for e in evs if e["kind"] == "step"] == [1, 2, 3, 4, 5, 6]
