//! Near-duplicate repetition without any model or network: MinHash over content words and word
//! pairs of the normalised argument values (keys excluded, so `{"q": ...}` calls are compared by
//! what they ask). A cluster of similar calls to one tool counts only when their outputs are
//! stagnant too: the same failure, empty results, or the same non-trivial data. Paginated
//! reads and queries whose results change never form a cluster.
use super::history::{self, History, NEARDUP};
use super::{hex64, FailClass, Finding, Latch, Levels, OutKind, StepView};
use crate::engine::json::Json;
use crate::engine::text::{
    estimate, message_feature_hashes, minhash_into, minhash_of, signature_from, similarity,
    truncate, Signature, Words, MINHASH_K,
};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

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
    /// Similar calls with stagnant data, including the current one.
    pub levels: Levels,
    /// Similar calls that all found nothing, failed alike, or got the same rich answer (see
    /// `rich_data_words`): a reviewer calls three reworded searches that each come back empty,
    /// or with the same documents, a loop (LoopGuard: 3 similar calls). Short identical data
    /// is also how a batch of lookups looks, so those calls wait for `levels`.
    pub levels_strong: Levels,
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
            levels_strong: Levels::new(3, 3, 8),
        }
    }
}

/// What a call's MinHash signature is computed from, kept in the smaller form. Most tool
/// arguments have one to a few features, and a window of full signatures was the largest part
/// of a run's state; the signature is recomputed, exactly, only when a call of the same tool
/// with a stagnant result is compared against it. This is the records' form.
#[derive(Debug, Clone, PartialEq)]
enum Sig {
    /// The signature itself (also what records written before `Features` hold), as byte
    /// slots; records of version 3 hold 16-bit ones and earlier ones 32-bit ones, read as
    /// their low byte.
    Full(Vec<u32>),
    /// The feature hashes ([`crate::engine::text::feature_hashes`]), when there are at most
    /// [`MAX_FEATURES`] (records of version 3 and before allowed eight: more than
    /// [`MAX_FEATURES`] are read as the full signature they give).
    Features { f: Vec<u64> },
}

/// JSON records (versions 2 to 4) tell the forms apart by their shape.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum SigJson<V, F> {
    Full(V),
    Features { f: F },
}

/// Binary records name the form: reading an untagged enum buffers every entry's signature
/// to try each form in turn, the costliest part of a restore.
#[derive(Serialize, Deserialize)]
enum SigBinary<V, F> {
    Full(V),
    Features(F),
}

impl Serialize for Sig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        type Json<'a> = SigJson<&'a [u32], &'a [u64]>;
        type Binary<'a> = SigBinary<&'a [u32], &'a [u64]>;
        match (self, s.is_human_readable()) {
            (Sig::Full(v), true) => Json::Full(v).serialize(s),
            (Sig::Features { f }, true) => Json::Features { f }.serialize(s),
            (Sig::Full(v), false) => Binary::Full(v).serialize(s),
            (Sig::Features { f }, false) => Binary::Features(f).serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Sig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(if d.is_human_readable() {
            match SigJson::<Vec<u32>, Vec<u64>>::deserialize(d)? {
                SigJson::Full(v) => Sig::Full(v),
                SigJson::Features { f } => Sig::Features { f },
            }
        } else {
            match SigBinary::<Vec<u32>, Vec<u64>>::deserialize(d)? {
                SigBinary::Full(v) => Sig::Full(v),
                SigBinary::Features(f) => Sig::Features { f },
            }
        })
    }
}

/// Feature hashes (two words each) are kept instead of the signature while they are no
/// larger than it.
const MAX_FEATURES: usize = SIG_WORDS / 2;
/// Words of a full signature in [`NearDupState::buf`]: four byte slots to a word.
const SIG_WORDS: usize = MINHASH_K / 4;
// A call's stored signature, either form, fits in a `[u32; MINHASH_K]` scratch.
const _: () = assert!(2 * MAX_FEATURES <= MINHASH_K && SIG_WORDS <= MINHASH_K);

/// A signature as [`SIG_WORDS`] words: slot `4i + j` in byte `j` (from the low end) of word `i`.
fn pack(sig: &Signature) -> [u32; SIG_WORDS] {
    std::array::from_fn(|i| {
        u32::from_le_bytes([sig[4 * i], sig[4 * i + 1], sig[4 * i + 2], sig[4 * i + 3]])
    })
}

