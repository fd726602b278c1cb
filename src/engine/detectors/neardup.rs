//! Near-duplicate repetition without any model or network: MinHash over content words and word
//! pairs of the normalised argument values (keys excluded, so `{"q": ...}` calls are compared by
//! what they ask). A cluster of similar calls to one tool counts only when their outputs are
//! stagnant too: the same failure, empty results, or the same non-trivial data. Paginated
//! reads and queries whose results change never form a cluster.
use super::{hex64, push_bounded, FailClass, Finding, Latch, Levels, OutKind, StepView};
use crate::engine::text::{feature_hashes, minhash_of, normalize_message, similarity, Words};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeSet, VecDeque};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NearDupConfig {
    pub enabled: bool,
    /// Recent counted tool calls compared against (LoopGuard semantic: window 6).
    pub window: usize,
    /// Estimated Jaccard similarity of argument features (LoopGuard semantic: cosine 0.8 on
    /// embeddings; word-feature Jaccard runs lower for the same paraphrases).
    pub similarity: f64,
    /// When the shared result is the same non-empty data, stricter: lookups of different
    /// entities often return identical data (`{"plan": "pro"}`) and are a batch, not a loop.
    pub similarity_data: f64,
    /// ... unless that data is rich: an identical answer of at least this many distinct words
    /// (a result list with titles and urls) to similar questions means the questions were the
    /// same, so `similarity` applies. 0 disables.
    pub rich_data_words: usize,
    /// Similar calls with stagnant outputs, including the current one (LoopGuard: 3).
    pub levels: Levels,
}

impl Default for NearDupConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            window: 10,
            similarity: 0.3,
            similarity_data: 0.6,
            rich_data_words: 12,
            levels: Levels::new(3, 4, 8),
        }
    }
}

/// What a call's MinHash signature is computed from, kept in the smaller form. Most tool
/// arguments have one to a few features, and a window of full signatures (128 bytes each) was
/// the largest part of a run's state; the signature is recomputed, exactly, only when a call of
/// the same tool with a stagnant result is compared against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
enum Sig {
    /// The signature itself (also what records written before `Features` hold).
    Full(Vec<u32>),
    /// The feature hashes ([`feature_hashes`]), when there are at most [`Sig::MAX_FEATURES`].
    Features { f: Vec<u64> },
}

impl Sig {
    const MAX_FEATURES: usize = 8;

    fn of(hashes: Vec<u64>) -> Self {
        if hashes.len() <= Self::MAX_FEATURES {
            Sig::Features { f: hashes }
        } else {
            Sig::Full(minhash_of(hashes))
        }
    }

    fn full(&self) -> Cow<'_, [u32]> {
        match self {
            Sig::Full(s) => Cow::Borrowed(s),
            Sig::Features { f } => Cow::Owned(minhash_of(f.iter().copied())),
        }
    }

    /// [`similarity`] of the two signatures; `other_full` is `other.full()`.
    fn similarity<'a>(&self, other: &Sig, other_full: impl FnOnce() -> &'a [u32]) -> f64 {
        match (self, other) {
            // The same features give the same signature: all of its slots agree.
            (Sig::Features { f: a }, Sig::Features { f: b }) if a == b => 1.0,
            _ => similarity(&self.full(), other_full()),
        }
    }
}

/// Written as an array in field order (read from that or from the object of version 1
/// records): the changelog then repeats no field names for every window entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Call {
    step: u64,
    tool: u64,
    action: u64,
    kind: OutKind,
    /// Error key for failures, output key otherwise.
    result: u64,
    sig: Sig,
}

