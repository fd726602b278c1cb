"""eddy-agent: report an agent's steps to eddy and stop the run when eddy says it loops.

    from eddy_agent import Emitter, Guard, LoopDetected

    guard = Guard("kafka:9092")                          # one per process
    eddy = Emitter("kafka:9092", project_id="acme", agent_name="support-bot", guard=guard)
    run = eddy.run_started()                             # also watches the run
    while not done:
        guard.check(run)                                 # raises LoopDetected once eddy says stop
        out = call_tool(...)
        eddy.step(run, tool_name="search", tool_input=args, tool_output=out)
    eddy.run_finished(run)
"""
from ._murmur2 import murmur2, partition_for
from ._verdicts import SEVERITIES, LoopDetected, Verdicts, severity_rank
from .emitter import Emitter
from .guard import Guard

__all__ = ["Emitter", "Guard", "LoopDetected", "Verdicts", "SEVERITIES", "severity_rank",
           "murmur2", "partition_for"]
__version__ = "0.1.0"