/// How many of the four bytes of `x` are not zero: a byte's high bit survives the mask and
/// its low seven bits carry into it only when the byte is not zero, and no carry crosses a
/// byte (at most 0x7f + 0x7f).
fn nonzero_bytes(x: u32) -> u32 {
    (((x & 0x7f7f_7f7f).wrapping_add(0x7f7f_7f7f) | x) & 0x8080_8080).count_ones()
}

/// [`pack`] undone; missing words (a malformed record's) read as an empty set's slots.
fn unpack(words: &[u32]) -> Signature {
    std::array::from_fn(|i| {
        words
            .get(i / 4)
            .map_or(u8::MAX, |w| (w >> (8 * (i % 4))) as u8)
    })
}

/// Scratch text kept between calls up to this capacity; a huge argument's is freed.
const SCRATCH_KEEP: usize = 64 * 1024;

/// A window entry as records hold it. Written as an array in field order (read from that or
/// from the object of version 1 records): the changelog then repeats no field names for every
/// window entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct CallRecord {
    step: u64,
    tool: u64,
    action: u64,
    kind: OutKind,
    /// Error key for failures, output key otherwise.
    result: u64,
    sig: Sig,
}

impl Serialize for CallRecord {
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

/// A call as compared: a window entry with its signature, or the current call.
#[derive(Clone, Copy)]
struct Call<'a> {
    tool: u64,
    result: u64,
    kind: OutKind,
    /// `sig` is the full signature ([`pack`]ed), else the feature hashes as (low, high) halves.
    full: bool,
    sig: &'a [u32],
}

/// `sig` as stored: (full, values).
fn encode(sig: Sig) -> (bool, Vec<u32>) {
    match sig {
        Sig::Full(s) => (
            true,
            pack(&signature_from(s.into_iter().map(u64::from))).to_vec(),
        ),
        Sig::Features { f } if f.len() > MAX_FEATURES => (true, pack(&minhash_of(&f)).to_vec()),
        Sig::Features { f } => (
            false,
            f.iter()
                .flat_map(|h| [*h as u32, (h >> 32) as u32])
                .collect(),
        ),
    }
}

impl Call<'_> {
    fn features(&self) -> impl Iterator<Item = u64> + '_ {
        self.sig
            .chunks_exact(2)
            .map(|p| u64::from(p[0]) | (u64::from(p[1]) << 32))
    }

    fn record_sig(&self) -> Sig {
        if self.full {
            Sig::Full(unpack(self.sig).map(u32::from).to_vec())
        } else {
            Sig::Features {
                f: self.features().collect(),
            }
        }
    }

    fn full_sig(&self) -> Signature {
        if self.full {
            unpack(self.sig)
        } else {
            // At most MAX_FEATURES features: gathered on the stack, not in a Vec.
            let mut hashes = [0u64; MAX_FEATURES];
            let mut n = 0;
            for (slot, h) in hashes.iter_mut().zip(self.features()) {
                *slot = h;
                n += 1;
            }
            minhash_of(&hashes[..n])
        }
    }

    /// [`similarity`] of the two signatures; `other_full` is `other.full_sig()`.
    fn similarity<'a>(&self, other: &Call<'_>, other_full: impl FnOnce() -> &'a Signature) -> f64 {
        if !self.full && !other.full && self.sig == other.sig {
            // The same features give the same signature: all of its slots agree.
            return 1.0;
        }
        if self.full && other.full && self.sig.len() == SIG_WORDS && other.sig.len() == SIG_WORDS {
            // Slot by slot on the packed words, without unpacking either.
            let same: u32 = self
                .sig
                .iter()
                .zip(other.sig)
                .map(|(a, b)| 4 - nonzero_bytes(a ^ b))
                .sum();
            return estimate(same);
        }
        similarity(&self.full_sig(), other_full())
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NearDupState {
    /// The window's entries end to end, oldest first, each a [`HEADER`] then its signature;
    /// the step and action are the shared [`History`]'s (bit [`NEARDUP`]), one entry per call
    /// of that window and in its order. One allocation per open run instead of a queue of
    /// entries and a buffer of signatures.
    buf: Vec<u32>,
    latch: Latch,
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
    fn entries<'a>(
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
    fn push(&mut self, evicted: usize, output: u64, c: &Call<'_>) {
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

/// The state as records hold it: with whole window entries.
#[derive(Deserialize)]
pub struct Record {
    window: VecDeque<CallRecord>,
    latch: Latch,
}

impl Record {
    pub fn restore(self, h: &mut History) -> NearDupState {
        let mut state = NearDupState {
            latch: self.latch,
            ..NearDupState::default()
        };
        for c in self.window {
            // The call is this window's alone: its output can hold the result.
            h.restore(
                history::Call::new(c.step, c.action, 0, c.result, 0, false),
                NEARDUP,
            );
            let (full, sig) = encode(c.sig);
            let call = Call {
                tool: c.tool,
                result: c.result,
                kind: c.kind,
                full,
                sig: &sig,
            };
            state.push(0, c.result, &call);
        }
        state
    }
}

/// Serialises the state with whole window entries, as [`Record`] reads it.
pub struct Ser<'a>(pub &'a NearDupState, pub &'a History);

impl Serialize for Ser<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        struct Window<'a>(&'a NearDupState, &'a History);
        impl Serialize for Window<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let calls = self.0.entries(self.1);
                s.collect_seq(calls.map(|(h, c)| CallRecord {
                    step: h.step,
                    tool: c.tool,
                    action: h.action,
                    kind: c.kind,
                    result: c.result,
                    sig: c.record_sig(),
                }))
            }
        }
        let mut st = s.serialize_struct("NearDupState", 2)?;
        st.serialize_field("window", &Window(self.0, self.1))?;
        st.serialize_field("latch", &self.0.latch)?;
        st.end()
    }
}

