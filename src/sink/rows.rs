//! Row encoders: one struct per table, field order = column order (RowBinary is positional;
//! columns added by a later migration come last in both).
use crate::contract::{OutputEvent, RunTerminated, Signal, Step};
use crate::engine::rollup::{Closed, UNCOUNTED};
use crate::engine::StepFingerprints;
use clickhouse::Row;
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

const ZERO_FP: [u8; 32] = [0; 32];

/// Where a row came from: its source partition and offset (the ReplacingMergeTree version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// The Kafka partition the step came from.
    pub partition: i32,
    /// Its offset there.
    pub offset: i64,
}

/// A row of the `steps` table.
#[derive(Debug, Clone, PartialEq, Row, Serialize, Deserialize)]
pub struct StepRow {
    pub(crate) project_id: String,
    pub(crate) run_id: String,
    pub(crate) step_index: u64,
    pub(crate) ts: u32,
    pub(crate) ts_ms: i64,
    pub(crate) step_type: String,
    pub(crate) agent: String,
    pub(crate) caller: String,
    pub(crate) tool_name: String,
    /// Fills `raw_fp`: keelwave's fingerprint of the raw input.
    pub raw_fp: [u8; 32],
    /// Fills `has_raw_fp`: 1 when `raw_fp` is set.
    pub has_raw_fp: u8,
    /// Fills `canonical_input_fp`.
    pub canonical_input_fp: [u8; 32],
    /// Fills `canonical_output_fp`.
    pub canonical_output_fp: [u8; 32],
    pub(crate) tool_success: i8,
    pub(crate) tool_latency_ms: f64,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
    pub(crate) tokens_in_context: u64,
    pub(crate) content_len: u32,
    pub(crate) src_partition: i32,
    pub(crate) src_offset: i64,
    /// Added by migration 3, so after the source columns, as in the table.
    pub(crate) signal_event_id: String,
}

/// A row of the `signals` table.
#[derive(Debug, Clone, PartialEq, Row, Serialize, Deserialize)]
pub struct SignalRow {
    pub(crate) event_id: String,
    pub(crate) kind: String,
    pub(crate) project_id: String,
    pub(crate) run_id: String,
    pub(crate) agent_name: String,
    pub(crate) step_index: u64,
    pub(crate) ts: u32,
    pub(crate) ts_ms: i64,
    pub(crate) detector: String,
    pub(crate) severity: String,
    pub(crate) pattern: String,
    pub(crate) fingerprint: String,
    pub(crate) hits: u32,
    pub(crate) step_indices: Vec<u64>,
    pub(crate) first_step_index: u64,
    pub(crate) evidence: String,
    pub(crate) src_partition: i32,
    pub(crate) src_offset: i64,
    pub(crate) advice: String,
}

/// A row of the `runs` table.
#[derive(Debug, Clone, PartialEq, Row, Serialize, Deserialize)]
pub struct RunRow {
    pub(crate) project_id: String,
    pub(crate) run_id: String,
    pub(crate) event_id: String,
    pub(crate) agent_name: String,
    pub(crate) started_at: u32,
    pub(crate) ended_at: u32,
    pub(crate) ended_ms: i64,
    pub(crate) status: String,
    pub(crate) termination_reason: String,
    pub(crate) termination_reason_reported: u8,
    pub(crate) loop_detected: u8,
    pub(crate) has_loop_step_index: u8,
    pub(crate) loop_step_index: u64,
    pub(crate) loop_caught_step_index: u64,
    pub(crate) signals: u32,
    pub(crate) redeliveries: u64,
    pub(crate) steps: u64,
    pub(crate) tool_calls: u64,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
    pub(crate) duration_ms: i64,
    pub(crate) src_partition: i32,
    pub(crate) src_offset: i64,
    pub(crate) steers: u32,
    pub(crate) has_steered_step_index: u8,
    pub(crate) steered_step_index: u64,
    pub(crate) steer_outcome: String,
    /// Added by migration 4: the loop's steps as step numbers (0: unknown).
    pub(crate) loop_step_number: u64,
    pub(crate) loop_caught_step_number: u64,
}

