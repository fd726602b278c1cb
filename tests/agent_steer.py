#!/usr/bin/env python3
"""A LangChain 1.x agent steered by eddy through the real pipeline, driven by tests/agent_steer.rs:

    python3 tests/agent_steer.py --brokers B --steps-topic T --signals-topic S --heeds yes|no

The agent (`create_agent`, LangChain's GenericFakeChatModel answering from a script, a real
tool, `eddy_agent.middleware.EddyMiddleware` on the Kafka Emitter and Guard) searches the same
thing until eddy's message is in its input; with `--heeds yes` it then searches something else
and answers, with `--heeds no` it goes on until eddy stops it. Its model answers as slowly as
eddy needs (it waits, bounded, for the verdict on its third and fourth identical call to reach
the guard), as a model that takes a few hundred milliseconds per call would: the test is about
what the steer leaves in ClickHouse and on the topic, not about how fast a verdict travels.

Prints one JSON line: {"run_id", "outcome": "answered"|"stopped", "steers": [event ids],
"stop_event_id", "tool_calls"}.
"""
import argparse
import itertools
import json
import sys
import time
import uuid

try:
    from eddy_agent import Emitter, Guard, LoopDetected
    from eddy_agent.middleware import EddyMiddleware
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from pydantic import Field
except ImportError as e:  # the Rust test turns this exit code into its message
    print(f"cannot import ({e}): pip install ./clients/python langchain", file=sys.stderr)
    sys.exit(3)


class ScriptedChatModel(GenericFakeChatModel):
    sent: list = Field(default_factory=list)

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.sent.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--steps-topic", required=True)
    ap.add_argument("--signals-topic", required=True)
    ap.add_argument("--project", default="steer")
    ap.add_argument("--heeds", choices=["yes", "no"], required=True)
    args = ap.parse_args()
    heeds = args.heeds == "yes"

    guard = Guard(args.brokers, topic=args.signals_topic)
    emitter = Emitter(args.brokers, topic=args.steps_topic, project_id=args.project,
                      agent_name=f"steer-{args.heeds}", guard=guard)
    run_id = f"steer-{args.heeds}-{uuid.uuid4()}"
    guard.watch(run_id, args.project)
    calls = []

    def await_verdict(what, seen, timeout=60.0):
        """Block the tool until the guard got the verdict `seen(signals)` looks for (bounded)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if seen(guard.signals(run_id)):
                return
            time.sleep(0.02)
        print(f"no {what} within {timeout}s", file=sys.stderr)

    def verdicts(signals):
        return [s for s in signals if s.get("severity") in ("alert", "stop")]

    def first_verdict(signals):
        return bool(verdicts(signals))

    def stop_after_first(signals):
        v = verdicts(signals)
        return any(s["severity"] == "stop" and s["step_index"] > v[0]["step_index"] for s in v)

    @tool
    def web_search(query: str) -> str:
        """Search the web."""
        calls.append(query)
        return "eddy 1.0 was released on 2026-03-02" if "changelog" in query else "no results"

    class ModelLatency(AgentMiddleware):
        """Before eddy's middleware: the model takes as long as the verdict on the step just
        reported needs to reach the guard (the third identical search is eddy's first verdict,
        which the guard steers on; the fourth, after the steer, is stopped)."""

        def before_model(self, state, runtime):
            same = len([q for q in calls if q == "eddy release date"])
            if calls and calls[-1] == "eddy release date" and same == 3:
                await_verdict("first verdict", first_verdict)
            elif calls and calls[-1] == "eddy release date" and same == 4:
                await_verdict("stop after the steer", stop_after_first)
            return None

    model = ScriptedChatModel(messages=iter(()))

    def search(q, i):
        return AIMessage(content="", tool_calls=[{"name": "web_search", "args": {"query": q},
                                                  "id": f"call_{i}"}])

    def script():
        for i in itertools.count():
            told = any(getattr(m, "name", None) == "eddy" for m in model.sent[-1])
            if heeds and told:
                yield search("eddy changelog", i)
                yield AIMessage(content="eddy 1.0 came out on 2026-03-02.")
                return
            yield search("eddy release date", i)

    model.messages = script()
    mw = EddyMiddleware(emitter, guard, run_id=run_id, agent_name=f"steer-{args.heeds}")
    agent = create_agent(model, [web_search], middleware=[ModelLatency(), mw])
    report = {"run_id": run_id, "stop_event_id": None}
    try:
        agent.invoke({"messages": [{"role": "user", "content": "When was eddy 1.0 released?"}]})
        report["outcome"] = "answered"
        mw.finish()
    except LoopDetected as stop:
        report["outcome"] = "stopped"
        report["stop_event_id"] = stop.event_id
        mw.finish(stop)
    left = emitter.flush(30)
    report["steers"] = [s.event_id for s in mw.steers]
    report["tool_calls"] = len(calls)
    report["calls"] = calls
    report["signals"] = [(x.get("severity"), x.get("detector"), x.get("step_index"))
                         for x in guard.signals(run_id)]
    report["undelivered"] = left
    print(json.dumps(report), flush=True)
    guard.close()


if __name__ == "__main__":
    main()
