//! The checks on single fields that both decoders apply, in one place so that the fast path
//! and the serde path accept and refuse alike.
use super::error::DecodeError;
use super::types::{ReportedTotals, TerminationReason};
use crate::contract::limits::MAX_ID_BYTES;

pub(super) fn non_empty(v: Option<String>, field: &'static str) -> Result<String, DecodeError> {
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
pub(super) fn opt_id(
    v: Option<String>,
    field: &'static str,
) -> Result<Option<String>, DecodeError> {
    match v {
        Some(s) if s.len() > MAX_ID_BYTES => Err(too_long(field, s.len())),
        Some(s) if s.is_empty() => Ok(None),
        other => Ok(other),
    }
}

pub(super) fn reported_totals(raw: &str) -> Option<ReportedTotals> {
    serde_json::from_str::<ReportedTotals>(raw)
        .ok()
        .filter(|t| t.total_cost_usd.is_none_or(|c| c.is_finite() && c >= 0.0))
}

/// A reason an agent may report (`evicted` is eddy's own).
pub(super) fn termination_reason(r: &str) -> Option<TerminationReason> {
    serde_json::from_value::<TerminationReason>(serde_json::Value::String(r.to_string()))
        .ok()
        .filter(|r| *r != TerminationReason::Evicted)
}

pub(super) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
