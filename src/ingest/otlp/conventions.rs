//! What a span is, and where each field eddy needs lives, under each tracing convention an agent
//! may be instrumented with. Pure lookups; `mapping.rs` builds the events.
//!
//! The names are the instrumentations' own, as their released sources write them:
//! - GenAI semantic conventions: `gen_ai.operation.name` (`invoke_agent`, `execute_tool`,
//!   `chat`, ...), `gen_ai.agent.name`, `gen_ai.tool.*`, `gen_ai.usage.*`;
//! - OpenInference (`openinference-instrumentation-langchain`, `_tracer.py`):
//!   `openinference.span.kind` (`AGENT` for a run whose name holds "agent", else the LangChain
//!   run type: `CHAIN`, `TOOL`, `LLM`), `input.value`/`output.value`, `tool.name`, `llm.*`, and
//!   the run's LangChain metadata as the JSON text `metadata` (LangGraph adds
//!   `langgraph_node`, `langgraph_step`, ... to every node's runs; a graph's own run is named
//!   after the graph, `LangGraph` unless compiled with a name);
//! - OpenLLMetry (traceloop-sdk's decorators, `decorators/base.py`, and
//!   `opentelemetry-instrumentation-langchain`, `callback_handler.py`): `traceloop.span.kind`
//!   (`workflow`, `task`, `agent`, `tool`), `traceloop.entity.name`/`.input`/`.output`, and for
//!   older model spans `llm.request.type` with `gen_ai.usage.prompt_tokens`/`completion_tokens`;
//! - the Vercel AI SDK (`ai` on npm, `generate-text/generate-text.ts`, `stream-text.ts`,
//!   `execute-tool-call.ts`): spans named by `ai.operationId` — `ai.generateText` /
//!   `ai.streamText` around a whole tool loop, `ai.generateText.doGenerate` /
//!   `ai.streamText.doStream` per model call, `ai.toolCall` per tool execution with
//!   `ai.toolCall.name`/`.args`/`.result`; `ai.telemetry.functionId` names the call site.
use super::attrs;
use opentelemetry_proto::tonic::trace::v1::Span;

/// What a span is to eddy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpanKind {
    /// An agent invocation: names the run.
    Agent,
    /// A tool execution: a `tool_call` step.
    Tool,
    /// A model call: a `think` step.
    Model,
    /// Anything else (chains, graph nodes, retrievers, HTTP): no step.
    Other,
}

const GEN_AI_OPERATION: &str = "gen_ai.operation.name";
const OPENINFERENCE_KIND: &str = "openinference.span.kind";
const TRACELOOP_KIND: &str = "traceloop.span.kind";
const VERCEL_OPERATION: &str = "ai.operationId";
/// The name LangGraph gives a compiled graph that was not given one.
const LANGGRAPH_DEFAULT_NAME: &str = "LangGraph";

pub(crate) fn classify(span: &Span) -> SpanKind {
    let a = &span.attributes;
    if let Some(op) = attrs::text(a, GEN_AI_OPERATION) {
        match op.as_str() {
            "invoke_agent" | "create_agent" => return SpanKind::Agent,
            "execute_tool" => return SpanKind::Tool,
            "chat" | "text_completion" | "generate_content" => return SpanKind::Model,
            // OpenLLMetry's `execute_task` and the like: the other conventions may know better.
            _ => {}
        }
    }
    if let Some(kind) = attrs::text(a, OPENINFERENCE_KIND) {
        return openinference(span, &kind.to_ascii_uppercase());
    }
    if let Some(kind) = attrs::text(a, TRACELOOP_KIND) {
        return match kind.as_str() {
            "workflow" | "agent" => SpanKind::Agent,
            "tool" => SpanKind::Tool,
            _ => SpanKind::Other,
        };
    }
    if let Some("chat" | "completion") = attrs::text(a, "llm.request.type").as_deref() {
        return SpanKind::Model;
    }
    vercel(span)
}

fn openinference(span: &Span, kind: &str) -> SpanKind {
    match kind {
        // A LangGraph node whose name holds "agent" (create_react_agent's model node is
        // "agent") is one step of the graph, not an agent: the graph is.
        "AGENT" if langgraph_node(span).as_deref() == Some(span.name.as_str()) => SpanKind::Other,
        "AGENT" => SpanKind::Agent,
        "TOOL" => SpanKind::Tool,
        "LLM" => SpanKind::Model,
        // A chain that is the trace's root is what the agent framework was invoked as (a
        // LangGraph graph, an AgentExecutor); so is a default-named graph inside a request
        // span. Its nodes carry `langgraph_node`, the graph's own run does not.
        "CHAIN"
            if span.parent_span_id.is_empty()
                || (span.name == LANGGRAPH_DEFAULT_NAME && langgraph_node(span).is_none()) =>
        {
            SpanKind::Agent
        }
        _ => SpanKind::Other,
    }
}