/// A call's signature as stored (`Call::full`, `Call::sig`) and its feature count, with the
/// canonical input it was computed from.
#[derive(Clone)]
struct SigMemo {
    /// Empty while the slot is unused (no canonical input is empty: `null` at least).
    input: String,
    features: usize,
    full: bool,
    len: usize,
    sig: [u32; MINHASH_K],
}

/// Slots of the memo: a fleet repeats the same arguments across its runs (and a looping run
/// repeats its own), so most calls find their signature here instead of tokenising, hashing and
/// MinHashing their arguments again.
const MEMO_SLOTS: usize = 128;
/// Longer canonical inputs are not memoised (bounds the memo's memory).
const MEMO_MAX_INPUT: usize = 256;

/// The detector's buffers and signature memo, lent by the partition's engine (see
/// [`super::Caches`]).
#[derive(Default)]
pub struct Scratch {
    /// The argument text and feature hashes of the call at hand: reused, so a call allocates
    /// neither.
    text: String,
    hashes: Vec<u64>,
    memo: Vec<SigMemo>,
}

/// The current call's signature into `sig` as stored, and (features, full, length). The
/// argument text is a function of the canonical input text (the normalised value it was written
/// from, whose objects hold their keys in the order written), so the memo is keyed by that
/// text, compared whole.
fn call_sig(v: &StepView<'_>, sig: &mut [u32; MINHASH_K], s: &mut Scratch) -> (usize, bool, usize) {
    let input = v.canon.input_text.as_str();
    let memo = !input.is_empty() && input.len() <= MEMO_MAX_INPUT;
    let slot = (v.action_key % MEMO_SLOTS as u64) as usize;
    {
        if memo {
            if let Some(m) = s.memo.get(slot).filter(|m| m.input == input) {
                sig[..m.len].copy_from_slice(&m.sig[..m.len]);
                return (m.features, m.full, m.len);
            }
        }
        s.text.clear();
        arg_text(&v.canon.input, &mut s.text);
        message_feature_hashes(&s.text, &mut s.hashes);
        let hashes = &s.hashes;
        let got = if hashes.len() <= MAX_FEATURES {
            for (d, h) in sig.chunks_exact_mut(2).zip(hashes.iter()) {
                d[0] = *h as u32;
                d[1] = (h >> 32) as u32;
            }
            (hashes.len(), false, 2 * hashes.len())
        } else {
            let mut full = [0; MINHASH_K];
            minhash_into(&mut full, hashes);
            sig[..SIG_WORDS].copy_from_slice(&pack(&truncate(&full)));
            (hashes.len(), true, SIG_WORDS)
        };
        if s.text.capacity() > SCRATCH_KEEP {
            s.text = String::new();
        }
        if memo {
            if s.memo.is_empty() {
                s.memo = vec![
                    SigMemo {
                        input: String::new(),
                        features: 0,
                        full: false,
                        len: 0,
                        sig: [0; MINHASH_K],
                    };
                    MEMO_SLOTS
                ];
            }
            if let Some(m) = s.memo.get_mut(slot) {
                m.input.clear();
                m.input.push_str(input);
                (m.features, m.full, m.len) = got;
                m.sig = *sig;
            }
        }
        got
    }
}

