//! Spans to v1 events: pure functions, no I/O (see docs/otlp.md for the table; which attribute
//! means what under each convention is `conventions.rs`).
//!
//! A run is the trace (`run_id` = the trace id in lowercase hex): every span of an agent
//! invocation carries it, whichever batch or receiver replica it reaches, so no state is
//! needed to put a span in its run.
use super::attrs;
use super::conventions::{self as conv, agent_name};
use crate::contract::{Event, RunFinished, RunKey, RunStarted, RunStatus, Step, TerminationReason};
use opentelemetry_proto::tonic::trace::v1::{status::StatusCode, Span};

pub(crate) use super::conventions::{classify, SpanKind};

/// Why a span gives no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    /// A trace id that is not 16 non-zero bytes, or a span id that is not 8: rejected (counted
    /// in the response's `partial_success`).
    InvalidIds,
    /// Not an agent, tool or model span, and not a trace's root: counted and skipped.
    Unmapped,
}

/// The run id of a trace id: its lowercase hex, as OTLP/JSON and the W3C header write it.
pub(crate) fn run_id(trace_id: &[u8]) -> Option<String> {
    (trace_id.len() == 16 && trace_id.iter().any(|&b| b != 0)).then(|| hex::encode(trace_id))
}

/// A span's step index: its start time in microseconds, times 1000, plus its span id folded
/// to 0..1000. A span exported twice gets the same index (a redelivery); spans of one run get
/// indices in start order whichever batch, order or replica they arrive in. Two spans of one
/// run share an index only if they start in the same microsecond *and* their ids fold alike.
pub(crate) fn step_index(start_unix_nano: u64, span_id: &[u8]) -> u64 {
    // FNV-1a: fixed, so every replica and every version of eddy folds an id the same way.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in span_id {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (start_unix_nano / 1_000)
        .saturating_mul(1_000)
        .saturating_add(h % 1_000)
}

fn ms(unix_nano: u64) -> i64 {
    i64::try_from(unix_nano / 1_000_000).unwrap_or(i64::MAX)
}

fn failed(span: &Span) -> bool {
    span.status
        .as_ref()
        .is_some_and(|s| s.code == StatusCode::Error as i32)
}

fn first_text(span: &Span, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| attrs::span_text(span, k))
}

fn tokens(span: &Span) -> Option<u64> {
    let a = &span.attributes;
    conv::TOKEN_PAIRS
        .iter()
        .find_map(|(i, o)| match (attrs::count(a, i), attrs::count(a, o)) {
            (None, None) => None,
            (i, o) => Some(i.unwrap_or(0).saturating_add(o.unwrap_or(0))),
        })
        .or_else(|| conv::TOKEN_TOTALS.iter().find_map(|k| attrs::count(a, k)))
}

fn step(key: &RunKey, span: &Span, kind: SpanKind) -> Step {
    let mut s = Step {
        key: key.clone(),
        ts_ms: ms(span.start_time_unix_nano),
        step_index: step_index(span.start_time_unix_nano, &span.span_id),
        agent: attrs::text(&span.attributes, "gen_ai.agent.name"),
        tokens: tokens(span),
        ..Step::default()
    };
    match kind {
        SpanKind::Tool => {
            s.step_type = "tool_call".into();
            s.tool_name = first_text(span, conv::TOOL_NAME)
                .or_else(|| (!span.name.is_empty()).then(|| span.name.clone()));
            let payload = |keys, input| {
                first_text(span, keys).map(|t| conv::openllmetry_payload(span, t, input))
            };
            s.tool_input = attrs::json_text(payload(conv::TOOL_INPUT, true));
            s.tool_output = attrs::json_text(payload(conv::TOOL_OUTPUT, false));
            s.tool_success = Some(!failed(span));
            let dur = span
                .end_time_unix_nano
                .saturating_sub(span.start_time_unix_nano);
            s.tool_latency_ms = (span.end_time_unix_nano > 0).then(|| dur as f64 / 1e6);
        }
        _ => {
            s.step_type = "think".into();
            s.content = first_text(span, conv::MODEL_OUTPUT);
        }
    }
    s
}

/// The events of one span, in a fixed order; `Err` says why it gives none.
///
/// - a tool or model span: one `step`;
/// - an agent span: a `run_started` naming the run;
/// - the trace's root span (no parent), of any kind: a `run_finished` at its end, `failed`
///   when its status is ERROR. Children end before their root, so this comes last.
pub(crate) fn events(project_id: &str, span: &Span) -> Result<Vec<Event>, Skip> {
    let run_id = run_id(&span.trace_id).ok_or(Skip::InvalidIds)?;
    if span.span_id.len() != 8 {
        return Err(Skip::InvalidIds);
    }
    let key = RunKey {
        project_id: project_id.to_string(),
        run_id,
    };
    let kind = classify(span);
    let root = span.parent_span_id.is_empty();
    let mut out = Vec::new();
    match kind {
        SpanKind::Agent => out.push(Event::RunStarted(RunStarted {
            key: key.clone(),
            ts_ms: ms(span.start_time_unix_nano),
            // v1 requires a name; an agent span without one is still an agent.
            agent_name: agent_name(span, kind).unwrap_or_else(|| "agent".into()),
            input: first_text(span, conv::RUN_INPUT),
            // Kept, not used as the run id: it spans several invocations (see docs/otlp.md).
            metadata: attrs::text(&span.attributes, "gen_ai.conversation.id").and_then(|c| {
                crate::contract::JsonText::parse(
                    &serde_json::json!({ "gen_ai.conversation.id": c }).to_string(),
                )
                .ok()
            }),
        })),
        SpanKind::Tool | SpanKind::Model => out.push(Event::Step(step(&key, span, kind))),
        SpanKind::Other if !root => return Err(Skip::Unmapped),
        SpanKind::Other => {}
    }
    if root && span.end_time_unix_nano > 0 {
        let failed = failed(span);
        out.push(Event::RunFinished(RunFinished {
            key,
            ts_ms: ms(span.end_time_unix_nano),
            status: if failed {
                RunStatus::Failed
            } else {
                RunStatus::Completed
            },
            termination_reason: Some(if failed {
                TerminationReason::Error
            } else {
                TerminationReason::Clean
            }),
            output: first_text(span, conv::RUN_OUTPUT),
            reported_loop_detected: None,
            reported_loop_step_index: None,
            reported_totals: None,
        }));
    }
    Ok(out)
}
