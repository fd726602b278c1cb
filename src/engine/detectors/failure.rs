//! Repeated failure. Classification (see `view/failure.rs`) reads `tool_success` and word-level
//! tokens of the error fields, never raw substrings.
//!
//! * permanent (auth, permission, not found, invalid/schema, unknown tool): the 2nd identical
//!   failure of the same call (LoopGuard: attempts=2; retrying cannot help) stops at once when
//!   nothing new happened between the two (the same request, the same refusal), and alerts
//!   otherwise (the agent did something in between, which may have been meant to fix it), then
//!   stops at the 3rd;
//! * retryable (429, timeout, 5xx, temporarily unavailable): only when retries stop making
//!   progress: 6 identical failures in a row alert, i.e. beyond the common 5-attempt retry
//!   budget, and the 7th stops; a success, a different error or other new work in between
//!   starts over;
//! * recoverable (re-read then retry an edit): the 3rd identical failure alerts, since a healthy
//!   agent changes its edit after re-reading, and the 4th stops;
//! * other failures: the 3rd identical failure with no new work in between stops (the same
//!   call failed the same way three times and nothing happened in between);
//! * the same error with varying arguments (goose REP-002) alerts, and stops at the next one;
//!   a refusal (denied, invalid) counts as the same when only what it names differs, and
//!   "not found" for different arguments never counts (lookups of things that do not exist).
use super::{hex64, FailClass, Finding, Latch, Levels, Progress, StepView, VecMap};
use crate::engine::text::key64;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct FailureConfig {
    pub(crate) enabled: bool,
    pub(crate) permanent: Levels,
    /// Permanent failures of the same call with nothing new since the previous one.
    pub(crate) permanent_unchanged: Levels,
    pub(crate) retryable: Levels,
    pub(crate) recoverable: Levels,
    pub(crate) other: Levels,
    /// Same error text from the same tool with at least two different inputs.
    pub(crate) varying_permanent: Levels,
    pub(crate) varying_retryable: Levels,
    pub(crate) varying_recoverable: Levels,
    pub(crate) varying_other: Levels,
}

impl Default for FailureConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            permanent: Levels::new(0, 2, 3),
            permanent_unchanged: Levels::new(0, 2, 2),
            retryable: Levels::new(4, 6, 7),
            recoverable: Levels::new(0, 3, 4),
            other: Levels::new(0, 3, 3),
            varying_permanent: Levels::new(0, 3, 4),
            varying_retryable: Levels::new(0, 8, 9),
            // Different edits failing with "not found", each after re-reading, is the recovery
            // the edit tools prescribe (loopctl exempts recoverable errors outright): a third is
            // still adapting.
            varying_recoverable: Levels::new(4, 6, 7),
            varying_other: Levels::new(3, 5, 6),
        }
    }
}

/// Record shape in `changelog::state::failure`; fields are crate-visible for it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Streak {
    pub(crate) tool: u64,
    pub(crate) error: u64,
    pub(crate) class: FailClass,
    pub(crate) count: u32,
    pub(crate) steps: VecDeque<u64>,
    pub(crate) inputs: Vec<u64>,
    pub(crate) novel_at: u64,
    pub(crate) last: u64,
}

/// Record shape in `changelog::state::failure`; fields are crate-visible for it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FailureState {
    /// Sorted vectors, not B-trees: a B-tree node holding one streak costs over a kilobyte.
    pub(crate) by_op: VecMap<u64, Streak>,
    pub(crate) by_error: VecMap<u64, Streak>,
    pub(crate) latch: Latch,
}

const CAP: usize = 64;

fn evict(m: &mut VecMap<u64, Streak>) {
    while m.len() > CAP {
        let oldest = m.iter().min_by_key(|(k, s)| (s.last, **k)).map(|(k, _)| *k);
        match oldest {
            Some(k) => {
                m.remove(&k);
            }
            None => break,
        }
    }
}

