//! Context pressure (loopcanary `context_pressure`): `tokens_in_context` over an absolute
//! budget (a diagnostic warning that never corroborates: long healthy runs get there), or
//! growing fast while tool outputs stay stuck (evidence of a loop that is also expensive).
//!
//! Two rules reach a verdict:
//! * stale growth: the context grew by `stale_growth` tokens or more over `stale_steps` steps
//!   or more in which nothing new came (no new tool output, no new action, no new message);
//! * compaction loops: context-window failures and compactions (condensations) again and again
//!   with nothing new between them (OpenHands calls adjacent condensations stuck; opencode caps
//!   compaction attempts at two; Claude Code users reported hundreds in one session).
use super::history::{History, CONTEXT};
use super::{hex64, push_bounded, Finding, Latch, Levels, StepView};
use crate::contract::Severity;
use crate::engine::text::contains_ci;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, VecDeque};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ContextConfig {
    pub(crate) enabled: bool,
    /// loopcanary: 100 000 tokens. 0 disables.
    pub(crate) abs_threshold: u64,
    /// loopcanary: >= 2000 tokens per step over a window of 10 with <= 2 distinct outputs.
    pub(crate) rate_threshold: u64,
    pub(crate) window: usize,
    pub(crate) max_distinct_outputs: usize,
    /// Stale growth: at least this many steps with nothing new (0 disables) ...
    pub(crate) stale_steps: u32,
    /// ... over which the context grew by at least this many tokens: alert; twice: stop.
    pub(crate) stale_growth: u64,
    /// Compactions or context-window failures with nothing new between them.
    pub(crate) compactions: Levels,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            abs_threshold: 100_000,
            rate_threshold: 2000,
            window: 10,
            max_distinct_outputs: 2,
            stale_steps: 4,
            stale_growth: 16_000,
            compactions: Levels::new(2, 3, 3),
        }
    }
}

/// The recent outputs are the run's shared [`History`] (bit [`CONTEXT`]). Fields are
/// crate-visible for `changelog::state`, which reads and writes its records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextState {
    pub(crate) samples: Samples,
    pub(crate) latch: Latch,
    pub(crate) stale: Stale,
}

/// What the stale-growth and compaction rules remember, in 8 bytes (the boxed state then
/// stays in the allocator size class it had): counts of new things are compared by their low
/// 16 bits (they grow by at most three a step), the context size in thousands of tokens.
/// Fields are crate-visible for `changelog::state`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Stale {
    /// Novelty ([`ContextState::on_step`]) and context size at the last step that brought
    /// something new, and the steps since, that one included.
    pub(crate) mark: u16,
    pub(crate) base_kilotokens: u16,
    pub(crate) steps: u8,
    /// Compactions in a row with nothing new between them, and the novelty at the last one.
    pub(crate) compactions: u8,
    pub(crate) compaction_mark: u16,
}

const _: () = assert!(std::mem::size_of::<Stale>() == 8);

fn low16(x: u64) -> u16 {
    x as u16
}

fn kilotokens(tokens: u64) -> u16 {
    u16::try_from(tokens / 1000).unwrap_or(u16::MAX)
}

/// The recent (step, tokens_in_context) samples, oldest first: 8 bytes each while both fit in
/// 32 bits (every real run), 16 from the first that does not. Compared and written as the
/// pairs they hold, whichever form holds them.
#[derive(Debug, Clone)]
pub(crate) enum Samples {
    Narrow(VecDeque<(u32, u32)>),
    Wide(VecDeque<(u64, u64)>),
}

impl Default for Samples {
    fn default() -> Self {
        Samples::Narrow(VecDeque::new())
    }
}

impl Samples {
    fn len(&self) -> usize {
        match self {
            Samples::Narrow(q) => q.len(),
            Samples::Wide(q) => q.len(),
        }
    }

