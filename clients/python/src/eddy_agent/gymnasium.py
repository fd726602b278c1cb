"""Gymnasium hook: each episode is an eddy run, each env.step() an eddy step, and an episode
eddy says loops is truncated before its next step.

    env = EddyEpisodes(gymnasium.make("FrozenLake-v1"), emitter, guard)
    obs, info = env.reset()
    ...
    obs, reward, terminated, truncated, info = env.step(action)   # truncated once eddy says stop
    info.get("eddy_stop")                                         # the LoopDetected, when it did
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional

import gymnasium

from ._verdicts import LoopDetected


def _plain(x: Any) -> Any:
    """numpy scalars and arrays as JSON values."""
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    return x


class EddyEpisodes(gymnasium.Wrapper):
    def __init__(self, env, emitter, guard=None, *, agent_name: str = "rl-policy",
                 metadata: Optional[dict] = None,
                 describe_step: Optional[Callable[[Any, Any, float], dict]] = None):
        super().__init__(env)
        self.emitter = emitter
        self.guard = guard if guard is not None else getattr(emitter, "guard", None)
        self.agent_name = agent_name
        self.metadata = metadata
        self.describe_step = describe_step
        self.run_id: Optional[str] = None
        self._last_obs: Any = None

    def reset(self, **kwargs):
        self._end("completed", "clean")  # an episode abandoned by a reset
        obs, info = self.env.reset(**kwargs)
        self.run_id = self.emitter.run_started(agent_name=self.agent_name, metadata=self.metadata)
        self._last_obs = obs
        info = dict(info, eddy_run_id=self.run_id)
        return obs, info

    def step(self, action):
        stop = self._stopped()
        if stop is not None:
            # The step is not taken: the policy is stuck, more of it only costs.
            # As every hook ends a stopped run (Emitter.run_finished's default for it).
            self._end("failed", "loop_detected")
            return self._last_obs, 0.0, False, True, {"eddy_stop": stop}
        t0 = time.monotonic()
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._last_obs = obs
        if self.run_id is not None:
            out = (self.describe_step(action, obs, reward) if self.describe_step
                   else {"obs": _plain(obs), "reward": float(reward)})
            self.emitter.step(self.run_id, step_type="tool_call", tool_name="env.step",
                              tool_input={"action": _plain(action)}, tool_output=out,
                              tool_success=True,
                              tool_latency_ms=round((time.monotonic() - t0) * 1000, 3))
        if terminated or truncated:
            self._end("completed", "clean" if terminated else "max_steps_reached")
        return obs, reward, terminated, truncated, info

    def close(self):
        self._end("completed", "clean")
        super().close()

    def _stopped(self) -> Optional[LoopDetected]:
        if self.guard is None or self.run_id is None:
            return None
        return self.guard.stopped(self.run_id)

    def _end(self, status: str, reason: str) -> None:
        if self.run_id is not None:
            self.emitter.run_finished(self.run_id, status=status, termination_reason=reason)
            if self.guard is not None:
                self.guard.unwatch(self.run_id)
            self.run_id = None
