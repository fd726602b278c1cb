//! Repeated operation (loopctl, loopcanary `repeated_action`): operation = (tool, primary
//! parameter, output). Counted in a sliding window of tool calls, not only consecutively. The
//! same call with a different output is progress: it purges that call's older entries and
//! re-arms its warnings (loopctl's rule), so a poll that finally changes is never flagged.
//! Failed calls are left to `repeated_failure`, which knows retry semantics.
//!
//! The strongest evidence is the same call answered the same way back to back, with no other
//! tool call in between (thoughts do not count: they bring no new input): the agent saw the
//! same answer twice and asked a third time. That is conclusive, and stops at once, as Roo Code
//! blocks the call after three identical ones (OpenHands stops at four identical
//! action-observation pairs). Any other call, a failure, or a different answer ends the streak.
//! Interleaved repeats are weaker evidence: they alert at a count and stop at the next repeat
//! after the alert (the agent was told, and did it again).
use super::history::{Call, History, REPEAT};
use super::{hex64, Finding, Latch, Levels, Progress, StepView};
use crate::contract::Severity;
use crate::engine::text::key64;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RepeatConfig {
    pub(crate) enabled: bool,
    /// Window, in counted tool calls, for normal tools.
    pub(crate) window: usize,
    /// Window for repeatable (poll/step/scroll) tools: long enough to hold their thresholds.
    pub(crate) window_repeatable: usize,
    /// loopcanary warns at 3; OpenHands calls 4 identical action+observation pairs stuck. Stops
    /// at the first repeat after the alert.
    pub(crate) normal: Levels,
    /// OpenClaw's poll proposal (#16808): warn at 10 unchanged polls, kill at twice that; here
    /// the alert comes at twice that, and the stop at the next unchanged poll.
    pub(crate) repeatable: Levels,
    /// The same call with the same result back to back, no other tool call in between. Only
    /// for tools that do not tolerate the same output (waiting keeps `repeatable`) and have no
    /// per-tool `repeat` levels.
    pub(crate) consecutive: Levels,
    /// The count starts over when at least this many new successful actions happened since the
    /// previous occurrence (re-reading a config file between edits of different files is work,
    /// the same rule `repeated_failure` applies to "other" failures). 0 disables.
    pub(crate) reset_after_new_actions: u64,
}

impl Default for RepeatConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            window: 20,
            window_repeatable: 48,
            normal: Levels::new(3, 5, 6),
            repeatable: Levels::new(10, 20, 21),
            consecutive: Levels::new(0, 3, 3),
            reset_after_new_actions: 2,
        }
    }
}

/// The window itself is the run's shared [`History`] (bit [`REPEAT`]).
/// The streak of identical calls back to back is kept in [`Progress::streak`], where it costs
/// no bytes (a run's state is held within an allocator size class). Records hold the window
/// too (`changelog::state`, for which the latch is crate-visible).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RepeatState {
    pub(crate) latch: Latch,
}

fn op_key(primary: u64, output: u64) -> u64 {
    key64("op", &[&primary.to_le_bytes(), &output.to_le_bytes()])
}

/// Operation keys are SHA-256 based and a window holds few distinct operations (a loop is the
/// same one again), so each is hashed once per step however often it occurs.
#[derive(Default)]
struct OpKeys(Vec<(u64, u64, u64)>);

impl OpKeys {
    fn get(&mut self, primary: u64, output: u64) -> u64 {
        if let Some(&(_, _, k)) = self
            .0
            .iter()
            .find(|(p, o, _)| *p == primary && *o == output)
        {
            return k;
        }
        let k = op_key(primary, output);
        self.0.push((primary, output, k));
        k
    }
}

impl RepeatState {
    /// Re-arming an empty latch does nothing, and nearly every latch is empty: then the
    /// operation keys need not be hashed at all.
    fn armed(&self) -> bool {
        self.latch != Latch::default()
    }