fn arg_text(v: &Json<'_>, out: &mut String) {
    match v {
        Json::String(s) => {
            out.push_str(s);
            out.push(' ');
        }
        Json::Number(n) => {
            use std::fmt::Write;
            // Writing to a String cannot fail.
            let _ = write!(out, "{n} ");
        }
        Json::Bool(b) => out.push_str(if *b { "true " } else { "false " }),
        Json::Null => {}
        Json::Array(a) => a.iter().for_each(|x| arg_text(x, out)),
        Json::Object(m) => m.values().for_each(|x| arg_text(x, out)),
    }
}

/// Outputs longer than this are compared by their exact key only: hashing them again on every
/// call would cost more than the rare reshuffled long answer is worth.
const BAG_MAX_OUTPUT: usize = 16 * 1024;

/// Whether data has at least `rich_words` distinct words.
fn is_rich_text(output_text: &str, rich_words: usize) -> bool {
    let w = Words::of(output_text);
    let mut all: Vec<&str> = w.iter().collect();
    all.sort_unstable();
    all.dedup();
    all.len() >= rich_words
}

/// Whether the value is, or holds at its top level, a list of two or more objects.
fn holds_records(v: &Json<'_>) -> bool {
    let records = |a: &[Json<'_>]| a.iter().filter(|e| matches!(e, Json::Object(_))).count() >= 2;
    match v {
        Json::Array(a) => records(a),
        Json::Object(o) => o
            .values()
            .any(|x| matches!(x, Json::Array(a) if records(a))),
        _ => false,
    }
}

fn fold(h: u64, x: u64) -> u64 {
    (h ^ x).wrapping_mul(0x0100_0000_01b3)
}

/// The key of a value with every list's elements in sorted order and generated identifiers
/// and scores (see [`token_key`], [`is_score`]) left out: a search that answers again with the
/// same documents in a new order, each with a fresh result id and relevance score, gives the
/// same key. Only lists are reordered: a text keeps its word order (the same words rearranged
/// are another text).
fn unordered_key(v: &Json<'_>) -> u64 {
    match v {
        Json::Null => 1,
        Json::Bool(b) => 2 + u64::from(*b),
        Json::Number(n) => match n.as_f64() {
            Some(x) if is_score(x) => 4,
            Some(x) => fold(8, x.to_bits()),
            None => fold(9, bytes_key(n.to_string().as_bytes())),
        },
        // Without a digit nothing in it is generated: the text as it is (most texts).
        Json::String(t) if !t.bytes().any(|c| c.is_ascii_digit()) => {
            fold(5, bytes_key(t.as_bytes()))
        }
        Json::String(t) => t
            .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '"' | '\'' | '(' | ')'))
            .filter(|t| !t.is_empty())
            .fold(10, |h, t| fold(h, token_key(t))),
        Json::Array(a) => {
            let mut keys: smallvec::SmallVec<[u64; 16]> = a.iter().map(unordered_key).collect();
            keys.sort_unstable();
            keys.into_iter().fold(6, fold)
        }
        // Entries are held in key order already.
        Json::Object(o) => o.iter().fold(7, |h, (k, v)| {
            fold(fold(h, bytes_key(k.as_bytes())), unordered_key(v))
        }),
    }
}

/// A number strictly between 0 and 1 with a fraction: a relevance score or a probability,
/// which a reworded query changes while the documents stay the same.
fn is_score(x: f64) -> bool {
    x > 0.0 && x < 1.0
}

