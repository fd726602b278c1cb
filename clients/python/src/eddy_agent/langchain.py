"""LangChain / LangGraph hook: every model answer and tool call becomes an eddy step, and the
guard is checked before each tool (and model) call, so `LoopDetected` raises inside the run.

    from eddy_agent.langchain import EddyCallbackHandler

    handler = EddyCallbackHandler(emitter, guard, agent_name="researcher")
    graph.invoke(inputs, config={"callbacks": [handler]})      # raises LoopDetected on stop

With no `run_id`, each top-level invocation (the root LangChain run) is one eddy run, started
and finished with it. With `run_id`, every event goes to that run and the caller ends it
(`handler.finish()`); it is started on the first event unless it was already.
"""
from __future__ import annotations

import json
import threading
import time
from typing import Any, Dict, Optional
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from ._verdicts import LoopDetected


def _jsonable(value: Any) -> Any:
    """A tool's output as JSON: ToolMessage/AIMessage content, JSON text parsed, else its text."""
    content = getattr(value, "content", None)
    if content is not None and not isinstance(value, (str, bytes, dict, list)):
        value = content
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in ("{", "["):
            try:
                return json.loads(s)
            except ValueError:
                pass
        return value
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


class EddyCallbackHandler(BaseCallbackHandler):
    # LangChain swallows handler errors unless asked; the stop must reach the agent.
    raise_error = True

    def __init__(self, emitter, guard=None, *, run_id: Optional[str] = None,
                 agent_name: str = "langchain-agent", agent: Optional[str] = None,
                 check_before_model: bool = True, input: Optional[str] = None,
                 metadata: Optional[Dict[str, Any]] = None):
        super().__init__()
        self.emitter = emitter
        self.guard = guard if guard is not None else getattr(emitter, "guard", None)
        self.run_id = run_id
        self.agent_name = agent_name
        self.agent = agent
        self.check_before_model = check_before_model
        self._input = input
        self._metadata = metadata
        self._started: set = set()
        self._owner: Dict[UUID, str] = {}     # LangChain run -> eddy run
        self._roots: Dict[UUID, str] = {}     # root LangChain runs that own an eddy run
        self._tools: Dict[UUID, tuple] = {}   # tool run -> (name, input, t0)
        self._lock = threading.Lock()
        self.stopped: Optional[LoopDetected] = None

    # ------------------------------------------------------------------ run bookkeeping
    def _enter(self, lc_run: UUID, parent: Optional[UUID], input: Any = None) -> str:
        with self._lock:
            if self.run_id is not None:
                eddy_run = self.run_id
            elif parent is not None and parent in self._owner:
                eddy_run = self._owner[parent]
            else:
                eddy_run = str(lc_run)
                self._roots[lc_run] = eddy_run
            self._owner[lc_run] = eddy_run
            fresh = eddy_run not in self._started
            self._started.add(eddy_run)
        if fresh:
            text = self._input if self._input is not None else (None if input is None else str(input)[:4000])
            self.emitter.run_started(eddy_run, agent_name=self.agent_name, input=text,
                                     metadata=self._metadata)
        return eddy_run

    def _leave(self, lc_run: UUID, error: Optional[BaseException] = None) -> None:
        with self._lock:
            self._owner.pop(lc_run, None)
            eddy_run = self._roots.pop(lc_run, None)
        if eddy_run is not None:
            self._finish(eddy_run, error)

    def _finish(self, eddy_run: str, error: Optional[BaseException]) -> None:
        if isinstance(error, LoopDetected):
            self.emitter.run_finished(eddy_run, status="failed", termination_reason="loop_detected")
        elif error is not None:
            self.emitter.run_finished(eddy_run, status="failed", termination_reason="error",
                                      output=str(error)[:4000])
        else:
            self.emitter.run_finished(eddy_run, status="completed")

    def finish(self, error: Optional[BaseException] = None) -> None:
        """End the fixed `run_id` run (completed, or failed with the error's reason)."""
        if self.run_id is not None and self.run_id in self._started:
            self._finish(self.run_id, error)
            self._started.discard(self.run_id)

    def run_for(self, config: Optional[Dict[str, Any]]) -> Optional[str]:
        """The eddy run of the LangChain run a node or tool is in, from its `config` (LangGraph
        passes a node its config; the node's run is a child of the invocation this handler
        saw start). With a fixed `run_id`, that one."""
        if self.run_id is not None:
            return self.run_id
        callbacks = (config or {}).get("callbacks")
        parent = getattr(callbacks, "parent_run_id", None)
        with self._lock:
            if parent is not None and parent in self._owner:
                return self._owner[parent]
            roots = list(self._roots.values())
        return roots[0] if len(roots) == 1 else None

    def _check(self, eddy_run: str) -> None:
        if self.guard is None:
            return
        try:
            self.guard.check(eddy_run)
        except LoopDetected as stop:
            self.stopped = stop
            raise

    # ------------------------------------------------------------------ chains
    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, **kw):
        self._enter(run_id, parent_run_id, inputs)

    def on_chain_end(self, outputs, *, run_id, parent_run_id=None, **kw):
        self._leave(run_id)

    def on_chain_error(self, error, *, run_id, parent_run_id=None, **kw):
        self._leave(run_id, error)

    # ------------------------------------------------------------------ models
    def on_chat_model_start(self, serialized, messages, *, run_id, parent_run_id=None, **kw):
        eddy_run = self._enter(run_id, parent_run_id)
        if self.check_before_model:
            self._check(eddy_run)

    def on_llm_start(self, serialized, prompts, *, run_id, parent_run_id=None, **kw):
        eddy_run = self._enter(run_id, parent_run_id)
        if self.check_before_model:
            self._check(eddy_run)

    def on_llm_end(self, response, *, run_id, parent_run_id=None, **kw):
        eddy_run = self._owner.get(run_id)
        if eddy_run is not None:
            self._model_steps(eddy_run, response)
        self._leave(run_id)

    def _model_steps(self, eddy_run: str, response) -> None:
        for gens in response.generations or []:
            for g in gens:
                text = getattr(g, "text", "") or ""
                msg = getattr(g, "message", None)
                usage = getattr(msg, "usage_metadata", None) or {}
                # An answer that only calls tools has no text; an empty "think" step would read
                # as an empty response to eddy's content detector.
                if text.strip():
                    self.emitter.step(eddy_run, step_type="think", content=text,
                                      tokens=usage.get("total_tokens"),
                                      tokens_in_context=usage.get("input_tokens"),
                                      agent=self.agent)

    def on_llm_error(self, error, *, run_id, parent_run_id=None, **kw):
        self._leave(run_id, error)

    # ------------------------------------------------------------------ tools
    def on_tool_start(self, serialized, input_str, *, run_id, parent_run_id=None, inputs=None, **kw):
        eddy_run = self._enter(run_id, parent_run_id)
        self._check(eddy_run)
        name = (serialized or {}).get("name") or kw.get("name") or "tool"
        args = inputs if inputs is not None else _jsonable(input_str)
        self._tools[run_id] = (eddy_run, name, args, time.monotonic())

    def on_tool_end(self, output, *, run_id, parent_run_id=None, **kw):
        self._tool_step(run_id, _jsonable(output), True)

    def on_tool_error(self, error, *, run_id, parent_run_id=None, **kw):
        self._tool_step(run_id, {"error": str(error)}, False)

    def _tool_step(self, run_id: UUID, output: Any, ok: bool) -> None:
        entry = self._tools.pop(run_id, None)
        if entry is not None:
            eddy_run, name, args, t0 = entry
            self.emitter.step(eddy_run, step_type="tool_call", tool_name=name, tool_input=args,
                              tool_output=output, tool_success=ok,
                              tool_latency_ms=round((time.monotonic() - t0) * 1000, 3),
                              agent=self.agent)
        self._leave(run_id)
