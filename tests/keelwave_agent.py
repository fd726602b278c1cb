#!/usr/bin/env python3
"""Agents instrumented with the real `keelwave` SDK (PyPI, 0.1.1), pointed at `eddy ingest-http`.

Driven by tests/ingest_keelwave.rs. Only the endpoint differs from a keelwave deployment:

    KEELWAVE_ENDPOINT=http://127.0.0.1:PORT KEELWAVE_API_KEY=kw_... python3 tests/keelwave_agent.py

- a looping agent: `@client.agent` + `@client.observe`, the same web_search call 5 times (the
  SDK's own looping example); the SDK marks the loop itself and reports it on finish;
- a healthy agent on the async client: think, distinct searches with distinct results, answer;
- keelwave's error contract: bad requests must raise the SDK's exceptions (400, 401, 404).

With KEELWAVE_AGENT_MODE=verdict (a running `eddy run` on the same topics), the agents ask eddy
between steps instead (`GET /v1/ingest/agent/runs/{id}/verdict`, see `eddy_verdict`):
- a looping agent repeats one search until eddy's verdict says stop, and stops before its next call;
- a healthy agent (distinct searches, one failed call retried) checks before every call;
- a key of another project (KEELWAVE_OTHER_API_KEY) reads neither route for the looping run: 404.
While it loops, a thread follows the looping run's server-sent events (`.../signals`).

Prints one JSON object on stdout: the runs it made and what each bad request raised.
"""
import asyncio
import importlib.metadata
import json
import os
import sys
import threading
import time
import uuid
import warnings

import httpx
import keelwave
from keelwave import (
    AsyncKeelwave,
    Keelwave,
    KeelwaveBufferFull,
    KeelwaveError,
    get_current_run,
)
from keelwave._client import raise_for_status

ENDPOINT = os.environ["KEELWAVE_ENDPOINT"]
API_KEY = os.environ["KEELWAVE_API_KEY"]

# The decorators turn emit failures into warnings; here they must fail the run.
warnings.filterwarnings("error", message="keelwave")

client = Keelwave(API_KEY, endpoint=ENDPOINT)
report = {"sdk_version": importlib.metadata.version("keelwave")}


def search(q, max_results):
    # A search backend that keeps answering the same thing: the agent learns nothing new.
    return [{"title": f"{q} overview", "rank": i} for i in range(max_results)]


@client.observe(name="web_search", step_type="tool_call")
def web_search(q: str, max_results: int = 3) -> dict:
    return {"results": search(q, max_results=max_results)}


@client.agent(name="looping-agent")
def run_loop(question: str) -> str:
    run = get_current_run()
    report["looping"] = {"run_id": run.id, "timestamp": run.timestamp}
    for _ in range(5):
        # The SDK's own example: the second identical call marks the run as a loop.
        web_search(q=question, max_results=3)
    report["looping"]["sdk_loop_detected"] = run._loop_detected
    report["looping"]["sdk_loop_step_index"] = run._loop_step_index
    report["looping"]["steps"] = run._step_index
    return "gave up"


async def healthy_agent():
    async with AsyncKeelwave(API_KEY, endpoint=ENDPOINT) as aclient:
        async with aclient.run("healthy-agent", input="compare keelwave and eddy", metadata={"team": "research"}) as run:
            await run.step("think", content="search each project, then compare", tokens=120, cost_usd=0.0004)
            for i, q in enumerate(["keelwave sdk", "eddy kafka worker", "loop detection café"]):
                await run.tool_call(
                    "web_search",
                    input={"q": q, "max_results": 3},
                    output={"results": [{"title": f"{q} result {j}"} for j in range(i + 1)]},
                    latency_ms=40 + i,
                    tokens=200,
                )
                run.check_fingerprint("web_search", {"q": q, "max_results": 3})
            await run.step("think", content="the two differ in where detection runs", tokens=90)
            run.set_output("keelwave detects in the SDK, eddy in a fleet-wide worker")
            report["healthy"] = {
                "run_id": run.id,
                "timestamp": run.timestamp,
                "sdk_loop_detected": run._loop_detected,
                "steps": run._step_index,
                "tokens": run._total_tokens,
            }


