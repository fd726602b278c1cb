//! Unit tests of the mapping (pure) and the decoders (protobuf, JSON, gzip, malformed).
use super::decode::{decode, decompress, Encoding};
use super::mapping::{self, SpanKind};
use super::*;
use crate::contract::{decode as decode_v1, Event};
use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::Router;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{status, ResourceSpans, ScopeSpans, Span, Status};
use prost::Message;
use std::io::Write;

pub(super) const TRACE: [u8; 16] = [
    0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c,
];

pub(super) fn kv(k: &str, v: Value) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(v) }),
    }
}

pub(super) fn s(k: &str, v: &str) -> KeyValue {
    kv(k, Value::StringValue(v.into()))
}

pub(super) fn span(id: u8, parent: Option<u8>, start_ns: u64, attributes: Vec<KeyValue>) -> Span {
    Span {
        trace_id: TRACE.to_vec(),
        span_id: vec![0, 0, 0, 0, 0, 0, 0, id],
        parent_span_id: parent
            .map(|p| vec![0, 0, 0, 0, 0, 0, 0, p])
            .unwrap_or_default(),
        name: format!("span-{id}"),
        start_time_unix_nano: start_ns,
        end_time_unix_nano: start_ns + 2_000_000,
        attributes,
        ..Span::default()
    }
}

pub(super) fn request(project: Option<&str>, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: project
                    .map(|p| vec![s(PROJECT_ATTRIBUTE, p)])
                    .unwrap_or_default(),
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

pub(super) const T0: u64 = 1_767_225_600_000_000_000;

pub(super) fn tool(id: u8, start: u64, args: &str) -> Span {
    span(
        id,
        Some(1),
        start,
        vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", "web_search"),
            s("gen_ai.tool.call.arguments", args),
            s("gen_ai.tool.call.result", "no results"),
        ],
    )
}

fn decoded(m: &Mapped) -> Vec<Event> {
    m.messages
        .iter()
        .map(|(_, b)| decode_v1(b).unwrap())
        .collect()
}

#[test]
fn spans_are_classified_under_both_conventions() {
    let k = |attrs| mapping::classify(&span(2, Some(1), T0, attrs));
    assert_eq!(
        k(vec![s("gen_ai.operation.name", "invoke_agent")]),
        SpanKind::Agent
    );
    assert_eq!(
        k(vec![s("gen_ai.operation.name", "create_agent")]),
        SpanKind::Agent
    );
    assert_eq!(
        k(vec![s("openinference.span.kind", "AGENT")]),
        SpanKind::Agent
    );
    assert_eq!(
        k(vec![s("gen_ai.operation.name", "execute_tool")]),
        SpanKind::Tool
    );
    assert_eq!(
        k(vec![s("openinference.span.kind", "TOOL")]),
        SpanKind::Tool
    );
    assert_eq!(k(vec![s("gen_ai.operation.name", "chat")]), SpanKind::Model);
    assert_eq!(
        k(vec![s("gen_ai.operation.name", "text_completion")]),
        SpanKind::Model
    );
    assert_eq!(
        k(vec![s("openinference.span.kind", "LLM")]),
        SpanKind::Model
    );
    assert_eq!(
        k(vec![s("openinference.span.kind", "CHAIN")]),
        SpanKind::Other
    );
    assert_eq!(k(vec![s("http.method", "GET")]), SpanKind::Other);
}

