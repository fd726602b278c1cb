#!/usr/bin/env python3
"""Agents driven through the eddy-agent package (clients/python), against a real `eddy run`.

Driven by tests/agent_python.rs:

    python3 tests/agent_python.py --brokers B --steps-topic T --signals-topic S --scenario loop

Scenarios (each one run; the guard checks before every tool call):
- loop:    the same web_search with the same answer every --interval-ms until eddy says stop;
- healthy: polls a job until it is done, retries a flaky call that recovers, then distinct
           work; waits for eddy's run_terminated so "never stopped" means eddy saw it all;
- crash:   loop, then after the stop keeps listening and answers the test's "report N" on stdin
           once N duplicate signals arrived (the test kills and restarts the worker meanwhile);
- restart: the guard starts consuming, then the agent waits for "go" on stdin (the test restarts
           the broker meanwhile) and loops as in `loop`.
--framework langchain runs the loop as a LangChain agent (fake chat model, real tools) through
eddy_agent.langchain.

Prints JSON lines: {"event": "ready"}, {"event": "step", "i": ...}, {"event": "stopped", ...}
and last {"event": "report", ...}.
"""
import argparse
import asyncio
import json
import sys
import threading
import time
import uuid

try:
    from eddy_agent import Emitter, Guard, LoopDetected
except ImportError as e:  # the Rust test turns this exit code into its message
    print(f"cannot import eddy_agent ({e}): pip install ./clients/python", file=sys.stderr)
    sys.exit(3)


def say(**obj):
    print(json.dumps(obj), flush=True)