/// One run's contribution to one minute (`rollup_minute`).
#[derive(Debug, Clone, PartialEq, Row, Serialize, Deserialize)]
pub struct RollupRow {
    pub(crate) project_id: String,
    pub(crate) bucket: u32,
    pub(crate) run_id: String,
    pub(crate) agent_name: String,
    pub(crate) runs_started: u8,
    pub(crate) runs_ended: u8,
    pub(crate) loop_runs: u8,
    pub(crate) termination_reason: String,
    pub(crate) steps: u32,
    pub(crate) tool_calls: u32,
    pub(crate) errors: u32,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
    pub(crate) loop_steps: u32,
    pub(crate) loop_cost_usd: f64,
    pub(crate) loops_caught: u8,
    pub(crate) caught_after_steps: u64,
    pub(crate) src_partition: i32,
    pub(crate) src_offset: i64,
    /// Added by migration 4: 1 when the loop caught in this minute had its steps counted, and
    /// the count (see 0004_step_numbers.sql).
    pub(crate) loops_counted: u8,
    pub(crate) steps_to_catch: u64,
}

impl RollupRow {
    /// `src` is the event that closed the minute: its offset is the row's version.
    pub fn new(c: &Closed, src: Origin) -> Self {
        let m = &c.minute;
        let counted = m.caught_after_steps.filter(|&n| n != UNCOUNTED);
        Self {
            project_id: c.key.project_id.clone(),
            bucket: secs(m.bucket_ms),
            run_id: c.key.run_id.clone(),
            agent_name: c.agent_name.clone().unwrap_or_default(),
            runs_started: u8::from(m.started),
            runs_ended: u8::from(c.ending.is_some()),
            loop_runs: u8::from(c.ending.as_ref().is_some_and(|e| e.loop_detected)),
            termination_reason: c
                .ending
                .as_ref()
                .map(|e| e.reason.as_str().to_string())
                .unwrap_or_default(),
            steps: m.steps,
            tool_calls: m.tool_calls,
            errors: m.errors,
            tokens: m.tokens,
            cost_usd: m.cost_usd,
            loop_steps: m.loop_steps,
            loop_cost_usd: m.loop_cost_usd,
            loops_caught: u8::from(m.caught_after_steps.is_some()),
            caught_after_steps: counted.unwrap_or(0),
            src_partition: src.partition,
            src_offset: src.offset,
            loops_counted: u8::from(counted.is_some()),
            steps_to_catch: counted.unwrap_or(0),
        }
    }
}

/// DateTime column value: seconds, clamped to its UInt32 range.
fn secs(ms: i64) -> u32 {
    u32::try_from(ms.div_euclid(1000).clamp(0, i64::from(u32::MAX))).unwrap_or(0)
}

fn ms_of(rfc3339: &str) -> i64 {
    OffsetDateTime::parse(rfc3339, &Rfc3339)
        .map(|d| i64::try_from(d.unix_timestamp_nanos() / 1_000_000).unwrap_or(0))
        .unwrap_or(0)
}

