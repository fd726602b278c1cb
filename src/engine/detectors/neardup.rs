//! Near-duplicate repetition without any model or network: MinHash over content words and word
//! pairs of the normalised argument values (keys excluded, so `{"q": ...}` calls are compared by
//! what they ask). A cluster of similar calls to one tool counts only when their outputs are
//! stagnant too: the same failure, empty results, or the same non-trivial data. Paginated
//! reads and queries whose results change never form a cluster.
use super::{hex64, push_bounded, FailClass, Finding, Latch, Levels, OutKind, StepView};
use crate::engine::text::{minhash, normalize_message, similarity, text_features, words};
use serde::{Deserialize, Serialize};
use serde_json::Value;
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Call {
    step: u64,
    tool: u64,
    action: u64,
    kind: OutKind,
    /// Error key for failures, output key otherwise.
    result: u64,
    sig: Vec<u32>,
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
            out.push_str(&n.to_string());
            out.push(' ');
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
        let feats = text_features(&normalize_message(&text));
        let cur = Call {
            step: v.step.step_index,
            tool: v.tool_key,
            action: v.action_key,
            kind: v.out_kind,
            result: v.failure.as_ref().map_or(v.output_key, |f| f.error_key),
            sig: minhash(feats.iter().map(String::as_str)),
        };
        let rich = cfg.rich_data_words > 0 && cur.kind == OutKind::Data && {
            let mut ws = words(&v.canon.output_text);
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
                c.tool == cur.tool && stagnant(c, &cur) && similarity(&c.sig, &cur.sig) >= min
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
        let level = if feats.is_empty() || inputs.len() < 2 || hits < cfg.levels.floor() {
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
