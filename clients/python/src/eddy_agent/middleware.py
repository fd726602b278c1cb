"""LangChain 1.x agents (`langchain.agents.create_agent`): eddy as an `AgentMiddleware`.

    from langchain.agents import create_agent
    from eddy_agent.middleware import EddyMiddleware

    agent = create_agent(model, tools, middleware=[EddyMiddleware(emitter, guard)])
    agent.invoke({"messages": [{"role": "user", "content": "..."}]})   # LoopDetected on stop

Each invocation is one eddy run (or every invocation goes to `run_id`, ended by the caller with
`finish()`). The middleware reports the model's text and every tool call as steps; before each
model call it raises `LoopDetected` if eddy said stop, and otherwise, once per loop after an
alert, adds eddy's corrective message to the conversation (a user message named "eddy") and
reports that it did (a `steer` step). Before each tool call it raises on a stop too.
"""
from __future__ import annotations

import time
import uuid
from typing import Any, Awaitable, Callable, Dict, Optional

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage
from typing_extensions import Annotated, NotRequired

from ._verdicts import LoopDetected
from .langchain import _jsonable
from .langgraph import steer_message
from .steering import SteeringGuard, StepSink, steer_or_stop


class EddyState(AgentState):
    """The agent's state plus the eddy run of the invocation (private to the middleware)."""

    eddy_run_id: NotRequired[Annotated[str, PrivateStateAttr]]


class EddyMiddleware(AgentMiddleware):
    state_schema = EddyState

    def __init__(self, emitter: StepSink, guard: Optional[SteeringGuard] = None, *,
                 run_id: Optional[str] = None, agent_name: str = "langchain-agent",
                 agent: Optional[str] = None, metadata: Optional[Dict[str, Any]] = None):
        super().__init__()
        self.emitter = emitter
        self.guard = guard if guard is not None else getattr(emitter, "guard", None)
        self.run_id = run_id
        self.agent_name = agent_name
        self.agent = agent
        self.metadata = metadata
        self._started: set = set()
        self.stopped: Optional[LoopDetected] = None
        self.steers: list = []

    # ------------------------------------------------------------------ run bookkeeping
    def _run_of(self, state: Any) -> str:
        run = self.run_id or (state or {}).get("eddy_run_id")
        if run is None:  # a graph resumed without before_agent: still one run
            run = self.run_id = str(uuid.uuid4())
        if run not in self._started:
            self._started.add(run)
            self.emitter.run_started(run, agent_name=self.agent_name, metadata=self.metadata)
        return run

    def _stop(self, run: str, stop: LoopDetected) -> None:
        self.stopped = stop
        if self.run_id is None:
            self.emitter.run_finished(run, status="failed", termination_reason="loop_detected")
            self._started.discard(run)

    def finish(self, error: Optional[BaseException] = None) -> None:
        """End the fixed `run_id` run (completed, or failed with the error's reason)."""
        if self.run_id is None or self.run_id not in self._started:
            return
        self._started.discard(self.run_id)
        if isinstance(error, LoopDetected):
            self.emitter.run_finished(self.run_id, status="failed",
                                      termination_reason="loop_detected")
        elif error is not None:
            self.emitter.run_finished(self.run_id, status="failed", termination_reason="error",
                                      output=str(error)[:4000])
        else:
            self.emitter.run_finished(self.run_id, status="completed")

    # ------------------------------------------------------------------ agent
    def before_agent(self, state, runtime) -> Optional[Dict[str, Any]]:
        if self.run_id is not None:
            self._run_of(state)
            return None
        run = str(uuid.uuid4())
        text = None
        msgs = state.get("messages") or []
        if msgs:
            text = str(getattr(msgs[-1], "content", ""))[:4000] or None
        self._started.add(run)
        self.emitter.run_started(run, agent_name=self.agent_name, input=text,
                                 metadata=self.metadata)
        return {"eddy_run_id": run}

    def after_agent(self, state, runtime) -> None:
        run = state.get("eddy_run_id")
        if self.run_id is None and run in self._started:
            self._started.discard(run)
            self.emitter.run_finished(run, status="completed")
        return None

    # ------------------------------------------------------------------ model
    def before_model(self, state, runtime) -> Optional[Dict[str, Any]]:
        run = self._run_of(state)
        try:
            steer = steer_or_stop(self.guard, self.emitter, run)
        except LoopDetected as stop:
            self._stop(run, stop)
            raise
        if steer is None:
            return None
        self.steers.append(steer)
        return {"messages": [steer_message(steer)]}

    def after_model(self, state, runtime) -> None:
        msgs = state.get("messages") or []
        last = msgs[-1] if msgs else None
        if isinstance(last, AIMessage):
            text = last.text if isinstance(getattr(last, "text", None), str) else str(last.content)
            # An answer that only calls tools has no text; an empty "think" step would read as
            # an empty response to eddy's content detector.
            if text.strip():
                usage = last.usage_metadata or {}
                self.emitter.step(self._run_of(state), step_type="think", content=text,
                                  tokens=usage.get("total_tokens"),
                                  tokens_in_context=usage.get("input_tokens"), agent=self.agent)
        return None

    # ------------------------------------------------------------------ tools
    def _before_tool(self, request) -> tuple:
        run = self._run_of(request.state)
        if self.guard is not None:
            try:
                self.guard.check(run)
            except LoopDetected as stop:
                self._stop(run, stop)
                raise
        return run, time.monotonic()

    def _tool_step(self, run: str, request, result: Any, t0: float) -> None:
        call = request.tool_call
        failed = getattr(result, "status", None) == "error"
        self.emitter.step(run, step_type="tool_call", tool_name=call.get("name") or "tool",
                          tool_input=call.get("args"), tool_output=_jsonable(result),
                          tool_success=not failed,
                          tool_latency_ms=round((time.monotonic() - t0) * 1000, 3),
                          agent=self.agent)

    def wrap_tool_call(self, request, handler: Callable[[Any], Any]):
        run, t0 = self._before_tool(request)
        result = handler(request)
        self._tool_step(run, request, result, t0)
        return result

    async def awrap_tool_call(self, request, handler: Callable[[Any], Awaitable[Any]]):
        run, t0 = self._before_tool(request)
        result = await handler(request)
        self._tool_step(run, request, result, t0)
        return result
