//! The fast path of [`super::decode`]: builds the event from [`scan`]'s field spans without
//! serde, with the serde path's own field checks, and declines whatever it is not sure of.
//! Apart from the reference decoder so that each can be read, and held against the other,
//! on its own.
use super::checks::{non_empty, opt_id, reported_totals, termination_reason};
use super::number::{non_negative_f64, parse_u64_text};
use super::ts::parse_ts_text;
use super::types::{Event, JsonText, RunFinished, RunKey, RunStarted, RunStatus, Step};
use crate::contract::scan;

/// The fast path: `Some` only where
/// [`decode_serde`](super::serde_path::decode_serde) would return `Ok` with the same event.
///
/// [`scan`] admits only input on which serde would fill the wire struct without error and with
/// the same contents (strings unescaped alike, raw values with the same bytes); the checks
/// below are the serde path's own functions, and any of them failing declines rather than
/// reports, so that error texts have a single source.
pub(super) fn decode_fast(text: &str) -> Option<Event> {
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
            signal_event_id: opt_id(string(scan::SIGNAL_EVENT_ID)?, "signal_event_id").ok()?,
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