class Agent:
    def __init__(self, args):
        self.args = args
        self.on_stop_calls = 0
        self.guard = Guard(args.brokers, topic=args.signals_topic, on_stop=self._on_stop)
        self.eddy = Emitter(args.brokers, topic=args.steps_topic, project_id=args.project,
                            agent_name=f"{args.scenario}-agent", guard=self.guard)
        self.run_id = f"{args.scenario}-{uuid.uuid4()}"
        self.tool_calls = 0
        self.raised = 0
        self.stop = None
        self.last_step = 0
        self.async_stop = None

    def _on_stop(self, stop):
        self.on_stop_calls += 1

    def tool(self, name, args, output, success=True):
        """One tool call: check the guard first, as every hook of the package does."""
        self.guard.check(self.run_id)
        self.tool_calls += 1
        self.last_step = self.eddy.step(self.run_id, tool_name=name, tool_input=args,
                                        tool_output=output, tool_success=success,
                                        tool_latency_ms=3)
        say(event="step", i=self.last_step)
        time.sleep(self.args.interval_ms / 1000)

    def looping(self):
        for _ in range(self.args.max_steps):
            self.tool("web_search", {"q": "eddy release date", "request_id": str(uuid.uuid4())},
                      {"results": [], "note": "no results"})

    def healthy(self):
        job = "job-42"
        self.tool("submit_job", {"spec": "train"}, {"job_id": job, "status": "queued"})
        for i in range(12):  # polling: the same call, the job progresses
            status = "in_progress" if i < 11 else "done"
            self.tool("get_job_status", {"job_id": job}, {"status": status, "progress": i * 9})
        for attempt in range(3):  # a flaky API that recovers on the third try
            ok = attempt == 2
            self.tool("fetch_report", {"job_id": job},
                      {"rows": 120} if ok else {"error": "503 service unavailable, retry"}, ok)
        for i in range(10):  # distinct work
            self.tool("summarise", {"section": i}, {"summary": f"section {i}: {i * 7} findings"})

    def langchain_loop(self):
        import itertools

        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage, HumanMessage
        from langchain_core.runnables import RunnableLambda
        from langchain_core.tools import tool

        from eddy_agent.langchain import EddyCallbackHandler

        agent = self

        @tool
        def web_search(q: str) -> str:
            """Search the web."""
            agent.tool_calls += 1
            time.sleep(agent.args.interval_ms / 1000)
            return '{"results": [], "note": "no results"}'

        model = GenericFakeChatModel(messages=(
            AIMessage(content="", tool_calls=[{"name": "web_search", "args": {"q": "eddy release date"},
                                               "id": f"call_{i}"}])
            for i in itertools.count()))

        def react(inputs, config):
            messages = [HumanMessage(inputs["question"])]
            for _ in range(agent.args.max_steps):
                ai = model.invoke(messages, config=config)
                messages.append(ai)
                for call in ai.tool_calls:
                    messages.append(web_search.invoke(call, config=config))
                    say(event="step", i=agent.tool_calls)
            return "gave up"

        handler = EddyCallbackHandler(self.eddy, self.guard, run_id=self.run_id,
                                      agent_name="langchain-loop")
        try:
            RunnableLambda(react).invoke({"question": "when is eddy released?"},
                                         config={"callbacks": [handler]})
        finally:
            self.last_step = self.tool_calls
            handler.finish(handler.stopped)

    def go(self):
        if not self.guard.wait_ready(30):
            sys.exit("the guard could not assign the signals topic within 30 s")
        if self.args.scenario == "restart":
            # The test restarts the broker while the guard is already consuming, then says go.
            say(event="waiting")
            for line in sys.stdin:
                if line.strip() == "go":
                    break
        self.eddy.run_started(self.run_id, input="when is eddy released?")
        say(event="ready", run_id=self.run_id)
        waiter = threading.Thread(target=self._await_async, daemon=True)
        waiter.start()
        try:
            if self.args.framework == "langchain":
                self.langchain_loop()
            elif self.args.scenario == "healthy":
                self.healthy()
            else:
                self.looping()
        except LoopDetected as stop:
            self.raised += 1
            self.stop = stop
        if self.args.framework != "langchain":
            self.eddy.run_finished(self.run_id, status="failed" if self.stop else "completed")
        if self.eddy.flush(30):
            sys.exit(f"steps not delivered: {self.eddy.errors}")
        if self.stop:
            say(event="stopped", run_id=self.run_id, detector=self.stop.detector,
                severity=self.stop.severity, event_id=self.stop.event_id)
        if self.args.scenario == "healthy":
            self._wait(lambda: self.guard.terminated(self.run_id) is not None, 60,
                       "eddy's run_terminated for the healthy run")
        if self.args.scenario == "crash":
            # The test kills and restarts the worker, then says how many copies to expect.
            for line in sys.stdin:
                if line.startswith("report"):
                    want = int(line.split()[1])
                    self._wait(lambda: self.guard.stats()["duplicates"] >= want, 60,
                               f"{want} duplicate signals")
                    break
        waiter.join(5)
        self.report()

    def _await_async(self):
        async def main():
            return await self.guard.wait_for_stop(self.run_id, timeout=600)

        try:
            self.async_stop = asyncio.run(main()).event_id
        except Exception:
            pass

    def _wait(self, cond, secs, what):
        deadline = time.monotonic() + secs
        while not cond():
            if time.monotonic() > deadline:
                sys.exit(f"timed out after {secs}s waiting for {what}: {self.guard.stats()}")
            time.sleep(0.05)

    def report(self):
        sig = self.stop.signal if self.stop else None
        say(event="report", run_id=self.run_id, stopped=self.stop is not None,
            raised=self.raised, on_stop_calls=self.on_stop_calls, tool_calls=self.tool_calls,
            last_step=self.last_step, async_stop=self.async_stop,
            stop_step_index=sig["step_index"] if sig else None,
            detector=sig["detector"] if sig else None,
            severity=sig["severity"] if sig else None,
            event_id=sig["event_id"] if sig else None,
            signals=[s["event_id"] for s in self.guard.signals(self.run_id)],
            verdict=(self.guard.verdict(self.run_id) or {}).get("severity"),
            stats=self.guard.stats())
        self.guard.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--steps-topic", required=True)
    ap.add_argument("--signals-topic", required=True)
    ap.add_argument("--project", default="agents")
    ap.add_argument("--scenario", choices=["loop", "healthy", "crash", "restart"], required=True)
    ap.add_argument("--framework", choices=["plain", "langchain"], default="plain")
    ap.add_argument("--interval-ms", type=int, default=50)
    ap.add_argument("--max-steps", type=int, default=600)
    Agent(ap.parse_args()).go()


if __name__ == "__main__":
    main()
