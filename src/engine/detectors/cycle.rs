//! Cycles (LoopGuard `CycleDetector`, OpenHands' alternating pattern): a block of 2..=4
//! different actions A→B(→C→D) repeating back to back, with the *same output on every leg*
//! each time round. A read→edit→read→edit sequence whose reads change is progress and stays
//! quiet. Blocks containing a repeatable tool (poll + sleep) need many more rounds.
//!
//! Short blocks (up to `short_len` actions, the ping-pong and A→B→C shapes) are judged by the
//! legs repeated, not by whole rounds: two rounds warn, the first leg of a third round with
//! the same output alerts, and the next leg with the same output stops (for a ping-pong that
//! is three full rounds: OpenHands' alternating pattern, three rounds of A→B with identical
//! observations, is stuck).
use super::history::{self, History, CYCLE};
use super::{hex64, Finding, Latch, Levels, StepView};
use crate::engine::text::key64;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct CycleConfig {
    pub(crate) enabled: bool,
    /// LoopGuard stops at 4; real loop bodies of a research or coding agent are often 5-6
    /// calls (search, fetch, extract, fetch, search again), so up to 6.
    pub(crate) max_len: usize,
    /// In full rounds of the block (2 = the block seen twice).
    pub(crate) normal: Levels,
    pub(crate) repeatable: Levels,
    /// Blocks of at most this many actions (not repeatable) use `short_legs`. 0 disables.
    pub(crate) short_len: usize,
    /// For short blocks of `p` actions, in legs repeated beyond the first round, as multiples
    /// of `p` plus an offset: warn at `p` (two rounds), alert at `p + 1`, stop at `p + 2`.
    pub(crate) short_legs: ShortLegs,
}

/// Leg thresholds of short cycles: level `x` is reached at `x.rounds * p + x.legs` repeated
/// legs (0 rounds and 0 legs disables the level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ShortLegs {
    pub(crate) warn: LegCount,
    pub(crate) alert: LegCount,
    pub(crate) stop: LegCount,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct LegCount {
    pub(crate) rounds: u32,
    pub(crate) legs: u32,
}

impl Default for ShortLegs {
    fn default() -> Self {
        Self {
            warn: LegCount { rounds: 1, legs: 0 },
            alert: LegCount { rounds: 1, legs: 1 },
            stop: LegCount { rounds: 1, legs: 2 },
        }
    }
}

impl ShortLegs {
    /// Levels in repeated legs for a block of `p` actions.
    fn levels(&self, p: u32) -> Levels {
        let at = |x: LegCount| x.rounds.saturating_mul(p).saturating_add(x.legs);
        Levels::new(at(self.warn), at(self.alert), at(self.stop))
    }
}

impl Default for CycleConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_len: 6,
            normal: Levels::new(2, 3, 4),
            repeatable: Levels::new(6, 10, 11),
            short_len: 8,
            short_legs: ShortLegs::default(),
        }
    }
}

/// The calls a cycle must be looked for in: blocks of up to `max_len` calls, repeated until
/// the highest level configured, plus one.
pub(crate) fn window(cfg: &CycleConfig) -> usize {
    let max_rounds = cfg
        .normal
        .stop
        .max(cfg.repeatable.stop)
        .max(cfg.repeatable.alert)
        .max(2) as usize;
    cfg.max_len
        .clamp(2, 8)
        .saturating_mul(max_rounds.saturating_add(1))
}

/// The window itself is the run's shared [`History`] (bit [`CYCLE`]). Records hold the window
/// too (`changelog::state`, for which the latch is crate-visible).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CycleState {
    pub(crate) latch: Latch,
}

impl CycleState {
    pub(crate) fn on_step(
        &mut self,
        cfg: &CycleConfig,
        v: &StepView<'_>,
        hist: &mut History,
        out: &mut Vec<Finding>,
    ) {
        if !cfg.enabled || !v.counted_tool() {
            return;
        }
        let max_len = cfg.max_len.clamp(2, 8);
        hist.join(CYCLE, window(cfg));
        let h: history::View<'_> = hist.view(CYCLE);
        let n = h.len();
        let mut matched = BTreeSet::new();
        for p in 2..=max_len {
            if n < 2 * p {
                break;
            }
            // Matching legs walking back from the end. First: on most steps the newest call
            // already differs from the one `p` back, whatever the block holds.
            let mut run = 0;
            while run + p < n {
                let (a, b) = (h.get(n - 1 - run), h.get(n - 1 - run - p));
                if a.action != b.action || a.output != b.output {
                    break;
                }
                run += 1;
            }
            if run < p {
                continue;
            }
            // The last `p` actions; `max_len` is at most 8, so no allocation per step.
            let mut block = [0u64; 8];
            for (i, a) in block[..p].iter_mut().enumerate() {
                *a = h.get(n - p + i).action;
            }
            let acts = &block[..p];
            let distinct = acts.iter().any(|a| *a != acts[0]);
            if !distinct || has_smaller_period(acts) {
                continue;
            }
            let rounds = (run / p + 1) as u32;
            // Rotation-invariant identity: the same cycle keeps one key as it turns.
            let mut rot: Vec<u64> = acts.to_vec();
            let min_pos = (0..p)
                .min_by_key(|i| {
                    acts[*i..]
                        .iter()
                        .chain(&acts[..*i])
                        .copied()
                        .collect::<Vec<_>>()
                })
                .unwrap_or(0);
            rot.rotate_left(min_pos);
            let bytes: Vec<u8> = rot.iter().flat_map(|x| x.to_le_bytes()).collect();
            let key = key64("cycle", &[&bytes]);
            matched.insert(key);
            // A waiting cycle (poll + sleep) is mostly polls; a cycle of failing mutations
            // with one status check in it (`git rebase` / `git status` / `git rebase --abort`)
            // is not.
            let repeatable = 2 * (n - p..n).filter(|&i| h.get(i).repeatable).count() >= p;
            let short = !repeatable && p <= cfg.short_len;
            let (levels, count) = if short {
                (cfg.short_legs.levels(p as u32), run as u32)
            } else if repeatable {
                (cfg.repeatable, rounds)
            } else {
                (cfg.normal, rounds)
            };
            if let Some(sev) = self.latch.rise(key, levels.level(count)) {
                let steps: Vec<u64> = (n - run - p..n).map(|i| h.get(i).step).collect();
                out.push(Finding {
                    detector: "cycle",
                    severity: sev,
                    pattern: format!("cycle of {p} actions x{rounds} with unchanged outputs"),
                    fingerprint: hex64(key),
                    hits: rounds,
                    first_step_index: steps[0],
                    step_indices: super::repeat::tail(&steps, 32),
                    evidence: serde_json::json!({
                        "length": p,
                        "rounds": rounds,
                        "repeatable": repeatable,
                        "repeated_legs": run,
                        "thresholds": levels,
                        "thresholds_in": if short { "repeated_legs" } else { "rounds" },
                    }),
                    stop_reason: None,
                    corroborating: true,
                });
            }
        }
        for k in self.latch.keys() {
            if !matched.contains(&k) {
                self.latch.rearm(k);
            }
        }
    }
}

fn has_smaller_period(acts: &[u64]) -> bool {
    let p = acts.len();
    (1..p).any(|q| p.checked_rem(q) == Some(0) && (q..p).all(|i| acts[i] == acts[i - q]))
}