    pub(crate) fn on_step(
        &mut self,
        cfg: &RepeatConfig,
        v: &StepView<'_>,
        before: &Progress,
        streak: &mut u32,
        hist: &mut History,
        out: &mut Vec<Finding>,
    ) {
        if !cfg.enabled || !v.counted_tool() {
            return;
        }
        if v.failure.is_some() {
            // A failure between two identical calls is something happening, not a repeat.
            *streak = 0;
            return;
        }
        let repeatable = v.class.tolerates_same_output();
        // Back to back: the window's newest entry (before this call joins) is the previous
        // counted call whenever a streak runs, since a failure or another call ends it.
        let again = *streak > 0
            && hist
                .last(REPEAT)
                .is_some_and(|e| e.primary == v.primary_key && e.output == v.output_key);
        *streak = if again { streak.saturating_add(1) } else { 1 };
        let streak = *streak;
        let mut ops = OpKeys::default();
        let same = |e: &Call| e.primary == v.primary_key && e.output == v.output_key;
        let stale_entry = |e: &Call| e.primary == v.primary_key && e.output != v.output_key;
        let window = if repeatable {
            cfg.window_repeatable
        } else {
            cfg.window
        };
        let cap = cfg.window.max(cfg.window_repeatable).max(1);
        // How many of the window's newest calls count once the current one joined (it drops
        // only calls older than those: `cap` is at least `window`, as cut below).
        let counted = window.min(cap.min(super::history::MAX_WINDOW));
        let before_len = hist.len(REPEAT);
        // One scan for both rules below (each window scan first walks back over the history),
        // and for the count when neither rule forgets anything. Forgetting this operation's
        // entries cannot change whether stale ones exist.
        let (mut last_work, mut any_stale, mut recent_same) = (None, false, 0u32);
        for (i, e) in hist.members(REPEAT).enumerate() {
            if same(&e) {
                last_work = Some(e.work());
                if i + counted > before_len {
                    recent_same += 1;
                }
            } else if stale_entry(&e) {
                any_stale = true;
            }
        }
        let mut forgot = any_stale;
        // New work since the previous occurrence of this very operation: start over.
        if cfg.reset_after_new_actions > 0
            && last_work.is_some_and(|w| {
                before.novel_actions.saturating_sub(w) >= cfg.reset_after_new_actions
            })
        {
            forgot = true;
            hist.leave(REPEAT, same);
            if self.armed() {
                self.latch.rearm(ops.get(v.primary_key, v.output_key));
            }
        }
        // Progress: the same call answered differently. Forget its stale entries and warnings.
        if any_stale {
            let stale: Vec<u64> = if self.armed() {
                hist.members(REPEAT)
                    .filter(|e| stale_entry(e))
                    .map(|e| ops.get(e.primary, e.output))
                    .collect()
            } else {
                Vec::new()
            };
            hist.leave(REPEAT, stale_entry);
            for k in stale {
                self.latch.rearm(k);
            }
        }
        // The current call (pushed with `work` = novel actions after this step) joins.
        hist.join(REPEAT, cap);
        let levels = v.policy.and_then(|p| p.repeat).unwrap_or(if repeatable {
            cfg.repeatable
        } else {
            cfg.normal
        });
        let start = hist.len(REPEAT).saturating_sub(window);
        let hits = if forgot {
            hist.members(REPEAT).skip(start).filter(|e| same(e)).count() as u32
        } else {
            // The current call counts unless nothing does.
            recent_same + u32::from(counted > 0)
        };
        debug_assert_eq!(
            hits,
            hist.members(REPEAT).skip(start).filter(|e| same(e)).count() as u32
        );
        let mut level = if hits >= levels.floor() {
            levels.level(hits)
        } else {
            None
        };
        let strict = !repeatable && v.policy.and_then(|p| p.repeat).is_none();
        if strict && streak >= cfg.consecutive.floor() {
            level = level.max(cfg.consecutive.level(streak));
        }
        // Nothing to raise and nothing to re-arm: the key is not needed.
        if level.is_none() && !self.armed() {
            return;
        }
        let key = ops.get(v.primary_key, v.output_key);
        // Re-arm every other pattern that has slid out of its window.
        let others: Vec<u64> = self
            .latch
            .keys()
            .into_iter()
            .filter(|k| *k != key)
            .collect();
        if !others.is_empty() {
            let keyed: Vec<u64> = hist
                .members(REPEAT)
                .map(|e| ops.get(e.primary, e.output))
                .collect();
            for k in others {
                let (n, rep) = count(hist, k, &keyed, cfg);
                let floor = if rep {
                    cfg.repeatable.floor()
                } else {
                    cfg.normal.floor()
                };
                if n < floor {
                    self.latch.rearm(k);
                }
            }
        }
        if let Some(sev) = self.latch.rise(key, level) {
            // Listed only when reported: most steps raise nothing.
            let steps: Vec<u64> = hist
                .members(REPEAT)
                .skip(start)
                .filter(|e| same(e))
                .map(|e| e.step)
                .collect();
            let tool = v.tool.unwrap_or("?");
            let first = steps.first().copied().unwrap_or(v.step.step_index);
            out.push(Finding {
                detector: "repeated_operation",
                severity: sev,
                pattern: format!("{tool}(same call, same result) x{hits}"),
                fingerprint: hex64(key),
                hits,
                step_indices: tail(&steps, 32),
                first_step_index: first,
                evidence: serde_json::json!({
                    "tool": tool,
                    "tool_class": v.class,
                    "window": window,
                    "thresholds": levels,
                    "consecutive": streak,
                    "input_fingerprint": v.canon.fps.canonical_input.map(hex::encode),
                    "output_fingerprint": v.canon.fps.canonical_output.map(hex::encode),
                }),
                stop_reason: None,
                corroborating: sev >= Severity::Warn,
            });
        }
    }
}

/// `ops[i]` is the operation key of window entry `i`.
fn count(hist: &History, key: u64, ops: &[u64], cfg: &RepeatConfig) -> (u32, bool) {
    let mut n = 0u32;
    let mut rep = false;
    let len = hist.len(REPEAT);
    for (i, (e, op)) in hist.members(REPEAT).zip(ops).enumerate() {
        if *op != key {
            continue;
        }
        let w = if e.repeatable {
            cfg.window_repeatable
        } else {
            cfg.window
        };
        if i + w >= len {
            n += 1;
            rep = e.repeatable;
        }
    }
    (n, rep)
}

pub(crate) fn tail(v: &[u64], n: usize) -> Vec<u64> {
    v[v.len().saturating_sub(n)..].to_vec()
}
