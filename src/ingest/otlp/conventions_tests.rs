//! The mapping of OpenLLMetry's, the Vercel AI SDK's and a default LangGraph run's spans, built
//! as those instrumentations build them (attribute names and values from their sources; see
//! `conventions.rs`).
use super::mapping::{self, Skip, SpanKind};
use super::tests::{kv, s, span, T0};
use crate::contract::Event;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::{status, Span, Status};

fn one_step(sp: &Span) -> crate::contract::Step {
    match mapping::events("p", sp).unwrap().as_slice() {
        [Event::Step(st)] => st.clone(),
        other => panic!("{other:?}"),
    }
}

fn named(mut sp: Span, name: &str) -> Span {
    sp.name = name.into();
    sp
}

#[test]
fn traceloop_workflows_agents_tools_and_tasks() {
    // traceloop-sdk's @workflow / @agent / @tool / @task: `<name>.<kind>` spans.
    let workflow = named(
        span(
            1,
            None,
            T0,
            vec![
                s("traceloop.span.kind", "workflow"),
                s("traceloop.entity.name", "support_pipeline"),
                s(
                    "traceloop.entity.input",
                    r#"{"args": ["where is order 42?"], "kwargs": {}}"#,
                ),
                s("traceloop.entity.output", r#""shipped""#),
            ],
        ),
        "support_pipeline.workflow",
    );
    let evs = mapping::events("p", &workflow).unwrap();
    let [Event::RunStarted(st), Event::RunFinished(fin)] = evs.as_slice() else {
        panic!("{evs:?}")
    };
    assert_eq!(st.agent_name, "support_pipeline");
    assert!(st.input.as_deref().unwrap().contains("order 42"));
    assert_eq!(fin.output.as_deref(), Some(r#""shipped""#));

    let agent = span(
        2,
        Some(1),
        T0 + 1,
        vec![
            s("traceloop.span.kind", "agent"),
            s("traceloop.entity.name", "researcher"),
        ],
    );
    let evs = mapping::events("p", &agent).unwrap();
    assert!(matches!(evs.as_slice(), [Event::RunStarted(r)] if r.agent_name == "researcher"));

    let tool = span(
        3,
        Some(2),
        T0 + 2,
        vec![
            s("traceloop.span.kind", "tool"),
            s("traceloop.entity.name", "lookup_order"),
            s(
                "traceloop.entity.input",
                r#"{"args": [], "kwargs": {"order_id": "42"}}"#,
            ),
            s("traceloop.entity.output", r#"{"status": "pending"}"#),
            // The SDK's span processor marks every span inside an @agent.
            s("gen_ai.agent.name", "researcher"),
        ],
    );
    let st = one_step(&tool);
    assert_eq!(st.step_type, "tool_call");
    assert_eq!(st.tool_name.as_deref(), Some("lookup_order"));
    assert_eq!(
        st.tool_input.unwrap().get(),
        r#"{"args": [], "kwargs": {"order_id": "42"}}"#
    );
    assert_eq!(st.tool_output.unwrap().get(), r#"{"status": "pending"}"#);
    assert_eq!(st.agent.as_deref(), Some("researcher"));

    let task = span(4, Some(2), T0 + 3, vec![s("traceloop.span.kind", "task")]);
    assert_eq!(mapping::events("p", &task).unwrap_err(), Skip::Unmapped);

    // An OpenLLMetry model span of the older instrumentations: llm.request.type, and usage as
    // prompt/completion tokens.
    let llm = span(
        5,
        Some(2),
        T0 + 4,
        vec![
            s("llm.request.type", "chat"),
            s("gen_ai.completion.0.content", "Let me look the order up."),
            kv("gen_ai.usage.prompt_tokens", Value::IntValue(30)),
            kv("gen_ai.usage.completion_tokens", Value::IntValue(8)),
        ],
    );
    let st = one_step(&llm);
    assert_eq!(st.step_type, "think");
    assert_eq!(st.content.as_deref(), Some("Let me look the order up."));
    assert_eq!(st.tokens, Some(38));
}

/// A tool span as `opentelemetry-instrumentation-langchain` writes it inside a LangGraph run.
fn openllmetry_langchain_tool(id: u8, step: u32, call: &str) -> Span {
    let input = serde_json::json!({
        "input_str": "{'order_id': '42'}",
        "tags": [],
        "metadata": {
            "langgraph_step": step,
            "langgraph_node": "tools",
            "langgraph_checkpoint_ns": format!("tools:{call}"),
        },
        "inputs": {"order_id": "42"},
        "kwargs": {"tool_call_id": call},
    });
    let output = serde_json::json!({
        "output": "{\"order_id\": \"42\", \"status\": \"pending\"}",
        "kwargs": {"tool_call_id": call, "name": "lookup_order"},
    });
    named(
        span(
            id,
            Some(1),
            T0 + u64::from(id),
            vec![
                s("traceloop.span.kind", "tool"),
                s("traceloop.entity.name", "lookup_order"),
                s("gen_ai.operation.name", "execute_tool"),
                s("gen_ai.tool.name", "lookup_order"),
                s("gen_ai.tool.call.arguments", &input.to_string()),
                s("traceloop.entity.input", &input.to_string()),
                s("gen_ai.tool.call.result", &output.to_string()),
                s("traceloop.entity.output", &output.to_string()),
            ],
        ),
        "execute_tool lookup_order",
    )
}

#[test]
fn openllmetrys_langchain_wrappers_are_taken_off_so_the_same_call_looks_the_same() {
    let a = one_step(&openllmetry_langchain_tool(2, 2, "call_a"));
    let b = one_step(&openllmetry_langchain_tool(3, 4, "call_b"));
    assert_eq!(a.tool_input.as_ref().unwrap().get(), r#"{"order_id":"42"}"#);
    assert_eq!(
        a.tool_output.as_ref().unwrap().get(),
        r#"{"order_id": "42", "status": "pending"}"#
    );
    assert_eq!(a.tool_input, b.tool_input);
    assert_eq!(a.tool_output, b.tool_output);
    // The same shape from an instrumentation that is not OpenLLMetry's is kept as it is.
    let mut plain = openllmetry_langchain_tool(4, 4, "call_c");
    plain
        .attributes
        .retain(|kv| !kv.key.starts_with("traceloop."));
    let st = one_step(&plain);
    assert!(st.tool_input.unwrap().get().contains("langgraph_step"));
}

#[test]
fn vercel_ai_sdk_generate_text_tool_loop() {
    // generate-text.ts: the outer `ai.generateText` span around the loop.
    let mut outer = named(
        span(
            1,
            None,
            T0,
            vec![
                s("operation.name", "ai.generateText support-bot"),
                s("resource.name", "support-bot"),
                s("ai.operationId", "ai.generateText"),
                s("ai.telemetry.functionId", "support-bot"),
                s("ai.telemetry.metadata.userId", "u-7"),
                s("ai.model.provider", "openai.chat"),
                s("ai.model.id", "gpt-4o"),
                s("ai.prompt", r#"{"prompt":"Where is order 42?"}"#),
                s("ai.response.text", "It is pending."),
                kv("ai.usage.inputTokens", Value::IntValue(300)),
            ],
        ),
        "ai.generateText",
    );
    outer.status = Some(Status {
        code: status::StatusCode::Unset as i32,
        message: String::new(),
    });
    let evs = mapping::events("p", &outer).unwrap();
    let [Event::RunStarted(st), Event::RunFinished(fin)] = evs.as_slice() else {
        panic!("{evs:?}")
    };
    assert_eq!(st.agent_name, "support-bot");
    assert_eq!(
        st.input.as_deref(),
        Some(r#"{"prompt":"Where is order 42?"}"#)
    );
    assert_eq!(fin.output.as_deref(), Some("It is pending."));

    // One model call of the loop.
    let call = named(
        span(
            2,
            Some(1),
            T0 + 1,
            vec![
                s("operation.name", "ai.generateText.doGenerate support-bot"),
                s("ai.operationId", "ai.generateText.doGenerate"),
                s("ai.telemetry.functionId", "support-bot"),
                s("gen_ai.system", "openai.chat"),
                s("gen_ai.request.model", "gpt-4o"),
                s("ai.response.text", "I will look the order up."),
                s("ai.response.finishReason", "tool-calls"),
                kv("ai.usage.inputTokens", Value::IntValue(100)),
                kv("ai.usage.outputTokens", Value::IntValue(12)),
            ],
        ),
        "ai.generateText.doGenerate",
    );
    assert_eq!(mapping::classify(&call), SpanKind::Model);
    let st = one_step(&call);
    assert_eq!(st.step_type, "think");
    assert_eq!(st.content.as_deref(), Some("I will look the order up."));
    assert_eq!(st.tokens, Some(112));

    // execute-tool-call.ts: one `ai.toolCall` span per tool execution.
    let mut tool = named(
        span(
            3,
            Some(1),
            T0 + 2,
            vec![
                s("operation.name", "ai.toolCall support-bot"),
                s("resource.name", "support-bot"),
                s("ai.operationId", "ai.toolCall"),
                s("ai.telemetry.functionId", "support-bot"),
                s("ai.toolCall.name", "lookupOrder"),
                s("ai.toolCall.id", "call_X1"),
                s("ai.toolCall.args", r#"{"orderId":"42"}"#),
                s("ai.toolCall.result", r#"{"status":"pending"}"#),
            ],
        ),
        "ai.toolCall",
    );
    let st = one_step(&tool);
    assert_eq!(st.step_type, "tool_call");
    assert_eq!(st.tool_name.as_deref(), Some("lookupOrder"));
    assert_eq!(st.tool_input.unwrap().get(), r#"{"orderId":"42"}"#);
    assert_eq!(st.tool_output.unwrap().get(), r#"{"status":"pending"}"#);
    assert_eq!(st.tool_success, Some(true));
    // A tool that threw: recordErrorOnSpan sets the status to ERROR, and there is no result.
    tool.attributes.retain(|kv| kv.key != "ai.toolCall.result");
    tool.status = Some(Status {
        code: status::StatusCode::Error as i32,
        message: "order service down".into(),
    });
    let st = one_step(&tool);
    assert_eq!((st.tool_success, st.tool_output), (Some(false), None));

    // streamText's spans, recognised by their names alone as well.
    let stream = named(span(4, None, T0, vec![]), "ai.streamText");
    assert_eq!(mapping::classify(&stream), SpanKind::Agent);
    let chunk = named(span(5, Some(4), T0, vec![]), "ai.streamText.doStream");
    assert_eq!(mapping::classify(&chunk), SpanKind::Model);
    let embed = named(span(6, Some(4), T0, vec![]), "ai.embed");
    assert_eq!(mapping::classify(&embed), SpanKind::Other);
}

/// An OpenInference span of a LangGraph run, with the metadata LangGraph gives a node's runs.
fn openinference(id: u8, parent: Option<u8>, name: &str, kind: &str, node: Option<&str>) -> Span {
    let mut attrs = vec![s("openinference.span.kind", kind)];
    if let Some(n) = node {
        let meta = serde_json::json!({
            "langgraph_step": 1,
            "langgraph_node": n,
            "langgraph_triggers": ["branch:to:agent"],
            "langgraph_path": ["__pregel_pull", n],
            "langgraph_checkpoint_ns": format!("{n}:1f0e"),
        });
        attrs.push(s("metadata", &meta.to_string()));
    }
    named(span(id, parent, T0 + u64::from(id), attrs), name)
}

#[test]
fn a_default_langgraph_run_is_named_after_its_graph_not_its_agent_node() {
    // create_react_agent: the graph "LangGraph" (a CHAIN), its model node "agent" (AGENT by
    // OpenInference's name rule), the model call, the "tools" node and the tool.
    let root = openinference(1, None, "LangGraph", "CHAIN", None);
    let evs = mapping::events("p", &root).unwrap();
    assert!(
        matches!(evs.as_slice(), [Event::RunStarted(r), Event::RunFinished(_)] if r.agent_name == "LangGraph"),
        "{evs:?}"
    );
    let node = openinference(2, Some(1), "agent", "AGENT", Some("agent"));
    assert_eq!(mapping::events("p", &node).unwrap_err(), Skip::Unmapped);
    let tools = openinference(3, Some(1), "tools", "CHAIN", Some("tools"));
    assert_eq!(mapping::events("p", &tools).unwrap_err(), Skip::Unmapped);
    let llm = openinference(4, Some(2), "ChatOpenAI", "LLM", Some("agent"));
    assert_eq!(mapping::classify(&llm), SpanKind::Model);

    // The graph invoked inside a web request's span (not the root) is still the agent.
    let inner = openinference(5, Some(9), "LangGraph", "CHAIN", None);
    assert_eq!(mapping::classify(&inner), SpanKind::Agent);
    // A graph compiled with a name, at the root: named so.
    let named_graph = openinference(1, None, "order_helper", "CHAIN", None);
    let evs = mapping::events("p", &named_graph).unwrap();
    assert!(matches!(evs.as_slice(), [Event::RunStarted(r), _] if r.agent_name == "order_helper"));
    // Other chains inside a run are no agents.
    let chain = openinference(6, Some(1), "RunnableSequence", "CHAIN", None);
    assert_eq!(mapping::classify(&chain), SpanKind::Other);
    // A chain whose name holds "agent" outside LangGraph stays an agent (OpenInference's rule).
    let executor = openinference(7, Some(1), "AgentExecutor", "AGENT", None);
    assert_eq!(mapping::classify(&executor), SpanKind::Agent);
}

#[test]
fn the_agent_name_comes_from_the_conventions_before_the_span_name() {
    let mut root = openinference(1, None, "LangGraph", "CHAIN", None);
    // LangChain's agents (create_agent) put their name in the runs' metadata.
    root.attributes.push(s(
        "metadata",
        &serde_json::json!({"lc_agent_name": "billing_agent"}).to_string(),
    ));
    let evs = mapping::events("p", &root).unwrap();
    assert!(matches!(evs.as_slice(), [Event::RunStarted(r), _] if r.agent_name == "billing_agent"));
    // gen_ai.agent.name wins over everything.
    root.attributes.push(s("gen_ai.agent.name", "billing"));
    let evs = mapping::events("p", &root).unwrap();
    assert!(matches!(evs.as_slice(), [Event::RunStarted(r), _] if r.agent_name == "billing"));
}