#[test]
fn a_tool_span_is_a_tool_call_step_with_its_arguments_and_result() {
    let mut sp = tool(2, T0 + 5_000, r#"{"q": "weather"}"#);
    sp.attributes
        .push(kv("gen_ai.usage.input_tokens", Value::IntValue(7)));
    sp.attributes
        .push(kv("gen_ai.usage.output_tokens", Value::IntValue(5)));
    let evs = mapping::events("p", &sp).unwrap();
    let [Event::Step(st)] = evs.as_slice() else {
        panic!("{evs:?}")
    };
    assert_eq!(st.key.run_id, "5b8efff798038103d269b633813fc60c");
    assert_eq!(st.key.project_id, "p");
    assert_eq!(st.step_type, "tool_call");
    assert_eq!(st.tool_name.as_deref(), Some("web_search"));
    // JSON arguments are kept byte for byte; plain text becomes a JSON string.
    assert_eq!(st.tool_input.as_ref().unwrap().get(), r#"{"q": "weather"}"#);
    assert_eq!(st.tool_output.as_ref().unwrap().get(), r#""no results""#);
    assert_eq!(st.tool_success, Some(true));
    assert_eq!(st.tool_latency_ms, Some(2.0));
    assert_eq!(st.tokens, Some(12));
    assert_eq!(st.ts_ms, 1_767_225_600_000);
}

#[test]
fn openinference_tool_and_llm_spans_and_event_attributes() {
    let mut t = span(
        3,
        Some(1),
        T0,
        vec![
            s("openinference.span.kind", "TOOL"),
            s("tool.name", "lookup"),
            s("input.value", r#"{"id":1}"#),
        ],
    );
    // The result only on a span event, as older instrumentations write it.
    t.events
        .push(opentelemetry_proto::tonic::trace::v1::span::Event {
            name: "result".into(),
            attributes: vec![s("output.value", "found")],
            ..Default::default()
        });
    t.status = Some(Status {
        code: status::StatusCode::Error as i32,
        message: "boom".into(),
    });
    let evs = mapping::events("p", &t).unwrap();
    let [Event::Step(st)] = evs.as_slice() else {
        panic!()
    };
    assert_eq!(st.tool_name.as_deref(), Some("lookup"));
    assert_eq!(st.tool_input.as_ref().unwrap().get(), r#"{"id":1}"#);
    assert_eq!(st.tool_output.as_ref().unwrap().get(), r#""found""#);
    assert_eq!(st.tool_success, Some(false));

    let llm = span(
        4,
        Some(1),
        T0,
        vec![
            s("openinference.span.kind", "LLM"),
            s(
                "llm.output_messages.0.message.content",
                "I should search again",
            ),
            kv("llm.token_count.prompt", Value::IntValue(10)),
            kv("llm.token_count.completion", Value::IntValue(3)),
        ],
    );
    let evs = mapping::events("p", &llm).unwrap();
    let [Event::Step(st)] = evs.as_slice() else {
        panic!()
    };
    assert_eq!(st.step_type, "think");
    assert_eq!(st.content.as_deref(), Some("I should search again"));
    assert_eq!(st.tokens, Some(13));
}

#[test]
fn the_root_agent_span_starts_and_finishes_the_run() {
    let mut root = span(
        1,
        None,
        T0,
        vec![
            s("gen_ai.operation.name", "invoke_agent"),
            s("gen_ai.agent.name", "researcher"),
            s("gen_ai.conversation.id", "conv-9"),
        ],
    );
    root.status = Some(Status {
        code: status::StatusCode::Error as i32,
        message: String::new(),
    });
    let evs = mapping::events("p", &root).unwrap();
    let [Event::RunStarted(st), Event::RunFinished(fin)] = evs.as_slice() else {
        panic!("{evs:?}")
    };
    assert_eq!(st.agent_name, "researcher");
    assert!(st.metadata.as_ref().unwrap().get().contains("conv-9"));
    assert_eq!(fin.status, crate::contract::RunStatus::Failed);
    assert_eq!(fin.ts_ms, st.ts_ms + 2);
    // A nested agent span names the run but does not end it; a plain root span only ends it.
    let nested = span(2, Some(1), T0, vec![s("openinference.span.kind", "AGENT")]);
    let evs = mapping::events("p", &nested).unwrap();
    assert!(matches!(evs.as_slice(), [Event::RunStarted(s)] if s.agent_name == "span-2"));
    let plain_root = span(1, None, T0, vec![s("http.method", "POST")]);
    assert!(matches!(
        mapping::events("p", &plain_root).unwrap().as_slice(),
        [Event::RunFinished(_)]
    ));
}

#[test]
fn unmappable_spans_are_skipped_and_counted() {
    let other = span(5, Some(1), T0, vec![s("db.system", "postgres")]);
    assert_eq!(
        mapping::events("p", &other).unwrap_err(),
        mapping::Skip::Unmapped
    );
    let mut bad = tool(6, T0, "{}");
    bad.trace_id = vec![0; 16];
    assert_eq!(
        mapping::events("p", &bad).unwrap_err(),
        mapping::Skip::InvalidIds
    );
    let mut short = tool(7, T0, "{}");
    short.span_id = vec![1, 2];
    let m = map_request(
        &request(None, vec![other, bad, short, tool(8, T0, "{}")]),
        None,
        "d",
    );
    assert_eq!((m.spans, m.unmapped, m.rejected, m.invalid), (4, 1, 2, 0));
    assert_eq!(m.messages.len(), 1);
    // A project id the v1 contract refuses (over 256 bytes) is counted, not sent.
    let long = "x".repeat(300);
    let m = map_request(&request(Some(&long), vec![tool(8, T0, "{}")]), None, "d");
    assert_eq!((m.invalid, m.messages.len()), (1, 0));
}

#[test]
fn step_indices_follow_start_time_and_ignore_arrival_order_and_batches() {
    let spans: Vec<Span> = (0..6u8)
        .map(|i| {
            tool(
                10 + i,
                T0 + u64::from(i) * 1_000_000,
                &format!("{{\"n\":{i}}}"),
            )
        })
        .collect();
    let index_of = |m: &Mapped| -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = decoded(m)
            .into_iter()
            .map(|e| match e {
                Event::Step(s) => (s.tool_input.unwrap().get().to_string(), s.step_index),
                other => panic!("{other:?}"),
            })
            .collect();
        v.sort();
        v
    };
    let whole = map_request(&request(None, spans.clone()), None, "d");
    let mut reversed = spans.clone();
    reversed.reverse();
    let mut split = map_request(&request(None, reversed[..2].to_vec()), None, "d");
    split
        .messages
        .extend(map_request(&request(None, reversed[2..].to_vec()), None, "d").messages);
    assert_eq!(index_of(&whole), index_of(&split));
    // Later start, larger index; all distinct.
    let steps: Vec<u64> = decoded(&whole)
        .into_iter()
        .map(|e| match e {
            Event::Step(s) => s.step_index,
            _ => unreachable!(),
        })
        .collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
    // The same span exported twice: byte-identical messages (a redelivery for the engine).
    assert_eq!(
        map_request(&request(None, spans.clone()), None, "d"),
        map_request(&request(None, spans), None, "d")
    );
}

#[test]
fn same_microsecond_spans_differ_by_their_ids() {
    let a = mapping::step_index(T0 + 10, &[0, 0, 0, 0, 0, 0, 0, 1]);
    let b = mapping::step_index(T0 + 900, &[0, 0, 0, 0, 0, 0, 0, 2]);
    assert_ne!(a, b);
    assert_eq!(a / 1000, T0 / 1000);
    assert!(mapping::step_index(T0 + 1_000, &[0; 8]) / 1000 > a / 1000);
}

#[test]
fn project_comes_from_the_key_then_the_resource_then_the_default() {
    let p = |m: Mapped| decoded(&m)[0].key().project_id.clone();
    let req = request(Some("res-proj"), vec![tool(2, T0, "{}")]);
    assert_eq!(p(map_request(&req, Some("key-proj"), "d")), "key-proj");
    assert_eq!(p(map_request(&req, None, "d")), "res-proj");
    let req = request(None, vec![tool(2, T0, "{}")]);
    assert_eq!(p(map_request(&req, None, "d")), "d");
}

#[test]
fn protobuf_and_gzip_bodies_decode() {
    let req = request(Some("p"), vec![tool(2, T0, "{}")]);
    let bytes = req.encode_to_vec();
    assert_eq!(decode(&bytes, Encoding::Protobuf).unwrap(), req);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&bytes).unwrap();
    let gz = gz.finish().unwrap();
    let plain = decompress(&gz, Some("gzip"), 1 << 20).unwrap();
    assert_eq!(decode(&plain, Encoding::Protobuf).unwrap(), req);
    // A bomb: 1 MiB of zeros does not expand past the limit.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&vec![0u8; 1 << 20]).unwrap();
    let bomb = gz.finish().unwrap();
    assert!(matches!(
        decompress(&bomb, Some("gzip"), 1000),
        Err(OtlpError::TooLarge(1000))
    ));
    assert!(matches!(
        decompress(b"not gzip", Some("gzip"), 1000),
        Err(OtlpError::Malformed(_))
    ));
    assert!(matches!(
        decompress(b"x", Some("br"), 1000),
        Err(OtlpError::Malformed(_))
    ));
}

#[test]
fn otlp_json_with_hex_ids_and_camel_case_decodes() {
    // The OTLP/JSON form as the specification's example writes it.
    let json = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"eddy.project.id","value":{"stringValue":"acme"}}]},
      "scopeSpans":[{"scope":{"name":"x"},"spans":[{"traceId":"5b8efff798038103d269b633813fc60c",
      "spanId":"eee19b7ec3c1b174","parentSpanId":"eee19b7ec3c1b173","name":"search","kind":1,
      "startTimeUnixNano":"1767225600000000000","endTimeUnixNano":"1767225600002000000",
      "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},
                    {"key":"gen_ai.tool.name","value":{"stringValue":"web_search"}},
                    {"key":"gen_ai.usage.input_tokens","value":{"intValue":"42"}}],
      "status":{"code":2}}]}]}]}"#;
    let req = decode(json.as_bytes(), Encoding::Json).unwrap();
    let sp = &req.resource_spans[0].scope_spans[0].spans[0];
    assert_eq!(sp.trace_id, TRACE.to_vec());
    assert_eq!(sp.span_id, hex::decode("eee19b7ec3c1b174").unwrap());
    let m = map_request(&req, None, "d");
    let evs = decoded(&m);
    let [Event::Step(st)] = evs.as_slice() else {
        panic!("{evs:?}")
    };
    assert_eq!(st.key.project_id, "acme");
    assert_eq!(st.tokens, Some(42));
    assert_eq!(st.tool_success, Some(false));
}