fn vercel(span: &Span) -> SpanKind {
    let op = attrs::text(&span.attributes, VERCEL_OPERATION)
        .or_else(|| span.name.starts_with("ai.").then(|| span.name.clone()));
    match op.as_deref() {
        Some("ai.generateText" | "ai.streamText") => SpanKind::Agent,
        Some("ai.generateText.doGenerate" | "ai.streamText.doStream") => SpanKind::Model,
        Some("ai.toolCall") => SpanKind::Tool,
        _ => SpanKind::Other,
    }
}

/// OpenInference's `metadata` attribute (the LangChain run's metadata as JSON text), parsed.
fn metadata(span: &Span) -> Option<serde_json::Map<String, serde_json::Value>> {
    let text = attrs::text(&span.attributes, "metadata")?;
    match serde_json::from_str(&text) {
        Ok(serde_json::Value::Object(m)) => Some(m),
        _ => None,
    }
}

fn metadata_text(span: &Span, key: &str) -> Option<String> {
    metadata(span)?
        .get(key)
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The LangGraph node a span ran in, if any.
fn langgraph_node(span: &Span) -> Option<String> {
    metadata_text(span, "langgraph_node")
}

/// The agent's name, as the conventions spell it: `gen_ai.agent.name`, OpenInference's
/// `agent.name`, the `lc_agent_name` LangChain's agents put in their runs' metadata,
/// OpenLLMetry's entity name, the Vercel AI SDK's function id; else (on an agent span) the
/// span's own name, which for a LangGraph graph is the graph's name.
pub(crate) fn agent_name(span: &Span, kind: SpanKind) -> Option<String> {
    let a = &span.attributes;
    attrs::text(a, "gen_ai.agent.name")
        .or_else(|| attrs::text(a, "agent.name"))
        .or_else(|| {
            attrs::text(a, OPENINFERENCE_KIND).and_then(|_| metadata_text(span, "lc_agent_name"))
        })
        .or_else(|| {
            attrs::text(a, TRACELOOP_KIND).and_then(|_| attrs::text(a, "traceloop.entity.name"))
        })
        .or_else(|| attrs::text(a, "ai.telemetry.functionId"))
        .or_else(|| (kind == SpanKind::Agent && !span.name.is_empty()).then(|| span.name.clone()))
}

/// Where each field is looked for, in order (the first present wins).
pub(crate) const TOOL_NAME: &[&str] = &[
    "gen_ai.tool.name",
    "tool.name",
    "ai.toolCall.name",
    "traceloop.entity.name",
];
pub(crate) const TOOL_INPUT: &[&str] = &[
    "gen_ai.tool.call.arguments",
    "input.value",
    "ai.toolCall.args",
    "traceloop.entity.input",
];
pub(crate) const TOOL_OUTPUT: &[&str] = &[
    "gen_ai.tool.call.result",
    "output.value",
    "ai.toolCall.result",
    "traceloop.entity.output",
];
pub(crate) const MODEL_OUTPUT: &[&str] = &[
    "llm.output_messages.0.message.content",
    "gen_ai.output.messages",
    "gen_ai.completion.0.content",
    "ai.response.text",
    "output.value",
];
pub(crate) const RUN_INPUT: &[&str] = &[
    "gen_ai.input.messages",
    "input.value",
    "traceloop.entity.input",
    "ai.prompt",
];
pub(crate) const RUN_OUTPUT: &[&str] = &[
    "gen_ai.output.messages",
    "output.value",
    "traceloop.entity.output",
    "ai.response.text",
];
/// (input, output) token counts, summed; the first pair of which either is present wins.
pub(crate) const TOKEN_PAIRS: &[(&str, &str)] = &[
    ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"),
    ("llm.token_count.prompt", "llm.token_count.completion"),
    (
        "gen_ai.usage.prompt_tokens",
        "gen_ai.usage.completion_tokens",
    ),
    ("ai.usage.inputTokens", "ai.usage.outputTokens"),
    ("ai.usage.promptTokens", "ai.usage.completionTokens"),
];
/// Totals, used when no pair is there.
pub(crate) const TOKEN_TOTALS: &[&str] = &["llm.token_count.total", "llm.usage.total_tokens"];

/// OpenLLMetry's LangChain instrumentation records a tool's input as
/// `{"input_str", "tags", "metadata", "inputs", "kwargs"}` and its output as
/// `{"output", "kwargs"}`: the metadata (LangGraph's step number, a checkpoint id) and kwargs
/// (the call id) change on every call, so the same call would never look the same. The
/// arguments and the result are what identify a call; they are taken out of the wrapper.
pub(crate) fn openllmetry_payload(span: &Span, text: String, input: bool) -> String {
    if attrs::text(&span.attributes, TRACELOOP_KIND).is_none() {
        return text;
    }
    let Ok(serde_json::Value::Object(mut m)) = serde_json::from_str(&text) else {
        return text;
    };
    let inner = if input && m.contains_key("input_str") {
        match m.remove("inputs") {
            Some(v) if !v.is_null() => Some(v),
            _ => m.remove("input_str"),
        }
    } else if !input && m.len() == 2 && m.contains_key("kwargs") {
        m.remove("output")
    } else {
        None
    };
    match inner {
        Some(serde_json::Value::String(s)) => s,
        Some(v) => v.to_string(),
        None => text,
    }
}