impl Serialize for Call {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (
            &self.step,
            &self.tool,
            &self.action,
            &self.kind,
            &self.result,
            &self.sig,
        )
            .serialize(s)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NearDupState {
    window: VecDeque<Call>,
    latch: Latch,
}

fn arg_text(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push(' ');
        }
        Value::Number(n) => {
            use std::fmt::Write;
            // Writing to a String cannot fail.
            let _ = write!(out, "{n} ");
        }
        Value::Bool(b) => out.push_str(if *b { "true " } else { "false " }),
        Value::Null => {}
        Value::Array(a) => a.iter().for_each(|x| arg_text(x, out)),
        Value::Object(m) => m.values().for_each(|x| arg_text(x, out)),
    }
}

fn stagnant(a: &Call, b: &Call) -> bool {
    match (a.kind, b.kind) {
        (OutKind::Failure, OutKind::Failure) => a.result == b.result,
        (OutKind::Empty, OutKind::Empty) => true,
        (OutKind::Data, OutKind::Data) => a.result == b.result,
        _ => false,
    }
}

impl NearDupState {
    pub fn on_step(&mut self, cfg: &NearDupConfig, v: &StepView<'_>, out: &mut Vec<Finding>) {
        if !cfg.enabled || !v.counted_tool() || v.class.is_repeatable() {
            return;
        }
        if matches!(
            v.fail_class(),
            Some(FailClass::Recoverable | FailClass::Retryable)
        ) {
            return;
        }
        let mut text = String::new();
        arg_text(&v.canon.input, &mut text);
        let hashes = feature_hashes(&normalize_message(&text));
        let features = hashes.len();
        let sig = Sig::of(hashes);
        // Needed only if some call of the same tool has a stagnant result too.
        let full: std::cell::OnceCell<Vec<u32>> = std::cell::OnceCell::new();
        let cur = Call {
            step: v.step.step_index,
            tool: v.tool_key,
            action: v.action_key,
            kind: v.out_kind,
            result: v.failure.as_ref().map_or(v.output_key, |f| f.error_key),
            sig,
        };
        let rich = cfg.rich_data_words > 0 && cur.kind == OutKind::Data && {
            let w = Words::of(&v.canon.output_text);
            let mut ws: Vec<&str> = w.iter().collect();
            ws.sort_unstable();
            ws.dedup();
            ws.len() >= cfg.rich_data_words
        };
        let cluster: Vec<&Call> = self
            .window
            .iter()
            .filter(|c| {
                let min = if cur.kind == OutKind::Data && !rich {
                    cfg.similarity_data
                } else {
                    cfg.similarity
                };
                c.tool == cur.tool
                    && stagnant(c, &cur)
                    && c.sig.similarity(&cur.sig, || {
                        full.get_or_init(|| cur.sig.full().into_owned())
                    }) >= min
            })
            .collect();
        let mut steps: Vec<u64> = cluster.iter().map(|c| c.step).collect();
        steps.push(cur.step);
        let inputs: BTreeSet<u64> = cluster
            .iter()
            .map(|c| c.action)
            .chain([cur.action])
            .collect();
        let hits = steps.len() as u32;
        // Exact repeats are `repeated_operation`'s; this detector is about paraphrases.
        let level = if features == 0 || inputs.len() < 2 || hits < cfg.levels.floor() {
            None
        } else {
            cfg.levels.level(hits)
        };
        if let Some(sev) = self.latch.rise(cur.tool, level) {
            let tool = v.tool.unwrap_or("?");
            out.push(Finding {
                detector: "near_duplicate",
                severity: sev,
                pattern: format!(
                    "{tool}: {hits} similar calls ({} distinct) with stagnant results",
                    inputs.len()
                ),
                fingerprint: hex64(cur.tool ^ cur.result),
                hits,
                first_step_index: steps[0],
                step_indices: steps,
                evidence: serde_json::json!({
                    "tool": tool,
                    "distinct_inputs": inputs.len(),
                    "similarity": cfg.similarity,
                    "output_kind": cur.kind,
                }),
                stop_reason: None,
                corroborating: true,
            });
        }
        push_bounded(&mut self.window, cur, cfg.window.max(1));
    }
}