#[test]
fn json_times_may_be_numbers_or_strings() {
    let body = |t: &str| {
        format!(
            r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"traceId":"5b8efff798038103d269b633813fc60c",
            "spanId":"eee19b7ec3c1b174","startTimeUnixNano":{t},"endTimeUnixNano":{t}}}]}}]}}]}}"#
        )
    };
    for t in ["1767225600000000000", r#""1767225600000000000""#] {
        let req = decode(body(t).as_bytes(), Encoding::Json).unwrap();
        let sp = &req.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(sp.start_time_unix_nano, T0, "{t}");
    }
}

#[test]
fn malformed_bodies_are_refused_with_a_reason() {
    let e = decode(b"\xff\xff\xff", Encoding::Protobuf).unwrap_err();
    assert!(
        matches!(&e, OtlpError::Malformed(m) if m.contains("protobuf")),
        "{e}"
    );
    let e = decode(b"{\"resourceSpans\": 3}", Encoding::Json).unwrap_err();
    assert!(
        matches!(&e, OtlpError::Malformed(m) if m.contains("JSON")),
        "{e}"
    );
    let e = decode(
        br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}"#,
        Encoding::Json,
    )
    .unwrap_err();
    assert!(matches!(e, OtlpError::Malformed(_)));
    assert!(Encoding::from_content_type(Some("text/plain")).is_none());
    assert_eq!(
        Encoding::from_content_type(Some("application/json; charset=utf-8")).unwrap(),
        Encoding::Json
    );
}

