//! No progress (loopcanary `null_progress`, LoopGuard stall): over the last `window` counted
//! tool calls the outputs stopped diversifying *and* the actions repeat. The second condition
//! is what keeps batch jobs quiet: ten different files moved, each answered `{"ok": true}`,
//! is work, not a stall. Repeatable tools and retryable/recoverable failures are left out
//! (their own rules judge them). A weak signal: it warns, and corroborates other detectors.
use super::history::{History, STALL};
use super::{hex64, FailClass, Finding, Latch, StepView};
use crate::contract::Severity;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct StallConfig {
    pub(crate) enabled: bool,
    /// loopcanary: window 8, WARN when distinct outputs <= 2.
    pub(crate) window: usize,
    pub(crate) max_distinct_outputs: usize,
    /// At most this many distinct actions in the window (else it is a batch, not a stall).
    pub(crate) max_distinct_actions: usize,
}

impl Default for StallConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            window: 8,
            max_distinct_outputs: 2,
            max_distinct_actions: 4,
        }
    }
}

/// The window itself is the run's shared [`History`] (bit [`STALL`]). Records hold the window
/// too (`changelog::state`, for which the latch is crate-visible).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StallState {
    pub(crate) latch: Latch,
}

impl StallState {
    pub(crate) fn on_step(
        &mut self,
        cfg: &StallConfig,
        v: &StepView<'_>,
        hist: &mut History,
        out: &mut Vec<Finding>,
    ) {
        if !cfg.enabled || !v.counted_tool() || v.class.is_repeatable() {
            return;
        }
        if matches!(
            v.fail_class(),
            Some(FailClass::Retryable | FailClass::Recoverable)
        ) {
            return;
        }
        hist.join(STALL, cfg.window.max(2));
        if hist.len(STALL) < cfg.window.max(2) {
            return;
        }
        let window = hist.members(STALL);
        // Most windows are far from stalled, and show it within a few calls: more distinct
        // outputs than allowed. Then nothing needs sorting.
        if more_than(window.clone().map(|e| e.output), cfg.max_distinct_outputs) {
            self.latch.rise(0, None);
            return;
        }
        // Outputs then actions in one buffer (on the stack for the usual short window), each
        // part cut to its distinct values in ascending order, as the sets they replace
        // iterated them.
        let n = hist.len(STALL);
        let mut stack = [0u64; STACK];
        let mut heap = Vec::new();
        let room: &mut [u64] = if 2 * n <= STACK {
            &mut stack[..2 * n]
        } else {
            heap.resize(2 * n, 0);
            &mut heap
        };
        let (ro, ra) = room.split_at_mut(n);
        let mut half = 0;
        for ((o, a), e) in ro.iter_mut().zip(ra.iter_mut()).zip(window.clone()) {
            (*o, *a) = (e.output, e.action);
            half += 1;
        }
        // `half` is `n` (the window holds `n` calls); else the actions move up to meet.
        debug_assert_eq!(half, n);
        room.copy_within(n..n + half, half);
        let buf = &mut room[..2 * half];
        let (o, a) = buf.split_at_mut(half);
        let (n_out, n_act) = (distinct(o), distinct(a));
        let outs = &buf[..n_out];
        let acts = &buf[half..half + n_act];
        let stalled =
            outs.len() <= cfg.max_distinct_outputs && acts.len() <= cfg.max_distinct_actions;
        let level = stalled.then_some(Severity::Warn);
        if let Some(sev) = self.latch.rise(0, level) {
            let steps: Vec<u64> = window.clone().map(|e| e.step).collect();
            let key = outs.iter().fold(0u64, |a, x| a ^ x);
            // The stall began where the output that dominates the window first appeared, not at
            // the window's edge (which may still hold the last productive step).
            let dominant = outs
                .iter()
                .copied()
                .max_by_key(|o| {
                    let n = window.clone().filter(|e| e.output == *o).count();
                    (n, std::cmp::Reverse(*o))
                })
                .unwrap_or_default();
            let began = window
                .clone()
                .find(|e| e.output == dominant)
                .map_or(steps[0], |e| e.step);
            out.push(Finding {
                detector: "no_progress",
                severity: sev,
                pattern: format!(
                    "{} distinct outputs for {} distinct actions over {} calls",
                    outs.len(),
                    acts.len(),
                    steps.len()
                ),
                fingerprint: hex64(key),
                hits: steps.len() as u32,
                first_step_index: began,
                step_indices: steps,
                evidence: serde_json::json!({
                    "distinct_outputs": outs.len(),
                    "distinct_actions": acts.len(),
                    "window": cfg.window,
                }),
                stop_reason: None,
                corroborating: true,
            });
        }
    }
}

/// Whether `it` holds more than `max` distinct values, read only as far as needed to tell.
fn more_than(it: impl Iterator<Item = u64>, max: usize) -> bool {
    let mut seen = [0u64; 8];
    let mut n = 0;
    for x in it {
        if seen[..n.min(seen.len())].contains(&x) {
            continue;
        }
        if n >= max {
            return true;
        }
        if n < seen.len() {
            seen[n] = x;
        } else {
            // A configured bound past the stack set: the sorting path below decides.
            return false;
        }
        n += 1;
    }
    false
}

/// Window calls whose outputs and actions fit the stack buffer (twice the default window of 8
/// and then some).
const STACK: usize = 64;

/// Sorts `v` and moves its distinct values to the front; returns how many there are.
fn distinct(v: &mut [u64]) -> usize {
    v.sort_unstable();
    let mut n = 0;
    for i in 0..v.len() {
        if n == 0 || v[i] != v[n - 1] {
            v[n] = v[i];
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The early exit never says "more" wrongly, and says it whenever the bound fits its
        /// stack set; past that the sorting path decides.
        #[test]
        fn more_than_agrees_with_counting_distinct(
            v in proptest::collection::vec(0u64..12, 0..40),
            max in 0usize..12,
        ) {
            let n = distinct(&mut v.clone());
            let got = more_than(v.iter().copied(), max);
            if max <= 8 {
                proptest::prop_assert_eq!(got, n > max);
            } else {
                proptest::prop_assert!(!got || n > max);
            }
        }
    }
}
