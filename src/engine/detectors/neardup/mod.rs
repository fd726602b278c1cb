//! Near-duplicate repetition without any model or network: MinHash over content words and word
//! pairs of the normalised argument values (keys excluded, so `{"q": ...}` calls are compared by
//! what they ask). A cluster of similar calls to one tool counts only when their outputs are
//! stagnant too: the same failure, empty results, or the same non-trivial data. Paginated
//! reads and queries whose results change never form a cluster.
//!
//! Here the detector and its window (entries packed end to end in one buffer); the signature
//! forms in `signature`, their memo in `memo` and the order-blind keys of data in `unordered`.
//! Records hold the window entries whole (`changelog::state`).
mod memo;
pub(crate) mod signature;
#[cfg(test)]
mod tests;
mod unordered;

use super::history::{self, History, NEARDUP};
use super::{hex64, FailClass, Finding, Latch, Levels, OutKind, StepView};
use crate::engine::text::{Signature, MINHASH_K};
use memo::call_sig;
pub(crate) use memo::Scratch;
use serde::{Deserialize, Serialize};
use signature::Call;
use unordered::{holds_records, is_rich_text, unordered_key, BAG_MAX_OUTPUT};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct NearDupConfig {
    pub(crate) enabled: bool,
    /// Recent counted tool calls compared against (LoopGuard semantic: window 6).
    pub(crate) window: usize,
    /// Estimated Jaccard similarity of argument features (LoopGuard semantic: cosine 0.8 on
    /// embeddings; word-feature Jaccard runs lower for the same paraphrases).
    pub(crate) similarity: f64,
    /// When the shared result is the same non-empty data, stricter: lookups of different
    /// entities often return identical data (`{"plan": "pro"}`) and are a batch, not a loop.
    pub(crate) similarity_data: f64,
    /// ... unless that data is rich: an identical answer of at least this many distinct words
    /// (a result list with titles and urls) to similar questions means the questions were the
    /// same, so `similarity` applies. 0 disables.
    pub(crate) rich_data_words: usize,
    /// Similar calls with stagnant data, including the current one.
    pub(crate) levels: Levels,
    /// Similar calls that all found nothing, failed alike, or got the same rich answer (see
    /// `rich_data_words`): a reviewer calls three reworded searches that each come back empty,
    /// or with the same documents, a loop (LoopGuard: 3 similar calls). Short identical data
    /// is also how a batch of lookups looks, so those calls wait for `levels`.
    pub(crate) levels_strong: Levels,
}

impl Default for NearDupConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            window: 10,
            similarity: 0.3,
            similarity_data: 0.6,
            rich_data_words: 12,
            levels: Levels::new(3, 4, 5),
            levels_strong: Levels::new(3, 3, 3),
        }
    }
}

/// Words of a window entry's header in [`NearDupState::buf`]: the tool (2), then the
/// signature's length, whether a result follows, the kind and the form, packed as
/// `len << 5 | has_result << 4 | kind << 1 | full`. The result (2 words) follows only for
/// failures (whose result is the error, not the history call's output): most entries do
/// without it.
const HEADER: usize = 3;
const MAX_SIG: usize = (1 << 27) - 1;

fn kind_code(k: OutKind) -> u32 {
    match k {
        OutKind::NoTool => 0,
        OutKind::Failure => 1,
        OutKind::Empty => 2,
        OutKind::Ack => 3,
        OutKind::Data => 4,
    }
}

fn kind_of(code: u32) -> OutKind {
    match code {
        0 => OutKind::NoTool,
        1 => OutKind::Failure,
        2 => OutKind::Empty,
        3 => OutKind::Ack,
        _ => OutKind::Data,
    }
}