#[test]
fn errors_answer_as_a_collector_does() {
    let r = OtlpError::Malformed("bad".into()).response(Encoding::Protobuf);
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = OtlpError::Unavailable("down".into()).response(Encoding::Json);
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.headers()[header::RETRY_AFTER], "1");
    let r = OtlpError::Busy("full".into()).response(Encoding::Json);
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
}

/// The router with a publisher stand-in that acknowledges every message and hands it over.
fn receiver(keys: &[(&str, &str)]) -> (Router, mpsc::Receiver<Job>) {
    let mut cfg = IngestConfig::default();
    for (k, p) in keys {
        cfg.api_keys.insert(k.to_string(), p.to_string());
    }
    let (tx, rx) = mpsc::channel(64);
    let r = super::http::router(Arc::new(Receiver {
        keys: crate::ingest::key_table(&cfg).unwrap(),
        default_project: "d".into(),
        jobs: tx,
    }));
    (r, rx)
}

async fn post(
    r: &Router,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (StatusCode, axum::body::Bytes) {
    use tower::ServiceExt;
    let mut req = axum::http::Request::post("/v1/traces");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = r
        .clone()
        .oneshot(req.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    (
        status,
        axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap(),
    )
}

#[tokio::test]
async fn a_configured_key_is_required_and_names_the_project() {
    let (r, mut published) = receiver(&[("kw_SECRET", "keyed")]);
    let body = request(Some("res-proj"), vec![tool(2, T0, "{}")]).encode_to_vec();
    let pb = ("content-type", "application/x-protobuf");
    let (status, _) = post(&r, &[pb], body.clone()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = post(
        &r,
        &[pb, ("authorization", "Bearer kw_WRONG")],
        body.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let ack = tokio::spawn(async move {
        let job = published.recv().await.expect("one event published");
        let _ = job.done.send(Ok(()));
        job.payload
    });
    let (status, resp) = post(&r, &[pb, ("authorization", "Bearer kw_SECRET")], body).await;
    assert_eq!(status, StatusCode::OK);
    let resp = ExportTraceServiceResponse::decode(resp).unwrap();
    assert_eq!(resp.partial_success, None);
    let payload = ack.await.unwrap();
    assert_eq!(decode_v1(&payload).unwrap().key().project_id, "keyed");
}

#[tokio::test]
async fn bad_requests_get_a_status_in_their_own_encoding() {
    let (r, _published) = receiver(&[]);
    let (status, body) = post(
        &r,
        &[("content-type", "application/x-protobuf")],
        b"\xff\xff".to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let st = super::error::RpcStatus::decode(body).unwrap();
    assert_eq!(st.code, 3);
    assert!(st.message.contains("protobuf body"), "{}", st.message);
    let (status, _) = post(&r, &[("content-type", "text/plain")], b"x".to_vec()).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let big = vec![b' '; MAX_BODY_BYTES + 1];
    let (status, _) = post(&r, &[("content-type", "application/json")], big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // Only rejected spans: nothing to publish, 200 with partial_success.
    let mut bad = tool(2, T0, "{}");
    bad.trace_id = vec![0; 16];
    let (status, body) = post(
        &r,
        &[("content-type", "application/json")],
        serde_json::to_vec(&request(None, vec![bad])).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    // A number: OTLP/JSON readers (protobuf's JSON mapping) take int64 as number or string.
    assert_eq!(v["partialSuccess"]["rejectedSpans"], 1, "{v}");
}
