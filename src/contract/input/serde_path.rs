//! The reference decoder: serde_json into a flat, borrowed wire struct, then validation per
//! `kind`. Everything the fast path declines, and every error text, comes from here; the
//! fast path is tested against it.
use super::checks::{non_empty, opt_id, reported_totals, termination_reason, truncate};
use super::error::DecodeError;
use super::number::{non_negative_f64, parse_u64_text};
use super::ts::parse_ts;
use super::types::{Event, JsonText, RunFinished, RunKey, RunStarted, RunStatus, Step};
use crate::contract::limits::MAX_DEPTH;
use serde::Deserialize;
use serde_json::value::RawValue;

/// Maximum nesting depth of `bytes` (brackets outside strings), stopping early past `limit`.
fn depth_exceeds(bytes: &[u8], limit: usize) -> bool {
    // Nesting needs an opening bracket per level: with few brackets in all (the usual event),
    // a counting pass that vectorises says so without walking strings byte by byte.
    if memchr::memchr2_iter(b'{', b'[', bytes).count() <= limit {
        return false;
    }
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for &b in bytes {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// The string-typed fields of the wire form: a type error names the first one that is wrong.
pub(in crate::contract) const STRING_FIELDS: &[&str] = &[
    "kind",
    "project_id",
    "run_id",
    "agent_name",
    "input",
    "step_type",
    "content",
    "tool_name",
    "agent",
    "caller",
    "status",
    "termination_reason",
    "output",
    "signal_event_id",
];

fn wrong_type_field(bytes: &[u8]) -> &'static str {
    if let Ok(serde_json::Value::Object(m)) = serde_json::from_slice::<serde_json::Value>(bytes) {
        for f in STRING_FIELDS {
            if m.get(*f).is_some_and(|v| !v.is_string() && !v.is_null()) {
                return f;
            }
        }
    }
    "?"
}

/// Flat wire form. Every field is optional here so that a missing field becomes a precise
/// `MissingField` instead of serde's generic message; unknown fields are ignored (forward compat).
#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(borrow)]
    v: Option<&'a RawValue>,
    #[serde(borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    project_id: Option<String>,
    run_id: Option<String>,
    #[serde(borrow)]
    ts: Option<&'a RawValue>,
    agent_name: Option<String>,
    input: Option<String>,
    #[serde(borrow)]
    metadata: Option<&'a RawValue>,
    #[serde(borrow)]
    step_index: Option<&'a RawValue>,
    step_type: Option<String>,
    content: Option<String>,
    tool_name: Option<String>,
    #[serde(borrow)]
    tool_input: Option<&'a RawValue>,
    #[serde(borrow)]
    tool_output: Option<&'a RawValue>,
    #[serde(borrow)]
    tool_success: Option<&'a RawValue>,
    #[serde(borrow)]
    tool_latency_ms: Option<&'a RawValue>,
    #[serde(borrow)]
    tokens: Option<&'a RawValue>,
    #[serde(borrow)]
    cost_usd: Option<&'a RawValue>,
    #[serde(borrow)]
    tokens_in_context: Option<&'a RawValue>,
    agent: Option<String>,
    caller: Option<String>,
    signal_event_id: Option<String>,
    status: Option<String>,
    termination_reason: Option<String>,
    output: Option<String>,
    #[serde(borrow)]
    reported_loop_detected: Option<&'a RawValue>,
    #[serde(borrow)]
    reported_loop_step_index: Option<&'a RawValue>,
    #[serde(borrow)]
    reported_totals: Option<&'a RawValue>,
}

fn json_type_name(bytes: &[u8]) -> &'static str {
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't') | Some(b'f') => "boolean",
        Some(b'n') => "null",
        _ => "number",
    }
}

