//! Decoding of input events (JSON, one object per Kafka message, key = run_id).
//!
//! Decoding is two-step on purpose: a flat, borrowed wire struct first (fast, and it keeps
//! `tool_input` as the exact bytes that arrived, which keelwave's fingerprint of record hashes),
//! then validation per `kind` into an owned [`Event`]. Every failure carries a machine-readable
//! reason so the dead-letter topic can say what to fix.
//!
//! Every message goes first through a fast path (`contract::scan`, then `decode_fast`): one pass
//! that locates the wire fields without serde and builds the event with the same checks. It
//! takes only well-formed input it is sure serde would read the same way, and only when the
//! event is valid; for anything else it declines and the serde path (`decode_serde`) decides,
//! so results and error texts are the serde path's, byte for byte. The tests hold the two paths
//! against each other on generated input.
use super::scan;
use serde::Deserialize;
use serde_json::value::RawValue;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// A JSON value's text exactly as it arrived (keelwave's fingerprint of record hashes these
/// bytes), known to be valid JSON. serde_json's `Box<RawValue>` would do, but it can only be
/// built by parsing the text again, and the fast path's scan has already checked it by
/// serde_json's own rules: that second parse was 3 % of a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonText(Box<str>);

impl JsonText {
    /// Checks `text` as serde_json reads a `RawValue` (surrounding whitespace trimmed).
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str::<&RawValue>(text).map(Self::from)
    }

    /// Text the scanner has checked, without surrounding whitespace.
    fn scanned(text: &str) -> Self {
        Self(text.into())
    }

    pub fn get(&self) -> &str {
        &self.0
    }
}

impl From<&RawValue> for JsonText {
    fn from(r: &RawValue) -> Self {
        Self(r.get().into())
    }
}

/// A run is identified by (project_id, run_id); run ids are only unique within a project.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, Deserialize,
)]
pub struct RunKey {
    pub project_id: String,
    pub run_id: String,
}

#[derive(Debug, Clone)]
pub enum Event {
    RunStarted(RunStarted),
    Step(Step),
    RunFinished(RunFinished),
}