impl FailureState {
    /// Returns whether a streak already reported ended in a success (the run recovered: what
    /// it reported should no longer corroborate other detectors).
    pub(crate) fn on_step(
        &mut self,
        cfg: &FailureConfig,
        v: &StepView<'_>,
        before: &Progress,
        out: &mut Vec<Finding>,
    ) -> bool {
        if !cfg.enabled || !v.counted_tool() {
            return false;
        }
        let Some(f) = v.failure.as_ref() else {
            // Success: this call and this tool's error streaks are over.
            let mut recovered = false;
            if let Some(s) = self.by_op.remove(&v.primary_key) {
                let k = key64(
                    "fail.op",
                    &[&v.primary_key.to_le_bytes(), &s.error.to_le_bytes()],
                );
                recovered |= self.latch.has(k);
                self.latch.rearm(k);
            }
            let gone: Vec<u64> = self
                .by_error
                .iter()
                .filter(|(_, s)| s.tool == v.tool_key)
                .map(|(k, _)| *k)
                .collect();
            for k in gone {
                self.by_error.remove(&k);
                recovered |= self.latch.has(k);
                self.latch.rearm(k);
            }
            return recovered;
        };
        let step = v.step.step_index;
        let novel = before.novel_actions;
        let fresh = |class| Streak {
            tool: v.tool_key,
            error: f.error_key,
            class,
            count: 0,
            steps: VecDeque::new(),
            inputs: Vec::new(),
            novel_at: novel,
            last: step,
        };
        // Identical failures of the same call.
        let op = self
            .by_op
            .get_or_insert_with(v.primary_key, || fresh(f.class));
        let new_work =
            op.novel_at != novel && matches!(f.class, FailClass::Retryable | FailClass::Other);
        if op.error != f.error_key || new_work {
            *op = fresh(f.class);
        }
        // Nothing new since the previous failure of this streak (or this is its first).
        let unchanged = op.novel_at == novel;
        op.count += 1;
        op.last = step;
        op.novel_at = novel;
        super::push_bounded(&mut op.steps, step, 32);
        let levels = match f.class {
            FailClass::Permanent if unchanged => cfg.permanent_unchanged,
            FailClass::Permanent => cfg.permanent,
            FailClass::Retryable => cfg.retryable,
            FailClass::Recoverable => cfg.recoverable,
            FailClass::Other => cfg.other,
        };
        let op_key = key64(
            "fail.op",
            &[&v.primary_key.to_le_bytes(), &f.error_key.to_le_bytes()],
        );
        let (count, steps) = (op.count, op.steps.iter().copied().collect::<Vec<_>>());
        if let Some(sev) = self.latch.rise(op_key, levels.level(count)) {
            out.push(finding(
                v,
                f,
                sev,
                op_key,
                count,
                steps,
                "same call, same error",
                levels,
            ));
        }
        evict(&mut self.by_op);
        if f.not_found {
            return false;
        }

        // The same error for different inputs of one tool; for a refusal (denied, invalid),
        // the same refusal naming what each input asked for.
        let ek = key64(
            "fail.err",
            &[&v.tool_key.to_le_bytes(), &f.shape_key.to_le_bytes()],
        );
        let agg = self.by_error.get_or_insert_with(ek, || fresh(f.class));
        if agg.class == FailClass::Other && agg.novel_at != novel {
            *agg = fresh(f.class);
        }
        agg.count += 1;
        agg.last = step;
        agg.novel_at = novel;
        super::push_bounded(&mut agg.steps, step, 32);
        if !agg.inputs.contains(&v.action_key) && agg.inputs.len() < 16 {
            agg.inputs.push(v.action_key);
        }
        let levels = match f.class {
            FailClass::Permanent => cfg.varying_permanent,
            FailClass::Retryable => cfg.varying_retryable,
            FailClass::Recoverable => cfg.varying_recoverable,
            FailClass::Other => cfg.varying_other,
        };
        if agg.inputs.len() >= 2 {
            let (count, steps) = (agg.count, agg.steps.iter().copied().collect::<Vec<_>>());
            if let Some(sev) = self.latch.rise(ek, levels.level(count)) {
                out.push(finding(
                    v,
                    f,
                    sev,
                    ek,
                    count,
                    steps,
                    "same error, varying arguments",
                    levels,
                ));
            }
        }
        evict(&mut self.by_error);
        false
    }
}

#[allow(clippy::too_many_arguments)]
fn finding(
    v: &StepView<'_>,
    f: &super::view::Failure,
    sev: crate::contract::Severity,
    key: u64,
    count: u32,
    steps: Vec<u64>,
    what: &str,
    levels: Levels,
) -> Finding {
    let tool = v.tool.unwrap_or("?");
    Finding {
        detector: "repeated_failure",
        severity: sev,
        pattern: format!("{tool}: {what} ({}) x{count}: {}", f.class.as_str(), f.text),
        fingerprint: hex64(key),
        hits: count,
        first_step_index: steps.first().copied().unwrap_or(v.step.step_index),
        step_indices: steps,
        evidence: serde_json::json!({
            "tool": tool,
            "class": f.class,
            "error": f.text,
            "rule": what,
            "thresholds": levels,
        }),
        stop_reason: None,
        corroborating: true,
    }
}
