"""A stand-in for eddy's worker in offline tests of the steering hooks: it applies eddy's
documented rule for back-to-back identical calls (docs/detection.md: alert at the 3rd, stop at
the 4th; thoughts and steer steps do not break the streak) to the steps an `Emitter` produces,
and hands the guard the signals eddy would publish, at once, as its consumer thread would."""
import hashlib
import json

from eddy_agent import Emitter, Guard


class FakeEddy:
    def __init__(self, guard):
        self.guard = guard
        self.events = []         # every event the agent sent, decoded
        self.signals = []        # every signal handed to the guard
        self._streak = {}        # run -> (call, [step indices])

    def take(self, event):
        self.events.append(event)
        if event["kind"] != "step" or event["step_type"] != "tool_call":
            return
        run = event["run_id"]
        call = json.dumps([event.get("tool_name"), event.get("tool_input"),
                           event.get("tool_output")], sort_keys=True)
        prev, steps = self._streak.get(run, (None, []))
        steps = steps + [event["step_index"]] if call == prev else [event["step_index"]]
        self._streak[run] = (call, steps)
        severity = {3: "alert", 4: "stop"}.get(len(steps))
        if severity:
            self._signal(event, severity, steps)

    def _signal(self, step, severity, steps):
        tool = step.get("tool_name")
        fp = hashlib.sha256(self._streak[step["run_id"]][0].encode()).hexdigest()[:16]
        sig = {
            "kind": "loop_detected", "project_id": step["project_id"], "run_id": step["run_id"],
            "event_id": hashlib.sha256(f"{step['run_id']}{fp}{severity}".encode()).hexdigest()[:32],
            "step_index": step["step_index"], "ts": "2026-01-01T00:00:00Z",
            "detector": "repeated_operation", "severity": severity,
            "pattern": f"{tool}(same call, same result) x{len(steps)}", "fingerprint": fp,
            "hits": len(steps), "step_indices": steps, "first_step_index": steps[0],
            "evidence": {"tool": tool, "tool_class": "normal"},
            "advice": (f"eddy: this run is repeating itself. Since step {steps[0]} you called "
                       f"{tool} {len(steps)} times with the same arguments and got the same "
                       "result each time. Calling it again will not change the result: use what "
                       "it returned, change the arguments, try a different tool, or say what is "
                       "blocking you."),
        }
        self.signals.append(sig)
        self.guard._take(step["run_id"].encode(), json.dumps(sig).encode())

    def steps(self, run_id=None, step_type=None):
        return [e for e in self.events if e["kind"] == "step"
                and (run_id is None or e["run_id"] == run_id)
                and (step_type is None or e["step_type"] == step_type)]


class _Producer:
    def __init__(self, eddy):
        self.eddy = eddy

    def produce(self, topic, key=None, value=None, on_delivery=None):
        self.eddy.take(json.loads(value))

    def poll(self, timeout=0):
        return 0

    def flush(self, timeout=None):
        return 0


def fleet(steer_on="alert"):
    """(emitter, guard, eddy): a real Emitter and Guard, neither connected to a broker."""
    guard = Guard("127.0.0.1:1", topic="t.signals", steer_on=steer_on, start=False)
    eddy = FakeEddy(guard)
    emitter = Emitter("127.0.0.1:1", topic="t.steps", project_id="acme", agent_name="bot",
                      guard=guard)
    emitter._producer = _Producer(eddy)
    return emitter, guard, eddy