def expect(name, fn):
    """Record which SDK exception a bad request raised (None if it was accepted)."""
    try:
        fn()
    except KeelwaveError as e:
        report["errors"][name] = [type(e).__name__, str(e)]
        return
    report["errors"][name] = None


def raw_post(path, body, headers=None):
    """A request the SDK would never send, through the SDK's own HTTP client and error mapping."""
    resp = client._client.post(path, content=body, headers=headers or {})
    report["status"][path + " " + body[:40].decode(errors="replace")] = resp.status_code
    raise_for_status(resp)
    return resp


def error_cases():
    report["errors"] = {}
    report["status"] = {}
    some_run = str(uuid.uuid4())
    expect("bad_key", lambda: Keelwave("kw_NOTAKEYTHISBRIDGEKNOWS", endpoint=ENDPOINT).ingest_agent_run_start(agent_name="x"))
    expect("key_without_kw_prefix", lambda: Keelwave("sk-123", endpoint=ENDPOINT).ingest_agent_run_start(agent_name="x"))
    expect("unknown_field", lambda: raw_post("/v1/ingest/agent/steps",
                            json.dumps({"agent_run_id": some_run, "step_index": 1, "step_type": "tool_call",
                                        "tool_name": "t", "output": {"python": "name"}}).encode(),
                            {"Content-Type": "application/json"}))
    expect("bad_step_type", lambda: client.ingest_agent_step(agent_run_id=some_run, step_index=1, step_type="span"))
    expect("negative_tokens", lambda: client.ingest_agent_step(agent_run_id=some_run, step_index=1, step_type="think", tokens=-1))
    expect("missing_agent_name", lambda: client.ingest_agent_run_start(agent_name=""))
    expect("body_over_1mib", lambda: client.ingest_agent_run_start(agent_name="big", input="x" * (1 << 20)))
    expect("bad_status", lambda: client.ingest_agent_run_finish(report["looping"]["run_id"], timestamp=report["looping"]["timestamp"], status="done"))
    expect("finish_wrong_timestamp", lambda: client.ingest_agent_run_finish(report["looping"]["run_id"], timestamp="2020-01-01T00:00:00Z", status="completed"))
    # keelwave's other key spellings are accepted: X-API-Key and Authorization without Bearer.
    for name, headers in (("x_api_key", {"X-API-Key": API_KEY}), ("authorization_no_bearer", {"Authorization": API_KEY})):
        r = httpx.post(ENDPOINT + "/v1/ingest/agent/steps", headers=headers,
                       json={"agent_run_id": some_run, "step_index": 2, "step_type": "bogus"})
        report["status"][name] = r.status_code  # 400: authenticated, then validated


def eddy_verdict(kw, run_id, min_severity="stop"):
    """eddy's verdict for a run, asked with the SDK client's own key: None, or the strongest
    signal at `min_severity` or above.

    503 (eddy-ingest still reading its signals back after a start) raises KeelwaveBufferFull
    with retry_after, like a full ingest buffer: the caller retries.
    """
    resp = httpx.get(f"{kw.endpoint}/v1/ingest/agent/runs/{run_id}/verdict",
                     params={"min_severity": min_severity},
                     headers={"Authorization": f"Bearer {kw.api_key}"}, timeout=5.0)
    raise_for_status(resp)
    return resp.json()["data"]["verdict"]


def verdict_between_steps(run_id):
    while True:
        try:
            return eddy_verdict(client, run_id)
        except KeelwaveBufferFull as e:
            time.sleep(e.retry_after or 1)


# A looping agent that never stops by itself; eddy's stop verdict must end it.
MAX_CALLS = int(os.environ.get("KEELWAVE_MAX_CALLS", "200"))
# The tool's latency: the agent's pace between steps.
TOOL_SECONDS = 0.05