    fn get(&self, i: usize) -> (u64, u64) {
        match self {
            Samples::Narrow(q) => (u64::from(q[i].0), u64::from(q[i].1)),
            Samples::Wide(q) => q[i],
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Append, keeping at most `cap`.
    pub(crate) fn push(&mut self, (step, tokens): (u64, u64), cap: usize) {
        if let Samples::Narrow(q) = self {
            if let (Ok(s), Ok(t)) = (u32::try_from(step), u32::try_from(tokens)) {
                push_bounded(q, (s, t), cap);
                return;
            }
            let wide = q.iter().map(|&(s, t)| (u64::from(s), u64::from(t)));
            *self = Samples::Wide(wide.collect());
        }
        if let Samples::Wide(q) = self {
            push_bounded(q, (step, tokens), cap);
        }
    }
}

impl PartialEq for Samples {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

const ABS: u64 = 1;
const RATE: u64 = 2;
const STALE: u64 = 3;
const COMPACT: u64 = 4;

/// Words of a failure or step text that say the context window overflowed: OpenAI's
/// `context_length_exceeded` ("This model's maximum context length is ..."), Anthropic's
/// "prompt is too long: N tokens > M maximum", Gemini's "The input token count (N) exceeds the
/// maximum number of tokens allowed (M)", Bedrock's "Input is too long for requested model".
/// A rate limit on tokens per minute ("Request too large ... tokens per min") is not one.
const OVERFLOW: &[&str] = &[
    "context length",
    "context_length_exceeded",
    "context window",
    "context_window_exceeded",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
    "input token count",
    "maximum number of tokens allowed",
];

/// A compaction (condensation) step or tool, or a context-window overflow.
fn context_event(v: &StepView<'_>) -> bool {
    let t = v.step.step_type.as_str();
    if contains_ci(t, "compact") || contains_ci(t, "condens") {
        return true;
    }
    if v.failure.is_none() && v.condenses {
        return true;
    }
    let text = match (&v.failure, v.tool) {
        (Some(f), _) => f.text.as_str(),
        (None, None) => match v.canon.content(v.step) {
            Some(c) if c.len() <= 2000 && contains_ci(t, "error") => c,
            _ => return false,
        },
        (None, Some(_)) => return false,
    };
    OVERFLOW.iter().any(|w| contains_ci(text, w))
}

impl ContextState {
    /// `novelty` counts what the run has seen that was new: (tool outputs and actions before
    /// this step, the same after it, messages). Compactions are judged by the tools alone: a
    /// compaction summary is a new message every time, and says nothing new; nor does the new
    /// token count in an overflow error, or a condensing tool's new summary, so each context
    /// event is compared with what came before it.
    pub(crate) fn on_step(
        &mut self,
        cfg: &ContextConfig,
        v: &StepView<'_>,
        hist: &mut History,
        (tools_before, tools, messages): (u64, u64, u64),
        out: &mut Vec<Finding>,
    ) {
        if !cfg.enabled {
            return;
        }
        let w = cfg.window.max(2);
        if v.counted_tool() {
            hist.join(CONTEXT, w);
        }
        let step = v.step.step_index;
        if context_event(v) {
            self.compaction(cfg, step, (tools_before, tools), out);
        }
        let Some(tokens) = v.step.tokens_in_context else {
            return;
        };
        let waits = v.counted_tool() && v.class.tolerates_same_output();
        self.stale_growth(cfg, step, tokens, tools + messages, waits, out);
        self.samples.push((step, tokens), w);
        let over = cfg.abs_threshold > 0 && tokens >= cfg.abs_threshold;
        if let Some(sev) = self.latch.rise(ABS, over.then_some(Severity::Warn)) {
            out.push(Finding {
                detector: "context_pressure",
                severity: sev,
                pattern: format!("tokens_in_context {tokens} >= {}", cfg.abs_threshold),
                fingerprint: hex64(ABS),
                hits: 1,
                step_indices: vec![step],
                first_step_index: step,
                evidence: serde_json::json!({"rule": "absolute", "tokens_in_context": tokens}),
                stop_reason: None,
                corroborating: false,
            });
        }
        // The distinct outputs last: counting them allocates, and context rarely grows this
        // fast.
        let ballooning =
            self.samples.len() >= w && cfg.rate_threshold > 0 && hist.len(CONTEXT) >= w && {
                let (first, last) = (
                    self.samples.get(0).1,
                    self.samples.get(self.samples.len() - 1).1,
                );
                let rate = last.saturating_sub(first) / (self.samples.len() as u64 - 1);
                rate >= cfg.rate_threshold
                    && hist
                        .members(CONTEXT)
                        .map(|c| c.output)
                        .collect::<BTreeSet<u64>>()
                        .len()
                        <= cfg.max_distinct_outputs
            };
        if let Some(sev) = self.latch.rise(RATE, ballooning.then_some(Severity::Warn)) {
            let steps: Vec<u64> = self.samples.iter().map(|s| s.0).collect();
            out.push(Finding {
                detector: "context_pressure",
                severity: sev,
                pattern: format!(
                    "context growing >= {} tokens/step while outputs are stuck",
                    cfg.rate_threshold
                ),
                fingerprint: hex64(RATE),
                hits: steps.len() as u32,
                first_step_index: steps[0],
                step_indices: steps,
                evidence: serde_json::json!({"rule": "ballooning", "tokens_in_context": tokens}),
                stop_reason: None,
                corroborating: true,
            });
        }
    }
}

impl ContextState {
    /// `(before, after)`: the run's tool novelty before and after this step.
    fn compaction(
        &mut self,
        cfg: &ContextConfig,
        step: u64,
        (before, after): (u64, u64),
        out: &mut Vec<Finding>,
    ) {
        let st = &mut self.stale;
        if st.compactions == 0 || st.compaction_mark != low16(before) {
            st.compactions = 0;
        }
        st.compactions = st.compactions.saturating_add(1);
        st.compaction_mark = low16(after);
        let n = u32::from(st.compactions);
        let level = (n >= cfg.compactions.floor())
            .then(|| cfg.compactions.level(n))
            .flatten();
        if n == 1 {
            self.latch.rearm(COMPACT);
        }
        if let Some(sev) = self.latch.rise(COMPACT, level) {
            out.push(Finding {
                detector: "context_pressure",
                severity: sev,
                pattern: format!("{n} compactions or context-window failures with nothing new between them"),
                fingerprint: hex64(COMPACT),
                hits: n,
                step_indices: vec![step],
                first_step_index: step,
                evidence: serde_json::json!({"rule": "compaction_loop", "thresholds": cfg.compactions}),
                stop_reason: None,
                corroborating: true,
            });
        }
    }

    fn stale_growth(
        &mut self,
        cfg: &ContextConfig,
        step: u64,
        tokens: u64,
        novelty: u64,
        v_waits: bool,
        out: &mut Vec<Finding>,
    ) {
        let st = &mut self.stale;
        if v_waits {
            // Waiting (a poll answering "still running") grows the context by design: the
            // repeated-operation thresholds for polls judge it, not this rule.
            st.base_kilotokens = kilotokens(tokens);
            return;
        }
        if cfg.stale_steps == 0 || st.mark != low16(novelty) || st.steps == 0 {
            st.mark = low16(novelty);
            st.base_kilotokens = kilotokens(tokens);
            st.steps = 1;
            self.latch.rearm(STALE);
            return;
        }
        st.steps = st.steps.saturating_add(1);
        let grown = u64::from(kilotokens(tokens).saturating_sub(st.base_kilotokens)) * 1000;
        let quiet = u32::from(st.steps - 1);
        let level = if quiet < cfg.stale_steps || grown < cfg.stale_growth {
            None
        } else if grown >= cfg.stale_growth.saturating_mul(2) {
            Some(Severity::Stop)
        } else {
            Some(Severity::Alert)
        };
        if let Some(sev) = self.latch.rise(STALE, level) {
            out.push(Finding {
                detector: "context_pressure",
                severity: sev,
                pattern: format!("context grew {grown} tokens over {quiet} steps with nothing new"),
                fingerprint: hex64(STALE),
                hits: quiet,
                step_indices: vec![step],
                first_step_index: step,
                evidence: serde_json::json!({
                    "rule": "stale_growth",
                    "tokens_in_context": tokens,
                    "grown": grown,
                    "steps": quiet,
                }),
                stop_reason: None,
                corroborating: true,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples that fit 32 bits stay narrow; the first that does not widens the rest, and
    /// every sample comes back and is compared exactly as given (records write them as the pairs
    /// they hold: `changelog::state`).
    #[test]
    fn samples_come_back_exactly_whatever_their_size() {
        let given = [
            (1, 10),
            (2, u64::from(u32::MAX)),
            (3, 1 << 40),
            (u64::MAX, 4),
            (5, 5),
        ];
        let mut s = Samples::default();
        let mut plain = VecDeque::new();
        for (i, &x) in given.iter().enumerate() {
            s.push(x, 4);
            push_bounded(&mut plain, x, 4);
            assert_eq!(matches!(s, Samples::Narrow(_)), i < 2, "{i}");
            assert_eq!(s.iter().collect::<VecDeque<_>>(), plain);
        }
        let mut narrow = Samples::default();
        narrow.push((7, 7), 4);
        let mut wide = Samples::Wide(VecDeque::new());
        wide.push((7, 7), 4);
        assert!(matches!(wide, Samples::Wide(_)));
        assert_eq!(narrow, wide);
    }
}
