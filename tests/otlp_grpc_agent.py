#!/usr/bin/env python3
"""Agents traced with OpenTelemetry, exporting over OTLP/gRPC to `eddy ingest-otlp`.

Driven by tests/ingest_otlp.rs. Only the exporter's endpoint and key point at eddy:

    OTLP_GRPC_ENDPOINT=http://127.0.0.1:PORT EDDY_KEY=kw_... python3 tests/otlp_grpc_agent.py MODE

MODE is one of (each in its own process: the two LangChain instrumentors must not meet):
- `genai`: two agents traced by hand under the GenAI semantic conventions, exported by the
  SDK's gRPC exporter with gzip: one repeats the same search, one does not. Also an export
  with a wrong key and a message that is not protobuf, with the answers recorded;
- `openllmetry`: two LangGraph agents (`create_react_agent`, LangChain's fake chat model, real
  `@tool` tools) traced by OpenLLMetry's LangChain instrumentation
  (`opentelemetry-instrumentation-langchain`): one loops, one does not;
- `openinference`: the same two agents traced by OpenInference's LangChain instrumentor, the
  looping one with LangGraph's default graph name, the healthy one compiled with a name.

Prints one JSON report: the run ids (trace ids) by name, and what the checks answered.
"""
import importlib.metadata
import json
import os
import sys

import grpc
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

ENDPOINT = os.environ["OTLP_GRPC_ENDPOINT"]
KEY = os.environ["EDDY_KEY"]
MODE = sys.argv[1]


def exporter(key=KEY, compression=None):
    return OTLPSpanExporter(
        endpoint=ENDPOINT,
        insecure=True,
        headers={"authorization": f"Bearer {key}"},
        compression=compression,
    )


resource = Resource.create({"service.name": f"otlp-grpc-{MODE}"})
provider = TracerProvider(resource=resource)
kept = InMemorySpanExporter()
provider.add_span_processor(SimpleSpanProcessor(kept))
provider.add_span_processor(
    BatchSpanProcessor(
        exporter(compression=grpc.Compression.Gzip if MODE == "genai" else None),
        max_export_batch_size=4,
        schedule_delay_millis=50,
    )
)
tracer = provider.get_tracer("otlp-grpc-agent-test")
report = {
    "versions": {
        p: importlib.metadata.version(p)
        for p in ("opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-grpc", "grpcio")
    }
}


def trace_of(span_name):
    provider.force_flush()
    ids = {s.context.trace_id for s in kept.get_finished_spans() if s.name == span_name}
    assert len(ids) == 1, f"one trace for {span_name}: {ids}"
    kept.clear()
    return format(ids.pop(), "032x")


# --- GenAI semantic conventions, by hand -----------------------------------------------------
def genai_agent(name, queries):
    with tracer.start_as_current_span(f"invoke_agent {name}") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        root.set_attribute("gen_ai.agent.name", name)
        for q in queries:
            with tracer.start_as_current_span("chat fake-model") as llm:
                llm.set_attribute("gen_ai.operation.name", "chat")
                llm.set_attribute("gen_ai.output.messages", f"I will search for {q}")
            with tracer.start_as_current_span("execute_tool web_search") as tool:
                tool.set_attribute("gen_ai.operation.name", "execute_tool")
                tool.set_attribute("gen_ai.tool.name", "web_search")
                tool.set_attribute("gen_ai.tool.call.arguments", json.dumps({"q": q}))
                tool.set_attribute("gen_ai.tool.call.result", json.dumps({"results": [q]}))
                tool.set_status(Status(StatusCode.OK))
    return trace_of(f"invoke_agent {name}")


def rpc_error(call):
    try:
        call()
        return ["OK", ""]
    except grpc.RpcError as e:
        return [e.code().name, e.details()]


if MODE == "genai":
    report["genai_looping"] = genai_agent("researcher", ["eddy loop detection"] * 8)
    report["genai_healthy"] = genai_agent(
        "planner", ["flights to Lisbon", "hotels in Alfama", "weather in Lisbon in May"]
    )
    # A wrong key: the exporter gives up on the batch (UNAUTHENTICATED is not retried). The
    # span comes from a provider of its own, so only the wrong key ever sends it.
    aside = TracerProvider(resource=resource)
    aside_kept = InMemorySpanExporter()
    aside.add_span_processor(SimpleSpanProcessor(aside_kept))
    with aside.get_tracer("intruder").start_as_current_span("invoke_agent intruder") as s:
        s.set_attribute("gen_ai.operation.name", "invoke_agent")
    intruder = aside_kept.get_finished_spans()
    report["wrong_key_result"] = exporter(key="kw_WRONG").export(intruder).name
    # Not a protobuf message: the raw call's answer.
    channel = grpc.insecure_channel(ENDPOINT.removeprefix("http://"))
    export = channel.unary_unary(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        request_serializer=None,
        response_deserializer=None,
    )
    report["malformed"] = rpc_error(
        lambda: export(b"\x0a\xff\xff not protobuf", metadata=[("authorization", f"Bearer {KEY}")])
    )
    report["no_key"] = rpc_error(lambda: export(b""))
    channel.close()
else:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    if MODE == "openllmetry":
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=provider)
        report["versions"]["opentelemetry-instrumentation-langchain"] = importlib.metadata.version(
            "opentelemetry-instrumentation-langchain"
        )
    else:
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
        report["versions"]["openinference-instrumentation-langchain"] = importlib.metadata.version(
            "openinference-instrumentation-langchain"
        )
    report["versions"]["langgraph"] = importlib.metadata.version("langgraph")

    class ToolCallingFake(GenericFakeChatModel):
        """LangChain's fake chat model, answering with the scripted tool calls."""

        def bind_tools(self, tools, **kwargs):
            return self

    @tool
    def lookup_order(order_id: str) -> str:
        """Look an order up in the shop's database."""
        return json.dumps({"order_id": order_id, "status": "pending"})

    @tool
    def word_count(text: str) -> int:
        """Count the words of a text."""
        return len(text.split())

    def langgraph_agent(plan, name=None):
        """create_react_agent over the fake model: one scripted tool call per model turn."""
        script = [
            AIMessage(
                content=f"Calling {t.name}.",
                tool_calls=[{"name": t.name, "args": args, "id": f"call_{i}"}],
            )
            for i, (t, args) in enumerate(plan)
        ] + [AIMessage(content="Done.")]
        graph = create_react_agent(
            ToolCallingFake(messages=iter(script)),
            [lookup_order, word_count],
            name=name,
        )
        graph.invoke({"messages": [("user", "Where is order 42?")]})
        # The graph's own span: named after it (OpenLLMetry adds its kind).
        root = name or "LangGraph"
        return trace_of(root if MODE == "openinference" else f"{root}.workflow")

    report["looping"] = langgraph_agent([(lookup_order, {"order_id": "42"})] * 8)
    report["healthy"] = langgraph_agent(
        [
            (lookup_order, {"order_id": "42"}),
            (word_count, {"text": "order 42 is pending"}),
            (lookup_order, {"order_id": "43"}),
        ],
        name="order_helper",
    )

provider.shutdown()
print(json.dumps(report))
