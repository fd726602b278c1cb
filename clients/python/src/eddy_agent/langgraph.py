"""LangGraph: eddy's steering as a node, run before the model node.

    from eddy_agent.langchain import EddyCallbackHandler
    from eddy_agent.langgraph import EddyNode

    handler = EddyCallbackHandler(emitter, guard, agent_name="researcher")
    graph.add_node("eddy", EddyNode(handler))         # edges: tools -> eddy -> model
    graph.compile().invoke(inputs, config={"callbacks": [handler]})

The callback handler reports the steps and raises `LoopDetected` before a tool or model call
once eddy said stop; the node raises on a stop as well and otherwise, once per loop after an
alert, adds eddy's corrective message to the state's messages (a user message named "eddy")
and reports that it steered. It also serves as `create_react_agent(pre_model_hook=...)`.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from .steering import Steer, SteeringGuard, StepSink, steer_or_stop


def steer_message(steer: Steer) -> HumanMessage:
    """The message a steer becomes: the user's turn, named "eddy", with an id per signal."""
    return HumanMessage(content=steer.message, name="eddy", id=f"eddy-steer-{steer.event_id}")


class EddyNode:
    """A LangGraph node: `LoopDetected` on a stop, eddy's message on an alert, else no update.

    The run is `run_id`, or the one `handler` (an `EddyCallbackHandler` among the invocation's
    callbacks) started for the invocation; guard and emitter default to the handler's."""

    def __init__(self, handler=None, *, guard: Optional[SteeringGuard] = None,
                 emitter: Optional[StepSink] = None, run_id: Optional[str] = None,
                 messages_key: str = "messages"):
        if handler is None and run_id is None:
            raise ValueError("EddyNode needs the EddyCallbackHandler of the graph, or a run_id")
        self.handler = handler
        self.guard = guard if guard is not None else getattr(handler, "guard", None)
        self.emitter = emitter if emitter is not None else getattr(handler, "emitter", None)
        self.run_id = run_id
        self.messages_key = messages_key
        self.steers: list = []

    def __call__(self, state: Any, config: Optional[RunnableConfig] = None) -> Dict[str, Any]:
        run = self.run_id or self.handler.run_for(config)
        if run is None:
            return {}
        steer = steer_or_stop(self.guard, self.emitter, run)
        if steer is None:
            return {}
        self.steers.append(steer)
        return {self.messages_key: [steer_message(steer)]}
