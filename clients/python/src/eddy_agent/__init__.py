"""eddy-agent: stop an agent that loops, with eddy's engine in this process or an eddy fleet.

In this process, no servers:

    from eddy_agent import Local

    eddy = Local()                                       # eddy's detectors, here
    eddy.step(run, tool_name="search", tool_input=args, tool_output=out)
    eddy.check(run)                                      # raises LoopDetected once eddy says stop

With a fleet (Kafka in, signals out):

    from eddy_agent import Emitter, Guard, LoopDetected

    guard = Guard("kafka:9092")                          # one per process
    eddy = Emitter("kafka:9092", project_id="acme", agent_name="support-bot", guard=guard)
    run = eddy.run_started()                             # also watches the run
    while not done:
        guard.check(run)                                 # raises LoopDetected once eddy says stop
        steer = guard.steer(run)                         # on an alert, once per loop: tell the
        if steer: prompt.append(steer.message)           # model (hooks do this and report it)
        out = call_tool(...)
        eddy.step(run, tool_name="search", tool_input=args, tool_output=out)
    eddy.run_finished(run)

Thousands of agent processes: `HttpGuard("http://eddy-ingest:8080", api_key="kw_...")` instead
of `Guard`: one server-sent events connection per process to eddy's HTTP bridge, only its
project's verdicts (see the README's "Which guard").
"""
from ._murmur2 import murmur2, partition_for
from ._verdicts import SEVERITIES, LoopDetected, Verdicts, severity_rank
from .emitter import AsyncEmitter, Emitter
from .guard import Guard
from .http_guard import HttpGuard, HttpGuardError
from .local import Local, replay
from .steering import Steer, SteeringGuard, StepSink, steer_or_stop

__all__ = ["AsyncEmitter", "Emitter", "Guard", "HttpGuard", "HttpGuardError", "Local", "LoopDetected", "replay", "Verdicts", "SEVERITIES",
           "severity_rank", "murmur2", "partition_for", "Steer", "SteeringGuard", "StepSink",
           "steer_or_stop"]
__version__ = "0.1.0"