impl Event {
    pub fn key(&self) -> &RunKey {
        match self {
            Event::RunStarted(e) => &e.key,
            Event::Step(e) => &e.key,
            Event::RunFinished(e) => &e.key,
        }
    }
    pub fn ts_ms(&self) -> i64 {
        match self {
            Event::RunStarted(e) => e.ts_ms,
            Event::Step(e) => e.ts_ms,
            Event::RunFinished(e) => e.ts_ms,
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunStarted {
    pub key: RunKey,
    pub ts_ms: i64,
    pub agent_name: String,
    pub input: Option<String>,
    pub metadata: Option<JsonText>,
}

/// `Default` gives an empty step for agents to fill (`Step { step_type: .., ..Default::default() }`).
#[derive(Debug, Clone, Default)]
pub struct Step {
    pub key: RunKey,
    pub ts_ms: i64,
    pub step_index: u64,
    pub step_type: String,
    pub content: Option<String>,
    pub tool_name: Option<String>,
    /// Exactly the bytes that arrived: keelwave's fingerprint of record hashes them unchanged.
    pub tool_input: Option<JsonText>,
    pub tool_output: Option<JsonText>,
    pub tool_success: Option<bool>,
    pub tool_latency_ms: Option<f64>,
    pub tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    pub tokens_in_context: Option<u64>,
    pub agent: Option<String>,
    pub caller: Option<String>,
    pub metadata: Option<JsonText>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Completed,
    Failed,
}

#[derive(Debug, Clone)]
pub struct RunFinished {
    pub key: RunKey,
    pub ts_ms: i64,
    pub status: RunStatus,
    pub termination_reason: Option<TerminationReason>,
    pub output: Option<String>,
    /// The loop flag the agent computed itself (keelwave's finish `loop_detected`), if reported.
    pub reported_loop_detected: Option<bool>,
    /// Where the agent says its loop began (keelwave's `loop_step_index`).
    pub reported_loop_step_index: Option<u64>,
    /// Totals the agent counted itself (keelwave's finish totals).
    pub reported_totals: Option<ReportedTotals>,
}

/// Run totals as reported by the agent (optional `reported_totals` on `run_finished`), under
/// keelwave's finish-call names. eddy keeps its own totals; these are recorded for comparison.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, Deserialize)]
pub struct ReportedTotals {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_steps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminationReason {
    Clean,
    MaxStepsReached,
    ContextLimit,
    Error,
    LoopDetected,
    Timeout,
    /// Output only: eddy closed the run to stay within `engine.max_open_runs`.
    Evicted,
}

impl TerminationReason {
    pub fn as_str(self) -> &'static str {
        match self {
            TerminationReason::Clean => "clean",
            TerminationReason::MaxStepsReached => "max_steps_reached",
            TerminationReason::ContextLimit => "context_limit",
            TerminationReason::Error => "error",
            TerminationReason::LoopDetected => "loop_detected",
            TerminationReason::Timeout => "timeout",
            TerminationReason::Evicted => "evicted",
        }
    }
}

/// Why a message was rejected. `reason()` is the stable, machine-readable code that goes into
/// the dead-letter record; `Display` is the sentence for humans.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecodeError {
    #[error("message is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("message is a JSON {0}, expected an object")]
    NotAnObject(&'static str),
    #[error("field `v` is missing: every event must carry \"v\":1")]
    MissingVersion,
    #[error("unsupported contract version {0}: this eddy reads v=1")]
    UnsupportedVersion(String),
    #[error("field `kind` is missing: expected run_started, step or run_finished")]
    MissingKind,
    #[error("unknown kind `{0}`: expected run_started, step or run_finished")]
    UnknownKind(String),
    #[error("required field `{0}` is missing")]
    MissingField(&'static str),
    #[error("field `{field}` is invalid: {why}")]
    InvalidField { field: &'static str, why: String },
    #[error("message has no payload (null or zero bytes)")]
    EmptyPayload,
    #[error("message is {size} bytes, above the limit of {limit} (max_message_bytes)")]
    TooLarge { size: usize, limit: usize },
    #[error("message is not UTF-8 text: invalid byte at offset {0}")]
    InvalidUtf8(usize),
    #[error("JSON nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("field `{0}` appears more than once")]
    DuplicateField(String),
}

impl DecodeError {
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeError::InvalidJson(_) => "invalid_json",
            DecodeError::NotAnObject(_) => "not_an_object",
            DecodeError::MissingVersion => "missing_version",
            DecodeError::UnsupportedVersion(_) => "unsupported_version",
            DecodeError::MissingKind => "missing_kind",
            DecodeError::UnknownKind(_) => "unknown_kind",
            DecodeError::MissingField(_) => "missing_field",
            DecodeError::InvalidField { .. } => "invalid_field",
            DecodeError::EmptyPayload => "empty_payload",
            DecodeError::TooLarge { .. } => "too_large",
            DecodeError::InvalidUtf8(_) => "invalid_utf8",
            DecodeError::TooDeep => "too_deep",
            DecodeError::DuplicateField(_) => "duplicate_field",
        }
    }

    /// Every reason `reason()` can return, for docs, metrics and tests.
    pub const REASONS: &'static [&'static str] = &[
        "empty_payload",
        "too_large",
        "invalid_utf8",
        "invalid_json",
        "too_deep",
        "not_an_object",
        "duplicate_field",
        "missing_version",
        "unsupported_version",
        "missing_kind",
        "unknown_kind",
        "missing_field",
        "invalid_field",
    ];
}

pub use super::limits::{MAX_DEPTH, MAX_ID_BYTES, MAX_TS_MS};

/// The checks the worker applies before [`decode`]: a payload must be present, at most
/// `max_bytes` long and UTF-8. Then the message is decoded.
pub fn decode_bounded(payload: Option<&[u8]>, max_bytes: usize) -> Result<Event, DecodeError> {
    let bytes = match payload {
        None => return Err(DecodeError::EmptyPayload),
        Some([]) => return Err(DecodeError::EmptyPayload),
        Some(b) => b,
    };
    if bytes.len() > max_bytes {
        return Err(DecodeError::TooLarge {
            size: bytes.len(),
            limit: max_bytes,
        });
    }
    decode(bytes)
}

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
pub(super) const STRING_FIELDS: &[&str] = &[
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

/// Decode one message payload.
pub fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
    let text = utf8(bytes)?;
    if let Some(event) = decode_fast(text) {
        return Ok(event);
    }
    decode_serde(bytes, text)
}

/// The fast path: `Some` only where [`decode_serde`] would return `Ok` with the same event.
///
/// [`scan`] admits only input on which serde would fill the wire struct without error and with
/// the same contents (strings unescaped alike, raw values with the same bytes); the checks
/// below are the serde path's own functions, and any of them failing declines rather than
/// reports, so that error texts have a single source.
fn decode_fast(text: &str) -> Option<Event> {
    let mut f: scan::Fields = [None; scan::N_FIELDS];
    scan::scan(text.as_bytes(), &mut f)?;
    let f = &f;
    let span = |sp: scan::Span| text.get(sp.start as usize..sp.end as usize);
    let raw = |i: usize| -> Option<Option<&str>> {
        match f[i] {
            None => Some(None),
            Some(sp) => span(sp).map(Some),
        }
    };
    let string = |i: usize| -> Option<Option<String>> {
        match f[i] {
            None => Some(None),
            Some(sp) if !sp.escaped => span(sp).map(|s| Some(s.to_owned())),
            // Rare enough to hand to serde_json itself, quotes included: its unescaping is
            // then the wire struct's by construction.
            Some(sp) => {
                let quoted = text.get((sp.start as usize).checked_sub(1)?..sp.end as usize + 1)?;
                serde_json::from_str::<String>(quoted).ok().map(Some)
            }
        }
    };
    let json_text = |i: usize| raw(i).map(|r| r.map(JsonText::scanned));
    let u64_field = |i: usize, name: &'static str| -> Option<Option<u64>> {
        match raw(i)? {
            None => Some(None),
            Some(r) => parse_u64_text(r, name).ok().map(Some),
        }
    };
    let f64_field = |i: usize| -> Option<Option<f64>> {
        match raw(i)? {
            None => Some(None),
            Some(r) => non_negative_f64(r).map(Some),
        }
    };
    let bool_field = |i: usize| -> Option<Option<bool>> {
        match raw(i)? {
            None => Some(None),
            Some("true") => Some(Some(true)),
            Some("false") => Some(Some(false)),
            Some(_) => None,
        }
    };

    if raw(scan::V)?? != "1" {
        return None;
    }
    let kind_owned;
    let kind = match f[scan::KIND]? {
        sp if !sp.escaped => span(sp)?,
        _ => {
            kind_owned = string(scan::KIND)??;
            kind_owned.as_str()
        }
    };
    let key = RunKey {
        project_id: non_empty(string(scan::PROJECT_ID)?, "project_id").ok()?,
        run_id: non_empty(string(scan::RUN_ID)?, "run_id").ok()?,
    };
    let ts_ms = parse_ts_text(raw(scan::TS)??).ok()?;
    let event = match kind {
        "run_started" => Event::RunStarted(RunStarted {
            key,
            ts_ms,
            agent_name: non_empty(string(scan::AGENT_NAME)?, "agent_name").ok()?,
            input: string(scan::INPUT)?,
            metadata: json_text(scan::METADATA)?,
        }),
        "step" => Event::Step(Step {
            key,
            ts_ms,
            step_index: parse_u64_text(raw(scan::STEP_INDEX)??, "step_index").ok()?,
            step_type: non_empty(string(scan::STEP_TYPE)?, "step_type").ok()?,
            content: string(scan::CONTENT)?,
            tool_name: opt_id(string(scan::TOOL_NAME)?, "tool_name").ok()?,
            tool_input: json_text(scan::TOOL_INPUT)?,
            tool_output: json_text(scan::TOOL_OUTPUT)?,
            tool_success: bool_field(scan::TOOL_SUCCESS)?,
            tool_latency_ms: f64_field(scan::TOOL_LATENCY_MS)?,
            tokens: u64_field(scan::TOKENS, "tokens")?,
            cost_usd: f64_field(scan::COST_USD)?,
            tokens_in_context: u64_field(scan::TOKENS_IN_CONTEXT, "tokens_in_context")?,
            agent: opt_id(string(scan::AGENT)?, "agent").ok()?,
            caller: opt_id(string(scan::CALLER)?, "caller").ok()?,
            metadata: json_text(scan::METADATA)?,
        }),
        "run_finished" => {
            let status = match string(scan::STATUS)??.as_str() {
                "completed" => RunStatus::Completed,
                "failed" => RunStatus::Failed,
                _ => return None,
            };
            let termination_reason = match string(scan::TERMINATION_REASON)? {
                None => None,
                Some(r) => Some(termination_reason(&r)?),
            };
            Event::RunFinished(RunFinished {
                key,
                ts_ms,
                status,
                termination_reason,
                output: string(scan::OUTPUT)?,
                reported_loop_detected: bool_field(scan::REPORTED_LOOP_DETECTED)?,
                reported_loop_step_index: u64_field(
                    scan::REPORTED_LOOP_STEP_INDEX,
                    "reported_loop_step_index",
                )?,
                reported_totals: match raw(scan::REPORTED_TOTALS)? {
                    None => None,
                    Some(r) => Some(reported_totals(r)?),
                },
            })
        }
        _ => return None,
    };
    Some(event)
}

fn utf8(bytes: &[u8]) -> Result<&str, DecodeError> {
    if bytes.is_empty() {
        return Err(DecodeError::EmptyPayload);
    }
    // The SIMD check says only valid or not; std's says where it breaks, for the reason.
    match simdutf8::basic::from_utf8(bytes) {
        Ok(t) => Ok(t),
        Err(_) => match std::str::from_utf8(bytes) {
            Ok(t) => Ok(t),
            Err(e) => Err(DecodeError::InvalidUtf8(e.valid_up_to())),
        },
    }
}

/// The reference decoder: everything the fast path declines, and every error, comes from here.
fn decode_serde(bytes: &[u8], text: &str) -> Result<Event, DecodeError> {
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

fn non_empty(v: Option<String>, field: &'static str) -> Result<String, DecodeError> {
    match v {
        Some(s) if s.len() > MAX_ID_BYTES => Err(too_long(field, s.len())),
        Some(s) if !s.is_empty() => Ok(s),
        Some(_) => Err(DecodeError::InvalidField {
            field,
            why: "must not be empty".into(),
        }),
        None => Err(DecodeError::MissingField(field)),
    }
}

fn too_long(field: &'static str, len: usize) -> DecodeError {
    DecodeError::InvalidField {
        field,
        why: format!("{len} bytes, longer than {MAX_ID_BYTES}"),
    }
}

/// An optional identifier: empty means absent; too long is rejected.
fn opt_id(v: Option<String>, field: &'static str) -> Result<Option<String>, DecodeError> {
    match v {
        Some(s) if s.len() > MAX_ID_BYTES => Err(too_long(field, s.len())),
        Some(s) if s.is_empty() => Ok(None),
        other => Ok(other),
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

fn non_negative_f64(raw: &str) -> Option<f64> {
    if let Some(x) = plain_decimal(raw.as_bytes()) {
        return Some(x);
    }
    serde_json::from_str::<f64>(raw)
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
}

fn reported_totals(raw: &str) -> Option<ReportedTotals> {
    serde_json::from_str::<ReportedTotals>(raw)
        .ok()
        .filter(|t| t.total_cost_usd.is_none_or(|c| c.is_finite() && c >= 0.0))
}

/// A reason an agent may report (`evicted` is eddy's own).
fn termination_reason(r: &str) -> Option<TerminationReason> {
    serde_json::from_value::<TerminationReason>(serde_json::Value::String(r.to_string()))
        .ok()
        .filter(|r| *r != TerminationReason::Evicted)
}

fn parse_u64(raw: &RawValue, field: &'static str) -> Result<u64, DecodeError> {
    parse_u64_text(raw.get(), field)
}

fn parse_u64_text(raw: &str, field: &'static str) -> Result<u64, DecodeError> {
    if let Some(n) = plain_u64(raw.as_bytes()) {
        return Ok(n);
    }
    let s = raw.trim();
    if let Ok(n) = s.parse::<u64>() {
        return Ok(n);
    }
    // Some producers serialise integers as floats (`3.0`); accept exact integral values only.
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f < 9.0e15 => Ok(f as u64),
        _ => Err(DecodeError::InvalidField {
            field,
            why: format!("expected a non-negative integer, got {}", truncate(raw, 64)),
        }),
    }
}

/// Up to 19 ASCII digits, nothing else: the usual integer field, read without `str::parse`'s
/// sign and overflow handling (19 digits cannot overflow a `u64`). `None`: let the general
/// parse decide.
fn plain_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n * 10 + u64::from(d);
    }
    Some(n)
}

/// Powers of ten that are exact in an `f64`, up to the largest [`plain_decimal`] divides by.
const EXACT_POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// `ddd` or `ddd.ddd` with at most 15 digits in all (the usual cost or latency), as the
/// correctly rounded `f64` that serde_json (with `float_roundtrip`) also returns: the digits as
/// an integer below 2^53 and the power of ten are both exact, so their one division rounds
/// correctly. `None`: anything else, for the general parse.
fn plain_decimal(b: &[u8]) -> Option<f64> {
    let (mut m, mut digits, mut frac, mut dot) = (0u64, 0usize, 0usize, false);
    for (i, &c) in b.iter().enumerate() {
        if c == b'.' {
            if dot || i == 0 || i + 1 == b.len() {
                return None;
            }
            dot = true;
            continue;
        }
        let d = c.wrapping_sub(b'0');
        if d > 9 || digits == 15 {
            return None;
        }
        m = m * 10 + u64::from(d);
        digits += 1;
        frac += usize::from(dot);
    }
    if digits == 0 {
        return None;
    }
    // A u64 below 10^15 converts exactly.
    Some(m as f64 / *EXACT_POW10.get(frac)?)
}

/// `ts` is RFC 3339 (any offset, stored as UTC) or integer epoch milliseconds.
pub fn parse_ts(raw: &RawValue) -> Result<i64, DecodeError> {
    parse_ts_text(raw.get())
}

fn parse_ts_text(raw: &str) -> Result<i64, DecodeError> {
    let s = raw.trim();
    let bad = |why: String| DecodeError::InvalidField { field: "ts", why };
    if s.starts_with('"') {
        let text: String = serde_json::from_str(s).map_err(|e| bad(e.to_string()))?;
        let dt = OffsetDateTime::parse(&text, &Rfc3339)
            .map_err(|e| bad(format!("`{}` is not RFC 3339: {e}", truncate(&text, 64))))?;
        let ms = dt.unix_timestamp_nanos() / 1_000_000;
        match i64::try_from(ms) {
            Ok(ms) if (0..=MAX_TS_MS).contains(&ms) => Ok(ms),
            _ => Err(bad(format!(
                "`{}` is outside 1970-01-01 .. 9999-12-31",
                truncate(&text, 64)
            ))),
        }
    } else {
        let ms = parse_u64_text(raw, "ts").map_err(|_| {
            bad(format!(
                "expected RFC 3339 text or epoch milliseconds, got {}",
                truncate(s, 64)
            ))
        })?;
        match i64::try_from(ms) {
            Ok(ms) if ms <= MAX_TS_MS => Ok(ms),
            _ => Err(bad(format!(
                "{ms} ms is after 9999-12-31 (epoch milliseconds expected)"
            ))),
        }
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Format epoch milliseconds as RFC 3339 UTC with millisecond precision.
pub fn format_ts(ms: i64) -> String {
    if (0..=MAX_TS_MS).contains(&ms) {
        return format_ts_civil(ms);
    }
    format_ts_time(ms)
}

/// [`format_ts`] of a time from 1970 to year 9999, computed directly (days to civil date, as in
/// H. Hinnant's `civil_from_days`): it runs for every output event, and the `time` crate's
/// general formatter cost more than the rest of building one.
fn format_ts_civil(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let mut b = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut v: i64| {
        for i in (at..at + width).rev() {
            b[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, month);
    put(8, 2, day);
    put(11, 2, rem / 3_600_000);
    put(14, 2, rem / 60_000 % 60);
    put(17, 2, rem / 1000 % 60);
    put(20, 3, rem % 1000);
    b.iter().map(|&c| char::from(c)).collect()
}

/// [`format_ts`] by the `time` crate: any instant it can represent.
fn format_ts_time(ms: i64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    match OffsetDateTime::from_unix_timestamp_nanos(nanos) {
        Ok(dt) => {
            let fmt = time::macros::format_description!(
                "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
            );
            dt.format(&fmt).unwrap_or_else(|_| ms.to_string())
        }
        Err(_) => ms.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both paths give a payload's text as it arrived, without the whitespace around it, and
    /// only valid JSON becomes a `JsonText`.
    #[test]
    fn payload_text_is_kept_as_it_arrived() {
        let text = r#"{"q" : [1, "a\u00e9"] }"#;
        let msg = format!(
            r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1,"step_index":1,"step_type":"tool_call","tool_name":"t","tool_input": {text} }}"#
        );
        let fast = decode_fast(&msg).expect("the fast path takes it");
        let slow = decode_serde(msg.as_bytes(), &msg).expect("serde takes it");
        for e in [fast, slow] {
            let Event::Step(s) = e else {
                panic!("not a step")
            };
            assert_eq!(s.tool_input.as_ref().map(JsonText::get), Some(text));
        }
        assert_eq!(
            JsonText::parse(" [1] \n").map(|j| j.get().to_owned()).ok(),
            Some("[1]".into())
        );
        for bad in ["", "{", "[1,]", "\"a", "1 2", "{\"a\":\"\\x\"}"] {
            assert!(JsonText::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn civil_timestamps_are_the_time_crate_s() {
        let mut ms: i64 = 0;
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let fixed = [
            0,
            1,
            999,
            86_399_999,
            86_400_000,
            951_782_400_000,   // 2000-02-29
            4_107_542_400_000, // 2100-03-01
            1_767_225_600_000,
            MAX_TS_MS,
        ];
        for &f in &fixed {
            assert_eq!(format_ts_civil(f), format_ts_time(f), "{f}");
        }
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ms = (ms + (x % 400_000_000_000) as i64) % (MAX_TS_MS + 1);
            assert_eq!(format_ts_civil(ms), format_ts_time(ms), "{ms}");
            assert_eq!(format_ts(ms), format_ts_time(ms), "{ms}");
        }
        assert_eq!(format_ts(-1), format_ts_time(-1));
        assert_eq!(format_ts(MAX_TS_MS + 1), format_ts_time(MAX_TS_MS + 1));
    }

    #[test]
    fn decodes_a_step_and_keeps_raw_input_bytes() {
        let msg = br#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":"2026-01-02T03:04:05.678+01:00","step_index":3,"step_type":"tool_call","tool_name":"web_search","tool_input":{"q":"keelwave","limit":5},"unknown_future_field":[1,2]}"#;
        let Event::Step(s) = decode(msg).expect("valid step") else {
            panic!("not a step")
        };
        assert_eq!(s.step_index, 3);
        assert_eq!(
            s.tool_input.as_ref().map(|r| r.get()),
            Some(r#"{"q":"keelwave","limit":5}"#)
        );
        // 03:04:05.678+01:00 is 02:04:05.678 UTC.
        assert_eq!(format_ts(s.ts_ms), "2026-01-02T02:04:05.678Z");
    }

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

    /// Wherever the shortcut answers, it answers as `str::parse` does; it declines the rest.
    #[test]
    fn plain_u64_agrees_with_str_parse() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut cases: Vec<String> = [
            "",
            "0",
            "00",
            "007",
            "9",
            "+1",
            "-0",
            " 1",
            "1 ",
            "1.0",
            "1e3",
            "a",
            "١",
            "9999999999999999999",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push((x >> (x % 64)).to_string());
            cases.push(format!("{}", x % 1000));
        }
        for c in &cases {
            match plain_u64(c.as_bytes()) {
                Some(n) => assert_eq!(c.parse::<u64>().ok(), Some(n), "{c:?}"),
                None => assert!(
                    c.len() > 19 || !c.bytes().all(|b| b.is_ascii_digit()) || c.is_empty(),
                    "declined {c:?}"
                ),
            }
        }
        assert_eq!(
            plain_u64(b"9999999999999999999"),
            Some(9_999_999_999_999_999_999)
        );
        assert_eq!(plain_u64(b"18446744073709551615"), None);
    }

    /// Wherever the shortcut answers, it answers as serde_json does, bit for bit.
    #[test]
    fn plain_decimal_agrees_with_serde_json() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut cases: Vec<String> = [
            "0",
            "0.0",
            "0.5",
            "1",
            "350",
            "0.0021",
            "0.1",
            "0.3",
            "2.675",
            "123456789012345",
            "1234567890123456",
            "12345678.9012345",
            "1.234567890123456",
            "999999999999999",
            "0.000000000000001",
            "9007199254740993",
            "1.",
            ".5",
            "1..2",
            "1.2.3",
            "-1",
            "1e3",
            "",
            ".",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = (x % 10_u64.pow(1 + (x >> 40) as u32 % 16)).to_string();
            let at = (x >> 20) as usize % (digits.len() + 1);
            cases.push(digits.clone());
            if at > 0 && at < digits.len() {
                cases.push(format!("{}.{}", &digits[..at], &digits[at..]));
            }
            cases.push(format!("0.{digits}"));
        }
        let mut answered = 0;
        for c in &cases {
            if let Some(v) = plain_decimal(c.as_bytes()) {
                answered += 1;
                let want: f64 = serde_json::from_str(c).expect(c);
                assert_eq!(v.to_bits(), want.to_bits(), "{c}");
            }
        }
        assert!(answered > cases.len() / 2, "{answered} of {}", cases.len());
        for declined in ["1234567890123456", "1.", ".5", "1..2", "-1", "1e3", "", "."] {
            assert_eq!(plain_decimal(declined.as_bytes()), None, "{declined}");
        }
    }

    #[test]
    fn epoch_millis_and_rfc3339_agree() {
        let a = decode(br#"{"v":1,"kind":"run_started","project_id":"p","run_id":"r","ts":1767225600000,"agent_name":"a"}"#).unwrap();
        let b = decode(br#"{"v":1,"kind":"run_started","project_id":"p","run_id":"r","ts":"2026-01-01T00:00:00Z","agent_name":"a"}"#).unwrap();
        assert_eq!(a.ts_ms(), b.ts_ms());
    }

    #[test]
    fn run_finished_carries_what_the_agent_reported() {
        let msg = br#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1,"status":"completed","reported_loop_detected":true,"reported_loop_step_index":1,"reported_totals":{"total_steps":7,"total_tokens":5120,"total_cost_usd":0.0132,"duration_ms":8312}}"#;
        let Event::RunFinished(f) = decode(msg).expect("valid run_finished") else {
            panic!("not a run_finished")
        };
        assert_eq!(f.reported_loop_detected, Some(true));
        assert_eq!(f.reported_loop_step_index, Some(1));
        let t = f.reported_totals.expect("totals");
        assert_eq!((t.total_steps, t.total_tokens), (Some(7), Some(5120)));
        assert_eq!(
            (t.total_cost_usd, t.duration_ms),
            (Some(0.0132), Some(8312))
        );
        // Absent means not reported, never false.
        let Event::RunFinished(f) = decode(br#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1,"status":"failed"}"#).unwrap() else {
            panic!("not a run_finished")
        };
        assert_eq!(f.reported_loop_detected, None);
        assert!(f.reported_totals.is_none());
        let bad = decode(br#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1,"status":"failed","reported_loop_detected":"yes"}"#);
        assert_eq!(bad.unwrap_err().reason(), "invalid_field");
    }

    #[test]
    fn rejections_carry_precise_reasons() {
        let cases: &[(&[u8], &str)] = &[
            (b"{not json", "invalid_json"),
            (b"[1,2]", "not_an_object"),
            (br#"{"kind":"step"}"#, "missing_version"),
            (br#"{"v":2,"kind":"step"}"#, "unsupported_version"),
            (br#"{"v":1}"#, "missing_kind"),
            (br#"{"v":1,"kind":"nope","project_id":"p","run_id":"r","ts":1}"#, "unknown_kind"),
            (br#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1,"step_type":"x"}"#, "missing_field"),
            (br#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":"yesterday","step_index":1,"step_type":"x"}"#, "invalid_field"),
            (br#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1,"step_index":-1,"step_type":"x"}"#, "invalid_field"),
            (br#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1,"status":"maybe"}"#, "invalid_field"),
            (br#"{"v":1,"kind":"step","project_id":5,"run_id":"r","ts":1}"#, "invalid_field"),
        ];
        for (msg, reason) in cases {
            let err = decode(msg).expect_err(&String::from_utf8_lossy(msg));
            assert_eq!(err.reason(), *reason, "{}", String::from_utf8_lossy(msg));
        }
    }

    /// The decoder as it was before the fast path: the reference every test compares with.
    fn reference(bytes: &[u8]) -> Result<Event, DecodeError> {
        utf8(bytes).and_then(|text| decode_serde(bytes, text))
    }

    /// The fast path either declines or agrees with the reference, and `decode` as a whole
    /// returns exactly the reference's result. Returns whether the fast path accepted.
    fn check_against_reference(bytes: &[u8]) -> bool {
        let want = format!("{:?}", reference(bytes));
        let fast = std::str::from_utf8(bytes).ok().and_then(decode_fast);
        let accepted = fast.is_some();
        if let Some(ev) = fast {
            let got = format!("{:?}", Ok::<_, DecodeError>(ev));
            assert_eq!(
                got,
                want,
                "fast path differs on {}",
                String::from_utf8_lossy(bytes)
            );
        }
        assert_eq!(
            format!("{:?}", decode(bytes)),
            want,
            "decode differs on {}",
            String::from_utf8_lossy(bytes)
        );
        accepted
    }

    /// Ordinary simulator traffic must take the fast path: a silent fallback on the common
    /// case would keep every result right and lose the speed.
    #[test]
    fn fast_path_takes_every_simulator_event() {
        let args = crate::simulate::SimulateArgs {
            runs: 300,
            loop_rate: 0.3,
            seed: 11,
            projects: 3,
            start_ms: 1_767_225_600_000,
            out: None,
            unfinished_rate: 0.1,
            ..Default::default()
        };
        let lines = crate::simulate::generate(&args);
        assert!(lines.len() > 1000);
        for (_, _, line) in &lines {
            assert!(
                check_against_reference(line.as_bytes()),
                "fast path declined a simulator event: {line}"
            );
        }
    }

    #[test]
    fn fast_path_takes_the_common_shapes() {
        let accepted: &[&str] = &[
            r#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":"2026-01-02T03:04:05.678+01:00","step_index":3,"step_type":"tool_call","tool_name":"web_search","tool_input":{"q":"keelwave","limit":5},"unknown_future_field":[1,2]}"#,
            " {\n \"v\" : 1 ,\t\"kind\":\"run_started\",\"project_id\":\"p\",\"run_id\":\"r\",\"ts\":1,\"agent_name\":\"a\",\"input\":\"line\\none \\\"q\\\" \\u00e9\",\"metadata\":null}\r\n",
            r#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1,"status":"completed","termination_reason":"loop_detected","reported_loop_detected":true,"reported_loop_step_index":1,"reported_totals":{"total_steps":7,"total_cost_usd":0.0132}}"#,
            r#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":5,"step_index":2.0,"step_type":"llm","tool_success":null,"cost_usd":1e-3,"tokens":12,"agent":"","content":"é😀"}"#,
        ];
        for msg in accepted {
            assert!(check_against_reference(msg.as_bytes()), "declined: {msg}");
        }
    }

    /// Inputs on the edge of what serde accepts: each must come out exactly as before, whatever
    /// path takes it.
    #[test]
    fn fast_path_edge_cases_match_the_reference() {
        let ok =
            r#""v":1,"kind":"run_started","project_id":"p","run_id":"r","ts":1,"agent_name":"a""#;
        let cases: Vec<String> = vec![
            format!("{{{ok}}}"),
            format!("{{{ok}}} x"),
            format!("{{{ok}}}{{}}"),
            format!("{{{ok},}}"),
            format!("{{{ok}"),
            format!("\u{feff}{{{ok}}}"),
            format!("{{{ok}}}\u{a0}"),
            format!("{{{ok}}}\x0b"),
            format!("[{ok}]"),
            format!("{{{ok},\"agent_name\":\"b\"}}"),
            format!("{{{ok},\"agent_name\":null}}"),
            format!("{{{ok},\"k\\u0069nd\":\"step\"}}"),
            format!("{{{ok},\"content\":\"\\ud800\"}}"),
            format!("{{{ok},\"content\":\"\\udc00\\ud800\"}}"),
            format!("{{{ok},\"content\":\"\\ud83d\\ude00\"}}"),
            format!("{{{ok},\"x\":\"\\ud800\"}}"),
            format!("{{{ok},\"metadata\":\"\\ud800\"}}"),
            format!("{{{ok},\"metadata\":\"a\u{1}b\"}}"),
            format!("{{{ok},\"input\":\"a\u{1f}b\"}}"),
            format!("{{{ok},\"input\":\"\\x\"}}"),
            format!("{{{ok},\"input\":\"\\u12g4\"}}"),
            format!("{{{ok},\"input\":5}}"),
            format!("{{{ok},\"tool_success\":\"yes\"}}"),
            format!("{{{ok},\"x\":01}}"),
            format!("{{{ok},\"x\":1.}}"),
            format!("{{{ok},\"x\":-}}"),
            format!("{{{ok},\"x\":.5}}"),
            format!("{{{ok},\"x\":nul}}"),
            format!("{{{ok},\"x\":[1,]}}"),
            format!("{{{ok},\"x\":{{\"a\" 1}}}}"),
            format!("{{{ok},\"x\":{}}}", "[".repeat(63) + &"]".repeat(63)),
            format!("{{{ok},\"x\":{}}}", "[".repeat(64) + &"]".repeat(64)),
            format!("{{{ok},\"metadata\":{}}}", "{\"a\":".repeat(63) + "1" + &"}".repeat(63)),
            format!("{{{ok},\"metadata\":{}}}", "{\"a\":".repeat(64) + "1" + &"}".repeat(64)),
            r#"{"v":1.0,"kind":"run_started","project_id":"p","run_id":"r","ts":1,"agent_name":"a"}"#.into(),
            r#"{"v":"1","kind":"run_started","project_id":"p","run_id":"r","ts":1,"agent_name":"a"}"#.into(),
            r#"{"v":1,"kind":"st\u0065p","project_id":"p","run_id":"r","ts":-0,"step_index":18446744073709551616,"step_type":"x"}"#.into(),
            r#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1e3,"step_index":1E+2,"step_type":"x","tokens_in_context":-0,"tool_latency_ms":-0.0,"cost_usd":123456789012345678901234567890}"#.into(),
            r#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1,"status":"completed","termination_reason":"evicted"}"#.into(),
            r#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1,"status":"failed","reported_totals":{"total_cost_usd":-1}}"#.into(),
            format!("{{\"v\":1,\"kind\":\"step\",\"project_id\":\"{}\",\"run_id\":\"r\",\"ts\":1,\"step_index\":1,\"step_type\":\"x\"}}", "p".repeat(MAX_ID_BYTES + 1)),
            "{}".into(),
            " ".into(),
            "".into(),
            "null".into(),
        ];
        for c in &cases {
            check_against_reference(c.as_bytes());
        }
        let mut bad_utf8 = format!("{{{ok},\"input\":\"ab\"}}").into_bytes();
        let at = bad_utf8.len() - 3;
        bad_utf8[at] = 0xff;
        check_against_reference(&bad_utf8);
    }

    mod differential {
        use super::*;
        use proptest::prelude::*;
        use proptest::sample::select;

        const KEYS: &[&str] = &scan::FIELD_NAMES;

        /// Values a field may plausibly hold, good and bad, as JSON text.
        fn good_values(key: &str) -> Vec<&'static str> {
            match key {
                "v" => vec!["1", "1", "2", "1.0", "\"1\""],
                "kind" => vec![
                    "\"run_started\"",
                    "\"step\"",
                    "\"run_finished\"",
                    "\"st\\u0065p\"",
                    "\"nope\"",
                ],
                "ts" => vec![
                    "1767225601081",
                    "\"2026-01-02T03:04:05.678+01:00\"",
                    "\"2026-01-02T03:04:05Z\"",
                    "\"yesterday\"",
                    "253402300799999",
                    "253402300800000",
                    "1.5",
                    "1e3",
                    "-0",
                ],
                "step_index" | "tokens" | "tokens_in_context" | "reported_loop_step_index" => vec![
                    "0", "3", "2.0", "-1", "1e2", "18446744073709551615", "18446744073709551616",
                    "9007199254740993.0", "0.5",
                ],
                "tool_latency_ms" | "cost_usd" => vec![
                    "0.0021", "350", "-0", "-0.0", "1e400", "-1", "0.1e-2", "1.7976931348623157e308",
                    "2.2250738585072011e-308", "123456789012345678901234567890",
                ],
                "tool_success" | "reported_loop_detected" => vec!["true", "false", "\"true\"", "1"],
                "status" => vec!["\"completed\"", "\"failed\"", "\"maybe\""],
                "termination_reason" => vec![
                    "\"clean\"", "\"loop_detected\"", "\"timeout\"", "\"evicted\"", "\"Clean\"",
                ],
                "reported_totals" => vec![
                    "{\"total_steps\":7,\"total_tokens\":5120,\"total_cost_usd\":0.0132,\"duration_ms\":8312}",
                    "{\"total_cost_usd\":-1}",
                    "{\"total_steps\":1,\"total_steps\":2}",
                    "{}",
                ],
                "metadata" | "tool_input" | "tool_output" => vec![
                    "{\"path\":\"src/mod1.rs\"}",
                    "{\"bytes\":1001}",
                    "[1, {\"a\" : [true,false,null]}]",
                    "\"s\\ud800\"",
                    "{\"k\\\"ey\":\"\\u00e9\\n\"}",
                ],
                _ => vec![
                    "\"proj-0\"",
                    "\"run-0fca6d76dee06510\"",
                    "\"tool_call\"",
                    "\"\"",
                    "\"proj\\u002d0\"",
                    "\"line\\nbreak \\\"q\\\" \\\\ \\/ \\t\"",
                    "\"é😀\"",
                    "\"\\ud83d\\ude00\"",
                    "\"\\ud800\"",
                ],
            }
        }

        fn any_value() -> impl Strategy<Value = String> {
            let leaf = select(vec![
                "null",
                "true",
                "false",
                "nul",
                "tru",
                "0",
                "1",
                "-0",
                "01",
                "1.",
                ".5",
                "-",
                "1e3",
                "1E+2",
                "2.5e-3",
                "-12.75",
                "18446744073709551616",
                "\"\"",
                "\"plain\"",
                "\"é😀\"",
                "\"\\u00e9\"",
                "\"\\\"\"",
                "\"\\\\\"",
                "\"\\/\\b\\f\\n\\r\\t\"",
                "\"\\ud83d\\ude00\"",
                "\"\\ud800\"",
                "\"\\udc00x\"",
                "\"\\ud83dx\"",
                "\"\\u12G4\"",
                "\"\\q\"",
                "\"a\u{1}b\"",
                "\"a\u{7f}b\"",
                "\"unterminated",
            ])
            .prop_map(String::from);
            leaf.prop_recursive(4, 24, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4)
                        .prop_map(|v| format!("[{}]", v.join(","))),
                    prop::collection::vec((select(vec!["a", "b", "k\\\"", ""]), inner), 0..4)
                        .prop_map(|v| {
                            let body: Vec<String> =
                                v.iter().map(|(k, x)| format!("\"{k}\": {x}")).collect();
                            format!("{{{}}}", body.join(","))
                        }),
                ]
            })
        }

        fn key_text() -> impl Strategy<Value = String> {
            prop_oneof![
                8 => select(KEYS).prop_map(|k| format!("\"{k}\"")),
                1 => select(vec!["\"unknown\"", "\"\"", "\"V\"", "\"k\\u0069nd\"", "\"ts\\n\"", "\"\\ud800\""])
                    .prop_map(String::from),
            ]
        }

        fn ws() -> impl Strategy<Value = &'static str> {
            prop_oneof![
                // Not JSON whitespace: rare, since one spoils the whole message.
                300 => Just(""),
                100 => select(vec![" ", "\n", "\t", "\r", " \n\t\r "]),
                1 => select(vec!["\u{a0}", "\x0b", "\x0c"]),
            ]
        }

        /// A JSON object mostly like a real event: the required fields of a kind with values from
        /// [`good_values`], random other fields, some dropped, duplicated or given other values,
        /// whitespace anywhere, and sometimes damage to the whole text.
        fn message() -> impl Strategy<Value = Vec<u8>> {
            let fields = prop::collection::vec(
                (
                    select(KEYS),
                    any::<prop::sample::Index>(),
                    prop::option::weighted(0.05, any_value()),
                    prop::option::weighted(0.04, key_text()),
                ),
                4..22,
            );
            let kind = select(vec!["run_started", "step", "run_finished"]);
            (
                kind,
                fields,
                prop::collection::vec(ws(), 200),
                0u8..32,
                any::<prop::sample::Index>(),
            )
                .prop_map(|(kind, fields, spaces, damage, cut)| {
                    let mut entries: Vec<(String, String)> = vec![
                        ("\"v\"".into(), "1".into()),
                        ("\"kind\"".into(), format!("\"{kind}\"")),
                        ("\"project_id\"".into(), "\"proj-0\"".into()),
                        ("\"run_id\"".into(), "\"run-1\"".into()),
                        ("\"ts\"".into(), "1767225601081".into()),
                    ];
                    match kind {
                        "run_started" => {
                            entries.push(("\"agent_name\"".into(), "\"coder\"".into()))
                        }
                        "step" => {
                            entries.push(("\"step_index\"".into(), "1".into()));
                            entries.push(("\"step_type\"".into(), "\"tool_call\"".into()));
                        }
                        _ => entries.push(("\"status\"".into(), "\"completed\"".into())),
                    }
                    for (key, pick, other, key_override) in fields {
                        let value = other.unwrap_or_else(|| {
                            // The first value is a good one; it gets two thirds of the picks.
                            let vals = good_values(key);
                            vals.get(pick.index(3 * vals.len()))
                                .unwrap_or(&vals[0])
                                .to_string()
                        });
                        let key = key_override.unwrap_or_else(|| format!("\"{key}\""));
                        match entries.iter_mut().find(|(k, _)| *k == key) {
                            // Usually replace, so that duplicates stay a minority.
                            Some(e) if pick.index(29) != 0 => e.1 = value,
                            _ => entries.push((key, value)),
                        }
                    }
                    if damage == 1 && entries.len() > 1 {
                        let i = cut.index(entries.len());
                        entries.remove(i);
                    }
                    let mut sp = spaces.into_iter().cycle();
                    let mut out = String::new();
                    out.push_str(sp.next().unwrap_or_default());
                    out.push('{');
                    for (i, (k, v)) in entries.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        out.push_str(sp.next().unwrap_or_default());
                        out.push_str(k);
                        out.push_str(sp.next().unwrap_or_default());
                        out.push(':');
                        out.push_str(sp.next().unwrap_or_default());
                        out.push_str(v);
                        out.push_str(sp.next().unwrap_or_default());
                    }
                    out.push('}');
                    out.push_str(sp.next().unwrap_or_default());
                    let mut bytes = out.into_bytes();
                    match damage {
                        2 => bytes.truncate(cut.index(bytes.len() + 1)),
                        3 => bytes.extend_from_slice(b"x"),
                        4 => bytes.extend_from_slice(b"{}"),
                        5 => {
                            let i = cut.index(bytes.len());
                            bytes[i] = 0xff;
                        }
                        6 => {
                            bytes.splice(0..0, b"\xEF\xBB\xBF".iter().copied());
                        }
                        7 => {
                            let d = 60 + cut.index(10);
                            let deep = format!("{}{}", "[".repeat(d), "]".repeat(d));
                            let at = bytes.len()
                                - 1
                                - bytes.iter().rev().take_while(|b| **b != b'}').count();
                            bytes.splice(at..at, format!(",\"x\":{deep}").into_bytes());
                        }
                        _ => {}
                    }
                    bytes
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4000))]
            #[test]
            fn fast_path_agrees_with_serde(msg in message()) {
                check_against_reference(&msg);
            }
        }

        /// The generator must reach both sides, or the test above proves little.
        #[test]
        fn generator_reaches_both_paths() {
            use proptest::strategy::ValueTree;
            let mut runner = proptest::test_runner::TestRunner::deterministic();
            let (mut fast, mut ok, mut total) = (0, 0, 0);
            for _ in 0..2000 {
                let msg = message().new_tree(&mut runner).map(|t| t.current());
                let Ok(msg) = msg else { continue };
                total += 1;
                fast += usize::from(check_against_reference(&msg));
                ok += usize::from(reference(&msg).is_ok());
            }
            eprintln!("fast path took {fast}, serde accepted {ok}, of {total}");
            assert!(fast > total / 10, "fast path took {fast} of {total}");
            assert!(
                ok > fast,
                "serde accepted {ok}, fast path {fast} of {total}"
            );
            assert!(ok < total * 9 / 10, "too few rejections: {ok} of {total}");
        }
    }
}
