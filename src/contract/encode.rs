//! Encoding of input events: the inverse of [`super::decode`], for agents that produce them.
//!
//! `tool_input`, `tool_output` and `metadata` are written as the exact text they hold (keelwave's
//! fingerprint of record hashes those bytes, so a re-encoding would change it).
use super::input::{format_ts, Event, ReportedTotals, RunStatus, TerminationReason};
use serde::Serialize;
use serde_json::value::RawValue;

/// One v1 input event as it goes on the wire (`schemas/v1/input-event.schema.json`), borrowing
/// its text: the one writer of that shape, for [`encode`] and for the ingest bridge, which
/// builds it from keelwave's requests (their raw JSON kept byte for byte).
#[derive(Serialize, Default)]
pub(crate) struct WireEvent<'a> {
    pub(crate) v: u8,
    pub(crate) kind: &'static str,
    pub(crate) project_id: &'a str,
    pub(crate) run_id: &'a str,
    pub(crate) ts: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) agent_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) input: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) step_index: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) step_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_input: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_output: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_success: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_latency_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tokens_in_context: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) agent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) caller: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) signal_event_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<RunStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) termination_reason: Option<TerminationReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) output: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reported_loop_detected: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reported_loop_step_index: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reported_totals: Option<&'a ReportedTotals>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) metadata: Option<&'a RawValue>,
}

fn raw(t: Option<&super::JsonText>) -> Result<Option<&RawValue>, serde_json::Error> {
    t.map(|t| serde_json::from_str::<&RawValue>(t.get()))
        .transpose()
}

/// The v1 JSON of `event` (one Kafka message; its key is the run id).
pub(crate) fn encode(event: &Event) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&wire(event)?)
}

/// `event` in its wire shape.
fn wire(event: &Event) -> Result<WireEvent<'_>, serde_json::Error> {
    let key = event.key();
    let base = WireEvent {
        v: 1,
        project_id: &key.project_id,
        run_id: &key.run_id,
        ts: format_ts(event.ts_ms()),
        ..WireEvent::default()
    };
    let wire = match event {
        Event::RunStarted(e) => WireEvent {
            kind: "run_started",
            agent_name: Some(&e.agent_name),
            input: e.input.as_deref(),
            metadata: raw(e.metadata.as_ref())?,
            ..base
        },
        Event::Step(e) => WireEvent {
            kind: "step",
            step_index: Some(e.step_index),
            step_type: Some(&e.step_type),
            content: e.content.as_deref(),
            tool_name: e.tool_name.as_deref(),
            tool_input: raw(e.tool_input.as_ref())?,
            tool_output: raw(e.tool_output.as_ref())?,
            tool_success: e.tool_success,
            tool_latency_ms: e.tool_latency_ms,
            tokens: e.tokens,
            cost_usd: e.cost_usd,
            tokens_in_context: e.tokens_in_context,
            agent: e.agent.as_deref(),
            caller: e.caller.as_deref(),
            signal_event_id: e.signal_event_id.as_deref(),
            metadata: raw(e.metadata.as_ref())?,
            ..base
        },
        Event::RunFinished(e) => WireEvent {
            kind: "run_finished",
            status: Some(e.status),
            termination_reason: e.termination_reason,
            output: e.output.as_deref(),
            reported_loop_detected: e.reported_loop_detected,
            reported_loop_step_index: e.reported_loop_step_index,
            reported_totals: e.reported_totals.as_ref(),
            ..base
        },
    };
    Ok(wire)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{decode, JsonText, RunFinished, RunKey, RunStarted, Step};

    fn key() -> RunKey {
        RunKey {
            project_id: "p".into(),
            run_id: "r-1".into(),
        }
    }

    #[test]
    fn every_field_survives_a_round_trip() {
        let events = [
            Event::RunStarted(RunStarted {
                key: key(),
                ts_ms: 1_767_225_600_123,
                agent_name: "a".into(),
                input: Some("question é".into()),
                metadata: Some(JsonText::parse(r#"{"team": "x"}"#).unwrap()),
            }),
            Event::Step(Step {
                key: key(),
                ts_ms: 1_767_225_600_200,
                step_index: 3,
                step_type: "tool_call".into(),
                content: Some("c".into()),
                tool_name: Some("web_search".into()),
                tool_input: Some(JsonText::parse(r#"{"q":"x",  "n": 1.50}"#).unwrap()),
                tool_output: Some(JsonText::parse("[1,2]").unwrap()),
                tool_success: Some(false),
                tool_latency_ms: Some(12.5),
                tokens: Some(40),
                cost_usd: Some(0.25),
                tokens_in_context: Some(900),
                agent: Some("researcher".into()),
                caller: Some("planner".into()),
                metadata: None,
                signal_event_id: Some("0123456789abcdef0123456789abcdef".into()),
            }),
            Event::RunFinished(RunFinished {
                key: key(),
                ts_ms: 1_767_225_601_000,
                status: RunStatus::Failed,
                termination_reason: Some(TerminationReason::LoopDetected),
                output: Some("stopped".into()),
                reported_loop_detected: Some(true),
                reported_loop_step_index: Some(2),
                reported_totals: Some(ReportedTotals {
                    total_steps: Some(3),
                    total_tokens: None,
                    total_cost_usd: Some(0.5),
                    duration_ms: Some(877),
                }),
            }),
        ];
        for e in &events {
            let bytes = encode(e).unwrap();
            let back = decode(&bytes)
                .unwrap_or_else(|err| panic!("{err}: {}", String::from_utf8_lossy(&bytes)));
            assert_eq!(format!("{back:?}"), format!("{e:?}"));
        }
        // The raw text goes out byte for byte.
        let text = String::from_utf8(encode(&events[1]).unwrap()).unwrap();
        assert!(
            text.contains(r#""tool_input":{"q":"x",  "n": 1.50}"#),
            "{text}"
        );
    }
}