/// A token's hash with its generated identifiers left out: a segment (between `.`, `/`, `_`,
/// `-`, `:`) of five characters or more that mixes letters with at least two digits, as in
/// `res_01f3a7` or `u_8c2d1e`. Names such as `manifest_0` or `v2` keep their digits.
fn token_key(t: &str) -> u64 {
    let mut h = 11;
    for seg in t.split(['.', '/', '_', '-', ':']) {
        let digits = seg.bytes().filter(u8::is_ascii_digit).count();
        let letters = seg.bytes().filter(u8::is_ascii_alphabetic).count();
        let generated = seg.len() >= 5 && digits >= 2 && letters >= 1;
        let part: &[u8] = if generated { b"#" } else { seg.as_bytes() };
        h = fold(h, bytes_key(part));
    }
    h
}

/// A hash of `b`, eight bytes at a step (splitmix64's finaliser after each): a key compared for
/// equality within one run's window, written to its records, so it must not change between
/// builds (no `std` hasher).
fn bytes_key(b: &[u8]) -> u64 {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut h = mix(b.len() as u64 ^ 0x9e37_79b9_7f4a_7c15);
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        h = mix(h ^ u64::from_le_bytes(c.try_into().expect("eight bytes")));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        h = mix(h ^ u64::from_le_bytes(last));
    }
    h
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
    pub fn on_step(
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
        let result = match &v.failure {
            Some(f) => f.error_key,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Step;
    use crate::engine::detectors::DetectorConfig;
    use crate::engine::text::{feature_hashes, normalize_message};

    fn step(tool: &str, input: &str) -> Step {
        let mut s = crate::engine::detectors::view::tests::step(tool, input, "null", Some(true));
        s.tool_output = None;
        s
    }

    /// The signature as computed before the memo: from the argument text, every time.
    fn fresh(v: &StepView<'_>) -> (usize, bool, Vec<u32>) {
        let mut text = String::new();
        arg_text(&v.canon.input, &mut text);
        let h = feature_hashes(&normalize_message(&text));
        if h.len() <= MAX_FEATURES {
            let (_, s) = encode(Sig::Features { f: h.clone() });
            (h.len(), false, s)
        } else {
            (h.len(), true, pack(&minhash_of(&h)).to_vec())
        }
    }

    fn key_of(text: &str) -> u64 {
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        unordered_key(&Json::from_value(v))
    }

    /// The same records in another order, with fresh generated ids and scores, are one answer;
    /// a changed record, a reordered text, or a renamed column are not.
    #[test]
    fn unordered_key_ignores_list_order_ids_and_scores_only() {
        let a = r#"{"results":[{"id":"res_1f3a7b","score":0.91,"title":"Acme leadership"},{"id":"res_9c2d10","score":0.4,"title":"Acme profile"}]}"#;
        let b = r#"{"results":[{"id":"res_77e0a1","score":0.12,"title":"Acme profile"},{"id":"res_0b5c3d","score":0.83,"title":"Acme leadership"}]}"#;
        assert_eq!(key_of(a), key_of(b));
        let other_doc = r#"{"results":[{"id":"res_77e0a1","score":0.12,"title":"Acme profile"},{"id":"res_0b5c3d","score":0.83,"title":"Acme history"}]}"#;
        assert_ne!(key_of(a), key_of(other_doc));
        assert_ne!(
            key_of(r#"{"text":"the cache was flushed before the deploy"}"#),
            key_of(r#"{"text":"the deploy was flushed before the cache"}"#)
        );
        assert_ne!(
            key_of(r#"{"columns":[{"name":"manifest_0"},{"name":"invoice_1"}]}"#),
            key_of(r#"{"columns":[{"name":"manifest_1"},{"name":"invoice_0"}]}"#)
        );
        // Counts are data, not scores.
        assert_ne!(
            key_of(r#"{"rows":[[1,5916]]}"#),
            key_of(r#"{"rows":[[1,4072]]}"#)
        );
    }

    /// Packed signatures compare as the unpacked ones do, and unpack to what was packed.
    #[test]
    fn packed_signatures_compare_as_unpacked() {
        let texts = [
            "latest release notes for tokio runtime and its scheduler",
            "release notes for the latest tokio runtime scheduler",
            "select id, status from orders where status is open order by created",
            "",
        ];
        let sigs: Vec<Signature> = texts
            .iter()
            .map(|t| crate::engine::text::feature_sig(t, 0, &mut Vec::new()).1)
            .collect();
        for a in &sigs {
            let pa = pack(a);
            assert_eq!(unpack(&pa), *a);
            for b in &sigs {
                let pb = pack(b);
                let call = |sig| Call {
                    tool: 1,
                    result: 2,
                    kind: OutKind::Empty,
                    full: true,
                    sig,
                };
                let got = call(&pa[..]).similarity(&call(&pb[..]), || b);
                assert_eq!(got, similarity(a, b));
            }
        }
        assert!(similarity(&sigs[0], &sigs[1]) > similarity(&sigs[0], &sigs[2]));
    }

    proptest::proptest! {
        /// Byte by byte on the packed words, including the bytes whose high bit alone differs.
        #[test]
        fn packed_comparison_counts_agreeing_slots(
            a in proptest::array::uniform32(proptest::prelude::any::<u8>()),
            other in proptest::array::uniform32(proptest::prelude::any::<u8>()),
            keep in proptest::array::uniform32(0u8..4),
        ) {
            // Slots of `b` equal `a`'s, differ in the high bit only, or are unrelated.
            let b: Signature = std::array::from_fn(|i| match keep[i] {
                0 | 1 => a[i],
                2 => a[i] ^ 0x80,
                _ => other[i],
            });
            let (pa, pb) = (pack(&a), pack(&b));
            proptest::prop_assert_eq!(unpack(&pa), a);
            let call = |sig| Call { tool: 1, result: 2, kind: OutKind::Empty, full: true, sig };
            let packed = call(&pa[..]).similarity(&call(&pb[..]), || &b);
            proptest::prop_assert_eq!(packed, similarity(&a, &b));
        }
    }

    /// Records of version 3 and before kept up to eight feature hashes; past [`MAX_FEATURES`]
    /// they restore as the full signature of those features, not cut to the first few.
    #[test]
    fn records_with_more_features_restore_as_their_signature() {
        let f: Vec<u64> = (1..=8u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        assert!(f.len() > MAX_FEATURES);
        assert_eq!(
            encode(Sig::Features { f: f.clone() }),
            (true, pack(&minhash_of(&f)).to_vec())
        );
        let few = f[..MAX_FEATURES].to_vec();
        let (full, words) = encode(Sig::Features { f: few.clone() });
        let c = Call {
            tool: 1,
            result: 2,
            kind: OutKind::Empty,
            full,
            sig: &words,
        };
        assert!(!full);
        assert_eq!(c.full_sig(), minhash_of(&few));
    }

    #[test]
    fn memoised_signatures_are_the_computed_ones() {
        let cfg = DetectorConfig::default();
        let inputs = [
            r#"{"path":"src/mod1.rs"}"#,
            r#"{"q":"latest release notes for tokio","limit":5}"#,
            r#"{"limit":5,"q":"latest release notes for tokio"}"#,
            r#"{"q":"the a of"}"#,
            r#"{"query":"select * from orders where id = 42 and status = 'open' order by created desc"}"#,
            r#"{"at":"2024-05-01","time":"10:00"}"#,
            r#"{"q":"caf\u00e9 \u03a3\u03a3 x-y"}"#,
            "{}",
            "null",
        ];
        // Twice over, and under several tools (other slots, same texts): hits and misses.
        let (mut memos, mut scratch) = (Default::default(), Scratch::default());
        for round in 0..2 {
            for tool in ["search", "web_search", "sql"] {
                for input in inputs {
                    let s = step(tool, input);
                    let c = cfg.canonical(&s);
                    let v = StepView::new(&cfg, &s, &c, &mut memos);
                    let mut sig = [0; MINHASH_K];
                    let (n, full, len) = call_sig(&v, &mut sig, &mut scratch);
                    assert_eq!(
                        (n, full, sig[..len].to_vec()),
                        fresh(&v),
                        "{round} {tool} {input}"
                    );
                }
            }
        }
    }
}