def follow_signals(run_id, into):
    """Server-sent events of one run, until eddy says the run ended."""
    with httpx.stream("GET", f"{ENDPOINT}/v1/ingest/agent/runs/{run_id}/signals",
                      headers={"Authorization": f"Bearer {API_KEY}"}, timeout=httpx.Timeout(5.0, read=120.0)) as resp:
        into["status"] = resp.status_code
        event = None
        for line in resp.iter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and event:
                data = json.loads(line.split(":", 1)[1])
                into["events"].append([event, data.get("event_id"), data.get("severity")])
                if event == "run_terminated":
                    return


@client.agent(name="looping-agent")
def loop_until_stopped(question: str) -> str:
    run = get_current_run()
    mine = report["looping"] = {"run_id": run.id, "calls": 0, "stream": {"events": []}}
    stream = threading.Thread(target=follow_signals, args=(run.id, mine["stream"]), daemon=True)
    stream.start()
    report["threads"].append(stream)
    for _ in range(MAX_CALLS):
        verdict = verdict_between_steps(run.id)
        if verdict is not None:
            mine["verdict"] = verdict
            run.set_termination_reason("loop_detected")
            run.mark_loop(verdict["first_step_index"])
            return "stopped by eddy"
        web_search(q=question, max_results=3)
        mine["calls"] += 1
        time.sleep(TOOL_SECONDS)
    return "never stopped"


def flaky_search(q, attempt):
    if attempt == 0 and "retry" in q:
        raise TimeoutError("upstream timed out")
    return {"results": [{"title": f"{q} result {i}"} for i in range(2)]}


def healthy_with_checks():
    seen = []
    with client.run("healthy-agent", input="survey stream processors") as run:
        report["healthy"] = {"run_id": run.id, "verdicts": seen}
        for q in ["kafka streams", "flink", "eddy loop detection", "retry once: spark", "materialize",
                  "redpanda", "benthos", "arroyo"]:
            for attempt in range(2):
                seen.append(verdict_between_steps(run.id))
                try:
                    out = flaky_search(q, attempt)
                except TimeoutError as e:
                    run.tool_call("web_search", input={"q": q}, output={"error": str(e)}, ok=False, latency_ms=50)
                    continue
                run.tool_call("web_search", input={"q": q}, output=out, latency_ms=40)
                break
            time.sleep(TOOL_SECONDS)
        report["healthy"]["steps"] = run._step_index


def other_project_reads():
    """Key A (the agents' project) asking for a run of project B, and B itself."""
    other = Keelwave(os.environ["KEELWAVE_OTHER_API_KEY"], endpoint=ENDPOINT)
    theirs = other.ingest_agent_run_start(agent_name="other-project-agent")["id"]
    out = report["cross_project"] = {"run_id": theirs}
    for route in ("verdict", "signals"):
        r = httpx.get(f"{ENDPOINT}/v1/ingest/agent/runs/{theirs}/{route}",
                      headers={"Authorization": f"Bearer {API_KEY}"}, timeout=5.0)
        out[route] = [r.status_code, r.json()]
    try:
        eddy_verdict(client, theirs)
        out["sdk_error"] = None
    except KeelwaveError as e:
        out["sdk_error"] = [type(e).__name__, str(e)]
    out["owner_verdict"] = eddy_verdict(other, theirs)
    # ... and B for A's looping run.
    out["reverse_status"] = httpx.get(
        f"{ENDPOINT}/v1/ingest/agent/runs/{report['looping']['run_id']}/verdict",
        headers={"Authorization": f"Bearer {other.api_key}"}, timeout=5.0).status_code


def verdict_main():
    report["threads"] = []
    t0 = time.monotonic()
    loop_until_stopped("what is keelwave")
    report["looping"]["seconds"] = round(time.monotonic() - t0, 3)
    healthy_with_checks()
    other_project_reads()
    for t in report.pop("threads"):
        t.join(timeout=60)
    json.dump(report, sys.stdout)
    print()


def main():
    if os.environ.get("KEELWAVE_AGENT_MODE") == "verdict":
        return verdict_main()
    report["health"] = client.health()
    run_loop("what is keelwave")
    asyncio.run(healthy_agent())
    error_cases()
    json.dump(report, sys.stdout)
    print()


if __name__ == "__main__":
    main()
