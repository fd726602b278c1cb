"""A Python agent on eddy_agent.Local with an Emitter as its tee, for tests/agent_local.rs: it
repeats one search until the Local stops it in process, ends the run, and prints one JSON report
(every signal the Local gave, and its run_terminated) for comparison with the worker's verdicts
on the same events.

    agent_local.py --brokers B --steps-topic T --run R
"""
import argparse
import json

from eddy_agent import Emitter, Local, LoopDetected

p = argparse.ArgumentParser()
p.add_argument("--brokers", required=True)
p.add_argument("--steps-topic", required=True)
p.add_argument("--run", required=True)
args = p.parse_args()

tee = Emitter(args.brokers, topic=args.steps_topic, project_id="py-agents", agent_name="researcher")
eddy = Local(project_id="py-agents", agent_name="researcher", tee=tee)
run = eddy.run_started(args.run)
calls = 0
for calls in range(400):
    try:
        eddy.check(run)
    except LoopDetected:
        break
    eddy.step(run, tool_name="web_search", tool_input={"query": "eddy release date"},
              tool_output={"results": [], "took_ms": 12.5})
signals = eddy.signals(run)
eddy.run_finished(run, status="failed")
errors = eddy.close(30)
print(json.dumps({"run_id": run, "tool_calls": calls, "errors": errors, "signals": signals,
                  "terminated": eddy.terminated(run)}))
