#!/usr/bin/env python3
"""Agents traced with OpenTelemetry, exporting over OTLP/HTTP to `eddy ingest-otlp`.

Driven by tests/ingest_otlp.rs. Only the exporter's endpoint points at eddy:

    OTLP_ENDPOINT=http://127.0.0.1:PORT/v1/traces EDDY_PROJECT=p python3 tests/otlp_agent.py SPANS_FILE

- two agents traced by hand with the OpenTelemetry SDK under the GenAI semantic conventions
  (`invoke_agent`, `chat`, `execute_tool` spans): one repeats the same search, one does not
  (and exports its steps a second time while it still runs, as an exporter retry would);
- two LangChain agents traced by OpenInference's instrumentor (`openinference-instrumentation-
  langchain`), with LangChain's fake chat model and real `@tool` tools: one loops, one does not.

Spans go out through the SDK's BatchSpanProcessor in small gzip batches (several per run,
children before their root). Every span is also kept, and written to SPANS_FILE as one OTLP
protobuf export request, so the test can export the very same spans a second time
(`python3 tests/otlp_agent.py --replay SPANS_FILE`).

Also sends a malformed body and records the receiver's answer. Prints one JSON report.
"""
import importlib.metadata
import json
import os
import sys
import urllib.error
import urllib.request

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

ENDPOINT = os.environ["OTLP_ENDPOINT"]


def post(body, content_type):
    req = urllib.request.Request(
        ENDPOINT, data=body, method="POST", headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


if len(sys.argv) == 3 and sys.argv[1] == "--replay":
    with open(sys.argv[2], "rb") as f:
        status, _ = post(f.read(), "application/x-protobuf")
    print(json.dumps({"replay_status": status}))
    sys.exit(0 if status == 200 else 1)

SPANS_FILE = sys.argv[1]
resource = Resource.create(
    {"service.name": "otlp-agent-test", "eddy.project.id": os.environ["EDDY_PROJECT"]}
)
provider = TracerProvider(resource=resource)
kept = InMemorySpanExporter()
provider.add_span_processor(SimpleSpanProcessor(kept))
provider.add_span_processor(
    BatchSpanProcessor(
        OTLPSpanExporter(endpoint=ENDPOINT, compression=Compression.Gzip),
        max_export_batch_size=4,
        schedule_delay_millis=50,
    )
)
tracer = provider.get_tracer("otlp-agent-test")
report = {
    "versions": {
        p: importlib.metadata.version(p)
        for p in (
            "opentelemetry-sdk",
            "opentelemetry-exporter-otlp-proto-http",
            "openinference-instrumentation-langchain",
            "langchain-core",
        )
    }
}


def trace_id(span):
    return format(span.get_span_context().trace_id, "032x")


# --- GenAI semantic conventions, by hand ---------------------------------------------------
def search_backend(q):
    # Answers the same thing to the same question: an agent repeating it learns nothing.
    return json.dumps({"results": [f"{q} overview"]})


def genai_agent(name, queries, retry_export=False):
    with tracer.start_as_current_span(f"invoke_agent {name}") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        root.set_attribute("gen_ai.agent.name", name)
        for q in queries:
            with tracer.start_as_current_span("chat fake-model") as llm:
                llm.set_attribute("gen_ai.operation.name", "chat")
                llm.set_attribute("gen_ai.usage.input_tokens", 120)
                llm.set_attribute("gen_ai.usage.output_tokens", 12)
                llm.set_attribute("gen_ai.output.messages", f"I will search for {q}")
            with tracer.start_as_current_span("execute_tool web_search") as tool:
                tool.set_attribute("gen_ai.operation.name", "execute_tool")
                tool.set_attribute("gen_ai.tool.name", "web_search")
                tool.set_attribute("gen_ai.tool.call.arguments", json.dumps({"q": q}))
                tool.set_attribute("gen_ai.tool.call.result", search_backend(q))
                tool.set_status(Status(StatusCode.OK))
        if retry_export:
            # An exporter retry while the run is still open: every step so far arrives twice.
            provider.force_flush()
            tid = root.get_span_context().trace_id
            children = [s for s in kept.get_finished_spans() if s.context.trace_id == tid]
            again = OTLPSpanExporter(endpoint=ENDPOINT, compression=Compression.Gzip)
            report[f"{name}_reexported"] = len(children)
            report[f"{name}_reexport_result"] = again.export(children).name
        return trace_id(root)


report["genai_looping"] = genai_agent("researcher", ["eddy loop detection"] * 8)
report["genai_healthy"] = genai_agent(
    "planner",
    ["flights to Lisbon", "hotels in Alfama", "weather in Lisbon in May"],
    retry_export=True,
)

# --- LangChain, traced by OpenInference ----------------------------------------------------
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from openinference.instrumentation.langchain import LangChainInstrumentor  # noqa: E402

LangChainInstrumentor().instrument(tracer_provider=provider)


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up in the shop's database."""
    return json.dumps({"order_id": order_id, "status": "pending"})


@tool
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


def langchain_agent(run_name, plan):
    """A tool-calling loop: the fake model decides, the real tool runs, `plan` times."""
    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    content=f"Calling {t.name}.",
                    tool_calls=[{"name": t.name, "args": args, "id": f"call_{i}"}],
                )
                for i, (t, args) in enumerate(plan)
            ]
        )
    )
    tools = {t.name: t for t, _ in plan}

    def loop(question, config):
        msgs = [HumanMessage(question)]
        for _ in plan:
            ai = model.invoke(msgs, config=config)
            msgs.append(ai)
            for call in ai.tool_calls:
                result = tools[call["name"]].invoke(call["args"], config=config)
                msgs.append(ToolMessage(str(result), tool_call_id=call["id"]))
        return str(msgs[-1])

    # OpenInference names a chain whose name holds "agent" an AGENT span.
    RunnableLambda(loop).with_config(run_name=run_name).invoke("Where is order 42?")
    provider.force_flush()
    (root,) = [s for s in kept.get_finished_spans() if s.name == run_name]
    return format(root.context.trace_id, "032x")


report["langchain_looping"] = langchain_agent(
    "looping_agent", [(lookup_order, {"order_id": "42"})] * 8
)
report["langchain_healthy"] = langchain_agent(
    "healthy_agent",
    [
        (lookup_order, {"order_id": "42"}),
        (word_count, {"text": "order 42 is pending"}),
        (lookup_order, {"order_id": "43"}),
    ],
)

provider.force_flush()
spans = kept.get_finished_spans()
report["spans"] = len(spans)
# Reversed: the second export also arrives in another order than the first.
with open(SPANS_FILE, "wb") as f:
    f.write(encode_spans(list(reversed(spans))).SerializeToString())

report["malformed"] = post(b"\x0a\xff\xff not protobuf", "application/x-protobuf")
report["malformed_json"] = post(b'{"resourceSpans": 7}', "application/json")
provider.shutdown()
print(json.dumps(report))
