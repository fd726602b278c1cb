//! The output events a run produces: a signal per detector finding (with its deterministic id
//! and its advice) and the `run_terminated` verdict when it ends (with what followed a steer).
//! Built from the run's state; the engine only decides when.
use super::{advice, detectors, run, RunState};
use crate::contract::input::format_ts;
use crate::contract::output::event_id;
use crate::contract::{RunKey, RunTerminated, Signal, Step};

pub(super) fn build_signal(
    key: &RunKey,
    state: &mut RunState,
    step: &Step,
    f: detectors::Finding,
) -> Signal {
    state.signals += 1;
    if f.severity.is_caught() {
        state.caught(step.step_index, f.first_step_index);
    }
    if let Some(reason) = f.stop_reason {
        state.inferred_reason.get_or_insert(reason);
    }
    let step_str = step.step_index.to_string();
    let advice = advice::advice(&advice::Facts {
        detector: f.detector,
        pattern: &f.pattern,
        hits: f.hits,
        first_step_index: f.first_step_index,
        evidence: &f.evidence,
    });
    Signal {
        event_id: event_id(&[
            &key.project_id,
            &key.run_id,
            "signal",
            f.detector,
            &f.fingerprint,
            f.severity.as_str(),
            &step_str,
        ]),
        project_id: key.project_id.clone(),
        run_id: key.run_id.clone(),
        agent_name: state.agent_name().map(str::to_owned),
        step_index: step.step_index,
        ts: format_ts(step.ts_ms),
        detector: f.detector.to_string(),
        severity: f.severity,
        pattern: f.pattern,
        fingerprint: f.fingerprint,
        hits: f.hits,
        step_indices: f.step_indices,
        first_step_index: f.first_step_index,
        evidence: f.evidence,
        advice,
    }
}

pub(super) fn terminated(key: &RunKey, state: &RunState, end: run::End<'_>) -> RunTerminated {
    let (status, reason, reported, end_ms) = state.verdict(&end);
    RunTerminated {
        event_id: event_id(&[&key.project_id, &key.run_id, "run_terminated"]),
        project_id: key.project_id.clone(),
        run_id: key.run_id.clone(),
        agent_name: state.agent_name().map(str::to_owned),
        ts: format_ts(end_ms),
        started_at: format_ts(state.started_ms()),
        status: status.to_string(),
        termination_reason: reason.as_str().to_string(),
        termination_reason_reported: reported,
        loop_detected: state.loop_detected,
        loop_step_index: state.loop_step_index(),
        loop_caught_step_index: state.loop_caught_step_index(),
        loop_step_number: state.loop_step_index().and_then(|i| state.step_number(i)),
        loop_caught_step_number: state
            .loop_caught_step_index()
            .and_then(|i| state.step_number(i)),
        reported_loop_detected: match end {
            run::End::Finished(e) => e.reported_loop_detected,
            run::End::Idle { .. } | run::End::Evicted { .. } => None,
        },
        signals: state.signals,
        redeliveries: state.redeliveries,
        totals: state.totals(end_ms),
        steered_step_index: state.steered_step_index(),
        steers: u32::from(state.steers()),
        steer_outcome: state.steer_outcome(),
    }
}