fn join64(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | (u64::from(hi) << 32)
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NearDupState {
    /// The window's entries end to end, oldest first, each a [`HEADER`] then its signature;
    /// the step and action are the shared [`History`]'s (bit [`NEARDUP`]), one entry per call
    /// of that window and in its order. One allocation per open run instead of a queue of
    /// entries and a buffer of signatures.
    buf: Vec<u32>,
    /// Crate-visible for `changelog::state`, as are `entries` and `push`.
    pub(crate) latch: Latch,
}

impl NearDupState {
    /// The entry at `at` (whose history call has output `output`) and where the next one
    /// starts; `None` past the end.
    fn entry_at(&self, at: usize, output: u64) -> Option<(Call<'_>, usize)> {
        let h = self.buf.get(at..at.checked_add(HEADER)?)?;
        let meta = h[2];
        let mut start = at + HEADER;
        let mut result = output;
        if meta & 16 != 0 {
            let r = self.buf.get(start..start + 2)?;
            result = join64(r[0], r[1]);
            start += 2;
        }
        let end = start
            .saturating_add((meta >> 5) as usize)
            .min(self.buf.len());
        let call = Call {
            tool: join64(h[0], h[1]),
            result,
            kind: kind_of((meta >> 1) & 7),
            full: meta & 1 != 0,
            sig: &self.buf[start..end],
        };
        Some((call, end))
    }

    /// The window's entries with their history calls (the window of bit [`NEARDUP`]).
    pub(crate) fn entries<'a>(
        &'a self,
        hist: &'a History,
    ) -> impl Iterator<Item = (history::Call, Call<'a>)> + 'a {
        let mut at = 0usize;
        hist.members(NEARDUP).map_while(move |h| {
            let (c, next) = self.entry_at(at, h.output)?;
            at = next;
            Some((h, c))
        })
    }

    /// Whether some entry is of tool `tool` and kind `kind`: read from the entries alone,
    /// without their history calls. It may see entries `entries` would not (a malformed
    /// record's surplus), never fewer, so `false` means no entry of `entries` matches.
    fn any_like(&self, tool: u64, kind: OutKind) -> bool {
        let mut at = 0usize;
        while let Some((c, next)) = self.entry_at(at, 0) {
            if c.tool == tool && c.kind == kind {
                return true;
            }
            if next <= at {
                break;
            }
            at = next;
        }
        false
    }

    /// Append an entry after `evicted` of the oldest left the window. `output` is the entry's
    /// history call's.
    pub(crate) fn push(&mut self, evicted: usize, output: u64, c: &Call<'_>) {
        let mut at = 0usize;
        for _ in 0..evicted {
            // Only the length matters here, not the result an entry would resolve to.
            match self.entry_at(at, 0) {
                Some((_, next)) => at = next,
                None => break,
            }
        }
        self.buf.drain(..at.min(self.buf.len()));
        // Longer signatures than the header can say exist in no record (128 values at most
        // are computed here); cut, so the buffer stays well-formed whatever a record holds.
        let sig = &c.sig[..c.sig.len().min(MAX_SIG)];
        // Decided by the kind, not by comparing, so a restored window (whose calls' outputs
        // are the results) is laid out as the live one was. Data entries keep their own
        // result: rich data is compared by its unordered key, not by the call's output.
        let own_result = matches!(c.kind, OutKind::Failure | OutKind::Data) || c.result != output;
        let need = HEADER + 2 * usize::from(own_result) + sig.len();
        // Exactly (see `super::grow_exact`).
        self.buf.reserve_exact(need);
        let meta = (sig.len() as u32) << 5
            | u32::from(own_result) << 4
            | kind_code(c.kind) << 1
            | u32::from(c.full);
        self.buf
            .extend_from_slice(&[c.tool as u32, (c.tool >> 32) as u32, meta]);
        if own_result {
            self.buf
                .extend_from_slice(&[c.result as u32, (c.result >> 32) as u32]);
        }
        self.buf.extend_from_slice(sig);
    }
}

fn stagnant(a: &Call<'_>, b: &Call<'_>) -> bool {
    match (a.kind, b.kind) {
        (OutKind::Failure, OutKind::Failure) => a.result == b.result,
        (OutKind::Empty, OutKind::Empty) => true,
        (OutKind::Data, OutKind::Data) => a.result == b.result,
        _ => false,
    }
}

impl NearDupState {
    pub(crate) fn on_step(
        &mut self,
        cfg: &NearDupConfig,
        v: &StepView<'_>,
        hist: &mut History,
        scratch: &mut Scratch,
        out: &mut Vec<Finding>,
    ) {
        if !cfg.enabled || !v.counted_tool() || v.class.is_repeatable() {
            return;
        }
        if matches!(
            v.fail_class(),
            Some(FailClass::Recoverable | FailClass::Retryable)
        ) {
            return;
        }
        // The current call's signature as stored: at most `MAX_FEATURES` feature hashes as
        // (low, high) halves, else the full signature; both fit here, so nothing is allocated.
        let mut sig_buf = [0u32; MINHASH_K];
        let (features, full_now, sig_len) = call_sig(v, &mut sig_buf, scratch);
        // Needed only if some call of the same tool has a stagnant result too.
        let full: std::cell::OnceCell<Signature> = std::cell::OnceCell::new();
        let (cur_step, cur_action) = (v.step.step_index, v.action_key);
        // Lists of records are compared without their order (the same documents reshuffled,
        // see `unordered_key`), from the parsed value: no tokenising.
        let bag_key = match (&v.failure, v.out_kind) {
            (None, OutKind::Data)
                if cfg.rich_data_words > 0
                    && v.canon.output_text.len() <= BAG_MAX_OUTPUT
                    && holds_records(&v.canon.output) =>
            {
                Some(unordered_key(&v.canon.output))
            }
            _ => None,
        };
        // A permanent failure is stagnant by the shape of its refusal: the same error naming
        // the slightly different thing each call asked for.
        let result = match &v.failure {
            Some(f) => f.shape_key,
            None => bag_key.unwrap_or(v.output_key),
        };
        let cur = Call {
            tool: v.tool_key,
            result,
            kind: v.out_kind,
            full: full_now,
            sig: &sig_buf[..sig_len],
        };
        // Read only when a stagnant entry of the same tool is met, at most once.
        let rich = std::cell::OnceCell::new();
        let is_rich =
            || *rich.get_or_init(|| is_rich_text(&v.canon.output_text, cfg.rich_data_words));
        // Without features there is no level whatever the window holds (below): no cluster.
        // Nor without an entry of the same tool and kind (a stagnant pair needs both).
        let unlike = !matches!(cur.kind, OutKind::Failure | OutKind::Empty | OutKind::Data)
            || !self.any_like(cur.tool, cur.kind);
        debug_assert!(
            !unlike
                || self
                    .entries(hist)
                    .all(|(_, c)| c.tool != cur.tool || !stagnant(&c, &cur)),
            "a window entry could join the cluster"
        );
        // On the stack: a cluster forms on a fifth of the calls, and is rarely long.
        let cluster: smallvec::SmallVec<[(history::Call, Call<'_>); 4]> = if features == 0 || unlike
        {
            smallvec::SmallVec::new()
        } else {
            self.entries(hist)
                .filter(|(_, c)| {
                    if c.tool != cur.tool || !stagnant(c, &cur) {
                        return false;
                    }
                    let rich = cfg.rich_data_words > 0 && cur.kind == OutKind::Data && is_rich();
                    let min = if cur.kind == OutKind::Data && !rich {
                        cfg.similarity_data
                    } else {
                        cfg.similarity
                    };
                    c.similarity(&cur, || full.get_or_init(|| cur.full_sig())) >= min
                })
                .collect()
        };
        let hits = cluster.len() as u32 + 1;
        let distinct = if cluster.is_empty() {
            1
        } else {
            let mut inputs: Vec<u64> = cluster
                .iter()
                .map(|(h, _)| h.action)
                .chain([cur_action])
                .collect();
            inputs.sort_unstable();
            inputs.dedup();
            inputs.len()
        };
        // Exact repeats are `repeated_operation`'s; this detector is about paraphrases.
        let strong = match cur.kind {
            OutKind::Empty | OutKind::Failure => true,
            // The same rich list of records (documents) for a reworded question; one identical
            // text (a test run's summary) is also what different commands print, and a short
            // list what a batch of lookups returns.
            OutKind::Data => bag_key.is_some() && hits >= 2 && is_rich(),
            _ => false,
        };
        let levels = if strong {
            &cfg.levels_strong
        } else {
            &cfg.levels
        };
        let level = if features == 0 || distinct < 2 || hits < levels.floor() {
            None
        } else {
            levels.level(hits)
        };
        // Listed only when a finding may follow (the cluster borrows the window).
        let steps = level.map(|_| {
            let mut steps: Vec<u64> = cluster.iter().map(|(h, _)| h.step).collect();
            steps.push(cur_step);
            steps
        });
        drop(cluster);
        if let (Some(sev), Some(steps)) = (self.latch.rise(cur.tool, level), steps) {
            let tool = v.tool.unwrap_or("?");
            out.push(Finding {
                detector: "near_duplicate",
                severity: sev,
                pattern: format!(
                    "{tool}: {hits} similar calls ({distinct} distinct) with stagnant results"
                ),
                fingerprint: hex64(cur.tool ^ cur.result),
                hits,
                first_step_index: steps[0],
                step_indices: steps,
                evidence: serde_json::json!({
                    "tool": tool,
                    "distinct_inputs": distinct,
                    "similarity": cfg.similarity,
                    "output_kind": cur.kind,
                }),
                stop_reason: None,
                corroborating: true,
            });
        }
        let cap = cfg.window.max(1);
        let evicted = hist.join(NEARDUP, cap);
        self.push(evicted, v.output_key, &cur);
    }
}
