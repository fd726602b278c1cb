//! Multi-agent handoff cycles (LoopGuard `HandoffLoopDetector`: 2 repeats, cycles of at most 5
//! agents) over `caller`→`agent` edges. A handoff is recorded when the acting agent changes;
//! its payload is what was handed over (the first step's content or tool input). Unlike
//! LoopGuard, every leg of the cycle must also hand over the *same* thing as one round before
//! (exact after normalisation, or near-identical for short messages), so a writer↔reviewer
//! exchange whose drafts and reviews move on stays quiet.
use super::{hex64, push_bounded, Finding, Latch, Lazy, Levels, StepView};
use crate::engine::text::{feature_sig, key64, normalize_message, similarity, NameKeys, Signature};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, VecDeque};
use std::num::NonZeroU64;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct HandoffConfig {
    pub(crate) enabled: bool,
    pub(crate) max_agents: usize,
    /// Rounds of the closed cycle with stagnant payloads on every leg.
    pub(crate) levels: Levels,
    /// Short payloads (at most `short_words` words) also match when their MinHash similarity
    /// reaches this; long payloads must be equal after normalisation.
    pub(crate) short_words: usize,
    pub(crate) short_similarity: f64,
}

impl Default for HandoffConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_agents: 5,
            // Every leg handed over what it handed over one round before: the cycle came back
            // around with nothing new, which is conclusive.
            levels: Levels::new(0, 2, 2),
            short_words: 40,
            short_similarity: 0.6,
        }
    }
}

/// One handoff of the window. Written as an array in field order (see
/// `changelog::state::handoff`); fields are crate-visible for it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Handoff {
    pub(crate) step: u64,
    pub(crate) from: u64,
    pub(crate) to: u64,
    pub(crate) payload: u64,
    pub(crate) short: bool,
    /// Short payloads only (boxed: the others carry a pointer, not 32 bytes).
    pub(crate) sig: Option<Box<Signature>>,
}

/// Every step of a run with named agents sets `last_agent`; the cycle history and latch exist
/// only in multi-agent runs, so they are boxed on first use. Recorded as one flat object (see
/// `changelog::state::handoff`); fields are crate-visible for it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HandoffState {
    /// Non-zero so that the option takes 8 bytes, not 16 ([`agent_key`] is never zero).
    pub(crate) last_agent: Option<NonZeroU64>,
    pub(crate) cycles: Lazy<Cycles>,
}

/// Fields are crate-visible for `changelog::state`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Cycles {
    pub(crate) hist: VecDeque<Handoff>,
    pub(crate) latch: Latch,
}

/// `key64("agent", name)`: memoised, as every step of a multi-agent run names its agent.
/// Never zero: a hash that is zero is taken as one (a collision as likely as any other
/// two names', 2⁻⁶⁴), so a key fits [`HandoffState::last_agent`]'s `NonZeroU64`.
fn agent_key(name: &str, names: &mut NameKeys) -> u64 {
    names.get("agent", name).max(1)
}

pub(crate) fn nonzero(k: u64) -> NonZeroU64 {
    NonZeroU64::new(k).unwrap_or(NonZeroU64::MIN)
}

fn payload_text(v: &StepView<'_>) -> String {
    if let Some(c) = v.canon.content(v.step).filter(|c| !c.trim().is_empty()) {
        return c.to_string();
    }
    if v.tool.is_some() {
        return v.canon.input_text.clone();
    }
    String::new()
}

impl HandoffState {
    pub(crate) fn on_step(
        &mut self,
        cfg: &HandoffConfig,
        v: &StepView<'_>,
        names: &mut NameKeys,
        features: &mut Vec<u64>,
        out: &mut Vec<Finding>,
    ) {
        if !cfg.enabled {
            return;
        }
        let Some(agent) = v.step.agent.as_deref() else {
            return;
        };
        let to = agent_key(agent, names);
        let last = Some(nonzero(to));
        let from = match (v.step.caller.as_deref(), self.last_agent) {
            (Some(c), _) => agent_key(c, names),
            (None, Some(prev)) => prev.get(),
            (None, None) => {
                self.last_agent = last;
                return;
            }
        };
        let changed = self.last_agent != last;
        self.last_agent = last;
        if !changed || from == to {
            return;
        }
        self.cycles
            .with(|c| c.on_handoff(cfg, v, agent, (from, to), features, out));
    }
}

impl Cycles {
    fn on_handoff(
        &mut self,
        cfg: &HandoffConfig,
        v: &StepView<'_>,
        agent: &str,
        (from, to): (u64, u64),
        features: &mut Vec<u64>,
        out: &mut Vec<Finding>,
    ) {
        let text = normalize_message(&payload_text(v));
        let short = text.split_whitespace().count() <= cfg.short_words;
        let max_agents = cfg.max_agents.clamp(2, 8);
        let max_rounds = cfg.levels.stop.max(cfg.levels.alert).max(2) as usize;
        push_bounded(
            &mut self.hist,
            Handoff {
                step: v.step.step_index,
                from,
                to,
                payload: key64("payload", &[text.as_bytes()]),
                short,
                sig: short.then(|| Box::new(feature_sig(&text, 0, features).1)),
            },
            max_agents * (max_rounds + 1),
        );
        let h: Vec<&Handoff> = self.hist.iter().collect();
        let n = h.len();
        let mut matched = BTreeSet::new();
        for p in 2..=max_agents {
            if n < 2 * p {
                break;
            }
            let block = &h[n - p..];
            // A closed, simple cycle of p distinct agents.
            let agents: BTreeSet<u64> = block.iter().map(|e| e.to).collect();
            let chained = (0..p).all(|i| block[i].to == block[(i + 1) % p].from);
            if agents.len() != p || !chained {
                continue;
            }
            let mut run = 0;
            while run + p < n {
                let (a, b) = (h[n - 1 - run], h[n - 1 - run - p]);
                let same_edge = a.from == b.from && a.to == b.to;
                let stagnant = a.payload == b.payload
                    || (a.short
                        && b.short
                        && a.sig
                            .as_ref()
                            .zip(b.sig.as_ref())
                            .is_some_and(|(x, y)| similarity(x, y) >= cfg.short_similarity));
                if !same_edge || !stagnant {
                    break;
                }
                run += 1;
            }
            if run < p {
                continue;
            }
            let rounds = (run / p + 1) as u32;
            let mut edges: Vec<u64> = block.iter().map(|e| e.to).collect();
            edges.sort_unstable();
            let bytes: Vec<u8> = edges.iter().flat_map(|x| x.to_le_bytes()).collect();
            let key = key64("handoff", &[&bytes]);
            matched.insert(key);
            if let Some(sev) = self.latch.rise(key, cfg.levels.level(rounds)) {
                let steps: Vec<u64> = h[n - run - p..].iter().map(|e| e.step).collect();
                out.push(Finding {
                    detector: "handoff_cycle",
                    severity: sev,
                    pattern: format!("handoff cycle of {p} agents x{rounds}, same payloads"),
                    fingerprint: hex64(key),
                    hits: rounds,
                    first_step_index: steps[0],
                    step_indices: super::repeat::tail(&steps, 32),
                    evidence: serde_json::json!({"agents": p, "rounds": rounds, "last_agent": agent}),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_keys_fit_a_nonzero_slot() {
        assert_eq!(nonzero(0), NonZeroU64::MIN);
        assert_ne!(agent_key("planner", &mut NameKeys::default()), 0);
    }
}