/// The reference decoder: everything the fast path declines, and every error, comes from here.
pub(super) fn decode_serde(bytes: &[u8], text: &str) -> Result<Event, DecodeError> {
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        return Err(DecodeError::InvalidJson(
            "starts with a UTF-8 byte-order mark (BOM); send plain UTF-8 JSON".into(),
        ));
    }
    if depth_exceeds(bytes, MAX_DEPTH) {
        return Err(DecodeError::TooDeep);
    }
    // From the validated `str`: parsing from bytes would check every string's UTF-8 again.
    let wire: Wire<'_> = match serde_json::from_str(text) {
        Ok(w) => w,
        Err(e) => {
            // A valid JSON value that is not an object deserves its own, clearer reason.
            if e.classify() == serde_json::error::Category::Data {
                let msg = e.to_string();
                if let Some(rest) = msg.strip_prefix("duplicate field `") {
                    let name = rest.split('`').next().unwrap_or_default();
                    return Err(DecodeError::DuplicateField(truncate(name, 64).to_string()));
                }
                if let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) {
                    if !v.is_object() {
                        return Err(DecodeError::NotAnObject(json_type_name(bytes)));
                    }
                }
                return Err(DecodeError::InvalidField {
                    field: wrong_type_field(bytes),
                    why: msg,
                });
            }
            return Err(DecodeError::InvalidJson(e.to_string()));
        }
    };
    let v = wire.v.ok_or(DecodeError::MissingVersion)?;
    if v.get().trim() != "1" {
        return Err(DecodeError::UnsupportedVersion(v.get().to_string()));
    }
    let kind = wire.kind.as_deref().ok_or(DecodeError::MissingKind)?;
    let key = RunKey {
        project_id: non_empty(wire.project_id, "project_id")?,
        run_id: non_empty(wire.run_id, "run_id")?,
    };
    let ts_ms = parse_ts(wire.ts.ok_or(DecodeError::MissingField("ts"))?)?;
    match kind {
        "run_started" => Ok(Event::RunStarted(RunStarted {
            key,
            ts_ms,
            agent_name: non_empty(wire.agent_name, "agent_name")?,
            input: wire.input,
            metadata: wire.metadata.map(JsonText::from),
        })),
        "step" => {
            let step_index = wire
                .step_index
                .ok_or(DecodeError::MissingField("step_index"))?;
            Ok(Event::Step(Step {
                key,
                ts_ms,
                step_index: parse_u64(step_index, "step_index")?,
                step_type: non_empty(wire.step_type, "step_type")?,
                content: wire.content,
                tool_name: opt_id(wire.tool_name, "tool_name")?,
                tool_input: wire.tool_input.map(JsonText::from),
                tool_output: wire.tool_output.map(JsonText::from),
                tool_success: opt(wire.tool_success, "tool_success", |r| {
                    serde_json::from_str::<Option<bool>>(r.get()).ok()
                })?
                .flatten(),
                tool_latency_ms: opt_non_negative_f64(wire.tool_latency_ms, "tool_latency_ms")?,
                tokens: opt(wire.tokens, "tokens", |r| parse_u64(r, "tokens").ok())?,
                cost_usd: opt_non_negative_f64(wire.cost_usd, "cost_usd")?,
                tokens_in_context: opt(wire.tokens_in_context, "tokens_in_context", |r| {
                    parse_u64(r, "tokens_in_context").ok()
                })?,
                agent: opt_id(wire.agent, "agent")?,
                caller: opt_id(wire.caller, "caller")?,
                metadata: wire.metadata.map(JsonText::from),
                signal_event_id: opt_id(wire.signal_event_id, "signal_event_id")?,
            }))
        }
        "run_finished" => {
            let status = match wire.status.as_deref() {
                Some("completed") => RunStatus::Completed,
                Some("failed") => RunStatus::Failed,
                Some(other) => {
                    return Err(DecodeError::InvalidField {
                        field: "status",
                        why: format!("`{other}` is not one of completed, failed"),
                    })
                }
                None => return Err(DecodeError::MissingField("status")),
            };
            let termination_reason = match wire.termination_reason.as_deref() {
                None => None,
                Some(r) => Some(
                    termination_reason(r)
                    .ok_or(())
                    .map_err(|_| DecodeError::InvalidField {
                        field: "termination_reason",
                        why: format!(
                            "`{r}` is not one of clean, max_steps_reached, context_limit, error, loop_detected, timeout"
                        ),
                    })?,
                ),
            };
            Ok(Event::RunFinished(RunFinished {
                key,
                ts_ms,
                status,
                termination_reason,
                output: wire.output,
                reported_loop_detected: opt(
                    wire.reported_loop_detected,
                    "reported_loop_detected",
                    |r| serde_json::from_str::<bool>(r.get()).ok(),
                )?,
                reported_loop_step_index: opt(
                    wire.reported_loop_step_index,
                    "reported_loop_step_index",
                    |r| parse_u64(r, "reported_loop_step_index").ok(),
                )?,
                reported_totals: opt(wire.reported_totals, "reported_totals", |r| {
                    reported_totals(r.get())
                })?,
            }))
        }
        other => Err(DecodeError::UnknownKind(other.to_string())),
    }
}

fn opt<T>(
    raw: Option<&RawValue>,
    field: &'static str,
    parse: impl Fn(&RawValue) -> Option<T>,
) -> Result<Option<T>, DecodeError> {
    match raw {
        None => Ok(None),
        Some(r) if r.get().trim() == "null" => Ok(None),
        Some(r) => parse(r).map(Some).ok_or_else(|| DecodeError::InvalidField {
            field,
            why: format!("unexpected value {}", truncate(r.get(), 64)),
        }),
    }
}

fn opt_non_negative_f64(
    raw: Option<&RawValue>,
    field: &'static str,
) -> Result<Option<f64>, DecodeError> {
    opt(raw, field, |r| non_negative_f64(r.get()))
}

fn parse_u64(raw: &RawValue, field: &'static str) -> Result<u64, DecodeError> {
    parse_u64_text(raw.get(), field)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many brackets but little depth (the counting shortcut cannot decide) is accepted; depth
    /// hidden among many brackets, or brackets inside strings, is judged by the walk.
    #[test]
    fn depth_is_judged_past_the_bracket_count() {
        let wide = format!("[{}1]", "[1],".repeat(3 * MAX_DEPTH));
        assert!(!depth_exceeds(wide.as_bytes(), MAX_DEPTH));
        let quoted = format!(r#"["{}"]"#, "[{".repeat(MAX_DEPTH));
        assert!(!depth_exceeds(quoted.as_bytes(), MAX_DEPTH));
        let deep = format!(
            "{}{}{}",
            "[1],".repeat(MAX_DEPTH),
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        assert!(depth_exceeds(deep.as_bytes(), MAX_DEPTH));
        assert!(!depth_exceeds(deep.as_bytes(), MAX_DEPTH + 1));
    }
}
