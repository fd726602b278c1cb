"""The OpenAI Agents SDK (`openai-agents`): eddy as run hooks and a model-input filter.

    from agents import Runner
    from eddy_agent.openai_agents import EddyRunHooks

    eddy = EddyRunHooks(emitter, guard)                  # one per run
    result = await Runner.run(agent, "...", hooks=eddy, run_config=eddy.run_config())

The hooks report the model's text and every function-tool call as steps, and raise
`LoopDetected` before the next model or tool call once eddy said stop (the run ends there, and
is reported as `loop_detected`). The run config's `call_model_input_filter` (the SDK's own place
to edit what the model is sent) adds eddy's corrective message once per loop after an alert, as
a user message, reports that it steered, and keeps the message where it was first given in
every later call of the run, as if it were part of the conversation.
"""
from __future__ import annotations

import json
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

from agents import RunConfig, RunHooks
from agents.run_config import CallModelData, ModelInputData

from ._verdicts import LoopDetected
from .steering import SteeringGuard, StepSink, steer_or_stop


def _json(text: Any) -> Any:
    if isinstance(text, str):
        s = text.strip()
        if s[:1] in ("{", "["):
            try:
                return json.loads(s)
            except ValueError:
                pass
        return text
    try:
        json.dumps(text)
        return text
    except (TypeError, ValueError):
        return str(text)


class EddyRunHooks(RunHooks):
    """One run's hooks: make one per `Runner.run` (the run is `run_id`, else a new uuid)."""

    def __init__(self, emitter: StepSink, guard: Optional[SteeringGuard] = None, *,
                 run_id: Optional[str] = None, agent_name: Optional[str] = None,
                 input: Optional[str] = None, metadata: Optional[Dict[str, Any]] = None):
        self.emitter = emitter
        self.guard = guard if guard is not None else getattr(emitter, "guard", None)
        self.run_id = run_id or str(uuid.uuid4())
        self.agent_name = agent_name
        self._input = input
        self._metadata = metadata
        self._started = False
        self._ended = False
        self._tools: Dict[str, float] = {}
        # (position in the model input when given, the input item): kept in later calls
        self._given: List[Tuple[int, Dict[str, Any]]] = []
        self.steers: list = []
        self.stopped: Optional[LoopDetected] = None

    # ------------------------------------------------------------------ run bookkeeping
    def _start(self, agent: Any) -> None:
        if not self._started:
            self._started = True
            self.emitter.run_started(self.run_id, agent_name=self.agent_name or agent.name,
                                     input=self._input, metadata=self._metadata)

    def _check(self) -> None:
        if self.guard is None:
            return
        try:
            self.guard.check(self.run_id)
        except LoopDetected as stop:
            self._stop(stop)
            raise

    def _stop(self, stop: LoopDetected) -> None:
        self.stopped = stop
        self.finish(stop)

    def finish(self, error: Optional[BaseException] = None) -> None:
        """End the run, once: completed, or failed with the error's reason. Called by the hooks
        at the final output and on a stop; call it yourself when the run fails otherwise."""
        if self._ended or not self._started:
            return
        self._ended = True
        if isinstance(error, LoopDetected):
            self.emitter.run_finished(self.run_id, status="failed",
                                      termination_reason="loop_detected")
        elif error is not None:
            self.emitter.run_finished(self.run_id, status="failed", termination_reason="error",
                                      output=str(error)[:4000])
        else:
            self.emitter.run_finished(self.run_id, status="completed")

    def run_config(self, **kwargs: Any) -> RunConfig:
        """A `RunConfig` whose model-input filter steers (other settings as keywords)."""
        return RunConfig(call_model_input_filter=self.input_filter, **kwargs)

    # ------------------------------------------------------------------ steering
    def input_filter(self, data: CallModelData) -> ModelInputData:
        """`RunConfig.call_model_input_filter`: raises `LoopDetected` on a stop; adds eddy's
        message on a steer, and every message given earlier in the run where it was given."""
        self._start(data.agent)
        try:
            steer = steer_or_stop(self.guard, self.emitter, self.run_id)
        except LoopDetected as stop:
            self._stop(stop)
            raise
        items = list(data.model_data.input)
        if steer is not None:
            self.steers.append(steer)
            self._given.append((len(items), {"role": "user", "content": steer.message}))
        for shift, (at, item) in enumerate(self._given):
            items.insert(min(at + shift, len(items)), item)
        return ModelInputData(input=items, instructions=data.model_data.instructions)

    # ------------------------------------------------------------------ hooks
    async def on_agent_start(self, context, agent) -> None:
        self._start(agent)

    async def on_llm_start(self, context, agent, system_prompt, input_items) -> None:
        self._start(agent)
        self._check()

    async def on_llm_end(self, context, agent, response) -> None:
        usage = getattr(response, "usage", None)
        for item in getattr(response, "output", None) or []:
            if getattr(item, "type", None) != "message":
                continue
            text = "".join(getattr(c, "text", "") or "" for c in getattr(item, "content", []))
            # A turn that only calls tools has no text; an empty "think" step would read as an
            # empty response to eddy's content detector.
            if text.strip():
                self.emitter.step(self.run_id, step_type="think", content=text,
                                  tokens=getattr(usage, "total_tokens", None) or None,
                                  tokens_in_context=getattr(usage, "input_tokens", None) or None,
                                  agent=agent.name)

    async def on_tool_start(self, context, agent, tool) -> None:
        self._start(agent)
        self._check()
        self._tools[getattr(context, "tool_call_id", None) or tool.name] = time.monotonic()

    async def on_tool_end(self, context, agent, tool, result) -> None:
        t0 = self._tools.pop(getattr(context, "tool_call_id", None) or tool.name, None)
        args = getattr(context, "tool_arguments", None)
        self.emitter.step(
            self.run_id, step_type="tool_call", tool_name=tool.name,
            tool_input=_json(args) if args is not None else None, tool_output=_json(result),
            tool_success=True, agent=agent.name,
            tool_latency_ms=None if t0 is None else round((time.monotonic() - t0) * 1000, 3))

    async def on_handoff(self, context, from_agent, to_agent) -> None:
        self.emitter.step(self.run_id, step_type="handoff", agent=to_agent.name,
                          caller=from_agent.name)

    async def on_agent_end(self, context, agent, output) -> None:
        self.finish()