impl StepRow {
    /// The row for `step`, fingerprinted, read at `src`.
    pub fn new(step: &Step, fps: &StepFingerprints, src: Origin) -> Self {
        Self {
            project_id: step.key.project_id.clone(),
            run_id: step.key.run_id.clone(),
            step_index: step.step_index,
            ts: secs(step.ts_ms),
            ts_ms: step.ts_ms,
            step_type: step.step_type.clone(),
            agent: step.agent.clone().unwrap_or_default(),
            caller: step.caller.clone().unwrap_or_default(),
            tool_name: step.tool_name.clone().unwrap_or_default(),
            raw_fp: fps.raw.unwrap_or(ZERO_FP),
            has_raw_fp: u8::from(fps.raw.is_some()),
            canonical_input_fp: fps.canonical_input.unwrap_or(ZERO_FP),
            canonical_output_fp: fps.canonical_output.unwrap_or(ZERO_FP),
            tool_success: match step.tool_success {
                Some(true) => 1,
                Some(false) => 0,
                None => -1,
            },
            tool_latency_ms: step.tool_latency_ms.unwrap_or(0.0),
            tokens: step.tokens.unwrap_or(0),
            cost_usd: step.cost_usd.unwrap_or(0.0),
            tokens_in_context: step.tokens_in_context.unwrap_or(0),
            content_len: step
                .content
                .as_ref()
                .map_or(0, |c| u32::try_from(c.len()).unwrap_or(u32::MAX)),
            src_partition: src.partition,
            src_offset: src.offset,
            signal_event_id: step.signal_event_id.clone().unwrap_or_default(),
        }
    }
}

impl SignalRow {
    pub(crate) fn new(kind: &str, s: &Signal, src: Origin) -> Self {
        let ts_ms = ms_of(&s.ts);
        Self {
            event_id: s.event_id.clone(),
            kind: kind.to_string(),
            project_id: s.project_id.clone(),
            run_id: s.run_id.clone(),
            agent_name: s.agent_name.clone().unwrap_or_default(),
            step_index: s.step_index,
            ts: secs(ts_ms),
            ts_ms,
            detector: s.detector.clone(),
            severity: s.severity.as_str().to_string(),
            pattern: s.pattern.clone(),
            fingerprint: s.fingerprint.clone(),
            hits: s.hits,
            step_indices: s.step_indices.clone(),
            first_step_index: s.first_step_index,
            evidence: s.evidence.to_string(),
            src_partition: src.partition,
            src_offset: src.offset,
            advice: s.advice.clone(),
        }
    }
}

impl RunRow {
    pub(crate) fn new(t: &RunTerminated, src: Origin) -> Self {
        let ended_ms = ms_of(&t.ts);
        Self {
            project_id: t.project_id.clone(),
            run_id: t.run_id.clone(),
            event_id: t.event_id.clone(),
            agent_name: t.agent_name.clone().unwrap_or_default(),
            started_at: secs(ms_of(&t.started_at)),
            ended_at: secs(ended_ms),
            ended_ms,
            status: t.status.clone(),
            termination_reason: t.termination_reason.clone(),
            termination_reason_reported: u8::from(t.termination_reason_reported),
            loop_detected: u8::from(t.loop_detected),
            has_loop_step_index: u8::from(t.loop_step_index.is_some()),
            loop_step_index: t.loop_step_index.unwrap_or(0),
            loop_caught_step_index: t.loop_caught_step_index.unwrap_or(0),
            signals: t.signals,
            redeliveries: t.redeliveries,
            steps: t.totals.steps,
            tool_calls: t.totals.tool_calls,
            tokens: t.totals.tokens,
            cost_usd: t.totals.cost_usd,
            duration_ms: t.totals.duration_ms,
            src_partition: src.partition,
            src_offset: src.offset,
            steers: t.steers,
            has_steered_step_index: u8::from(t.steered_step_index.is_some()),
            steered_step_index: t.steered_step_index.unwrap_or(0),
            steer_outcome: t
                .steer_outcome
                .map(|o| o.as_str().to_string())
                .unwrap_or_default(),
            loop_step_number: t.loop_step_number.unwrap_or(0),
            loop_caught_step_number: t.loop_caught_step_number.unwrap_or(0),
        }
    }
}

/// Rows for one output event.
pub fn push_output(batch: &mut super::Batch, o: &OutputEvent, src: Origin) {
    match o {
        OutputEvent::LoopWarning(s) | OutputEvent::LoopDetected(s) => {
            batch.signals.push(SignalRow::new(o.kind(), s, src))
        }
        OutputEvent::RunTerminated(t) => batch.runs.push(RunRow::new(t, src)),
    }
}

#[cfg(test)]
#[path = "rows_tests.rs"]
mod tests;
