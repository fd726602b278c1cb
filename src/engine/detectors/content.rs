//! Content repetition, for steps without a tool (thoughts, messages):
//! * the same thought (or a near-paraphrase) three times with no new tool output in between
//!   (OpenHands' monologue rule: 3), so a "Let me check the file." preamble before real work
//!   never counts;
//! * empty responses three times in a row (OpenHands: 3 consecutive empty agent messages);
//! * chanting inside one message (Gemini CLI): most of the text is made of 50-character chunks
//!   already seen earlier in the same message (a sentence repeated, or short phrases
//!   alternating), after what Gemini CLI users reported as false positives is removed: code
//!   blocks, tables, headings, dividers, box-drawing lines, and list markers;
//! * monologue (OpenHands: three consecutive agent messages with no observation in between):
//!   agent messages back to back, with no tool call, no input (a user step, a handoff) in
//!   between, each after the first saying nothing new: empty of content (an announcement of
//!   what the agent is about to do, which it then does not do) or like an earlier one of the
//!   streak. A multi-part answer, whose parts each bring new text, stays quiet; thoughts
//!   (reasoning steps) neither count nor break a streak;
//! * a plan restated: reasoning steps back to back, with no tool call, input or message in
//!   between, two or more of them restating an earlier one of the streak: sharing its content
//!   words in another sentence frame (the same plan in other words: reasoning
//!   models that plan in their thinking and never act, opencode#15271). A chain of reasoning
//!   whose steps each bring new words stays quiet, and so do a template filled in with new
//!   words each time (`Step 12: checking ...`), which is a log, not a restatement, and steps
//!   that each name a new file or identifier to work on.
use super::{hex64, push_bounded, Finding, Latch, Levels, Progress, StepView};
use crate::contract::Severity;
use crate::engine::text::{
    contains_ci, feature_sig, fnv64, key64, normalize_message, similarity, Signature,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::LazyLock;
use thin_vec::ThinVec;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ContentConfig {
    pub(crate) enabled: bool,
    pub(crate) window: usize,
    pub(crate) repeat: Levels,
    /// Paraphrases count when the MinHash similarity reaches this (messages of 5+ features).
    pub(crate) similarity: f64,
    pub(crate) empty: Levels,
    /// Chanting: chunk length in characters, minimum message length, minimum share of the
    /// message made of repeated chunks, and minimum repeats of the most frequent chunk.
    pub(crate) chant_chunk: usize,
    pub(crate) chant_min_chars: usize,
    pub(crate) chant_repeated_share: f64,
    pub(crate) chant_min_repeats: u32,
    /// Chanting this dense (share of repeated chunks, and repeats of the top chunk: Gemini CLI
    /// halts the stream at 10) stops rather than alerts.
    pub(crate) chant_stop_share: f64,
    pub(crate) chant_stop_repeats: u32,
    /// Agent messages in a streak with nothing new after the first (OpenHands: 3).
    pub(crate) monologue: Levels,
    /// A message of the streak like an earlier one at this MinHash similarity says nothing new.
    pub(crate) monologue_similarity: f64,
    /// An announcement ("let me check the logs") of at most this many words says nothing new.
    pub(crate) monologue_announcement_words: usize,
    /// Reasoning steps of a streak that state one plan: the first, and those restating it.
    pub(crate) restated_plan: Levels,
    /// A reasoning step of the streak restates an earlier one at this MinHash similarity of
    /// their content words and word pairs: a restatement in other words keeps the plan's
    /// nouns, and shares far more than the steps of a reasoning chain do.
    pub(crate) restated_plan_similarity: f64,
}

impl Default for ContentConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            window: 10,
            repeat: Levels::new(2, 3, 3),
            similarity: 0.7,
            empty: Levels::new(0, 3, 3),
            chant_chunk: 50,
            chant_min_chars: 250,
            chant_repeated_share: 0.6,
            chant_min_repeats: 5,
            chant_stop_share: 0.6,
            chant_stop_repeats: 5,
            monologue: Levels::new(0, 3, 3),
            monologue_similarity: 0.4,
            monologue_announcement_words: 30,
            restated_plan: Levels::new(0, 3, 4),
            restated_plan_similarity: 0.15,
        }
    }
}

/// A thought (or message) in the window. Written as an array in field order (see
/// `changelog::state::content`); fields are crate-visible for it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Thought {
    pub(crate) step: u64,
    pub(crate) key: u64,
    pub(crate) sig: Signature,
    pub(crate) rich: bool,
    /// The run's information count when the thought was seen, in 32 bits (saturating), so a
    /// thought takes 56 bytes, not 64: runs do not reach four billion novel outputs, and one
    /// that did would only stop matching thoughts as repeats (see [`same_info`]).
    pub(crate) novel_at: u32,
    /// [`ANSWERED`], [`MESSAGE`], [`IDLE`] in the low four bits, the
    /// [`skeleton`] of a reasoning step in the high four; records written before monologues
    /// were judged hold none (their streaks start over).
    pub(crate) flags: u8,
    /// The [`target`] a reasoning step names, 0 for none (and in records written before plans
    /// were judged). In what was padding: a thought still takes 56 bytes.
    pub(crate) target: u8,
}

/// A tool call or new input (a user step, a handoff) came after this step: a monologue streak
/// goes back to the step after the newest such one.
const ANSWERED: u8 = 1;
/// An agent message (not a thought, not input).
const MESSAGE: u8 = 2;
/// A message that said nothing new in its streak.
const IDLE: u8 = 4;
/// What a reasoning step names last that a restatement of a plan would name again: its last
/// path or code identifier (`app/replica/invoice_load.py`, `ledger.Close`, `FEATURE_FLAG_V2`),
/// in eight bits, 0 for none. A step naming a new target moves the work on, whatever words it
/// shares with the plan.
fn target(norm: &str) -> u8 {
    let b = norm.as_bytes();
    let mut last = None;
    // Identifiers join words with `/`, `_` or `.`; most steps have only sentence ends.
    for at in memchr::memchr3_iter(b'/', b'_', b'.', b) {
        let before = at > 0 && b[at - 1].is_ascii_alphanumeric();
        let after = b.get(at + 1).is_some_and(u8::is_ascii_alphanumeric);
        // `a.b`, `a/b`, `a_`, `_b`, `/b`: a sentence's `end. Next` is none.
        if !(after && (before || b[at] != b'.')) && !(before && b[at] != b'.') {
            continue;
        }
        let start = b[..at]
            .iter()
            .rposition(u8::is_ascii_whitespace)
            .map_or(0, |i| i + 1);
        let end = b[at..]
            .iter()
            .position(u8::is_ascii_whitespace)
            .map_or(b.len(), |i| at + i);
        if b[start..end].iter().any(u8::is_ascii_alphabetic) {
            last = Some(&norm[start..end]);
        }
    }
    last.map_or(0, |w| {
        let w = w.trim_matches(|c: char| !c.is_alphanumeric());
        (fnv64(w.as_bytes()) as u8).max(1)
    })
}

/// Where [`skeleton`] is kept in [`Thought::flags`].
const SKELETON_SHIFT: u8 = 4;

/// The sentence frame of a reasoning step, in four bits: its first and last words, with words
/// that name something (digits, paths, identifiers) masked. A template filled in with new
/// words (`Step 12: checking the cache before the change.`) keeps its frame; a restatement in
/// other words rarely does (1 in 16 by chance, which only hides that restatement).
fn skeleton(norm: &str) -> u8 {
    fn mask(w: &str) -> &str {
        if w.bytes()
            .any(|b| b.is_ascii_digit() || matches!(b, b'/' | b'.' | b'_'))
        {
            "*"
        } else {
            w
        }
    }
    let mut toks = norm
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty());
    let first = mask(toks.next().unwrap_or_default());
    let last = mask(toks.next_back().unwrap_or_default());
    // FNV, not SHA-256: four bits of two words, for every reasoning step.
    let mut h = fnv64(first.as_bytes());
    h ^= fnv64(last.as_bytes()).rotate_left(17);
    (h & 0xf) as u8
}

/// Whether a thought was seen at information count `info`; never past 32 bits.
pub(crate) fn same_info(t: &Thought, info: u64) -> bool {
    t.novel_at != u32::MAX && u64::from(t.novel_at) == info
}

/// Record shape in `changelog::state::content`; fields are crate-visible for it.
#[derive(Debug, Clone, Default)]
pub struct ContentState {
    pub(crate) thoughts: VecDeque<Thought>,
    /// Nearly always empty: thin (8 bytes inline, no allocation while empty), and freed when
    /// a streak ends, so the boxed state of most runs is 64 bytes, not 80.
    pub(crate) empty_streak: ThinVec<u64>,
    pub(crate) empty_novel_at: u64,
    /// Messages unlike any recent one: in a conversation a new message is new information,
    /// just as a new tool output is.
    pub(crate) novel_messages: u64,
    pub(crate) latch: Latch,
}

// Boxed for most runs (they have thoughts): 64 bytes is an allocator size class, 80 the next.
const _: () = assert!(std::mem::size_of::<ContentState>() <= 64);

/// The derived equality, but for `empty_streak`: the derive compares a `[u64]` with `memcmp`,
/// which for an empty one may read a dangling pointer with a masked load, and that costs a
/// fault assist (tens of nanoseconds) on AVX-512 machines. This runs on every tool step
/// of every run (`Lazy::with` compares the state with its default), nearly always on empty
/// vectors.
impl PartialEq for ContentState {
    fn eq(&self, other: &Self) -> bool {
        let Self {
            thoughts,
            empty_streak,
            empty_novel_at,
            novel_messages,
            latch,
        } = self;
        *thoughts == other.thoughts
            && empty_streak.len() == other.empty_streak.len()
            && empty_streak.iter().eq(&other.empty_streak)
            && *empty_novel_at == other.empty_novel_at
            && *novel_messages == other.novel_messages
            && *latch == other.latch
    }
}

/// Distinct features a thought needs before it is compared by similarity, not only by
/// identity: below that, a signature says little.
const RICH_FEATURES: usize = 5;

/// The latch keys of the two rules: constants, hashed once rather than on every thought.
static EMPTY_KEY: LazyLock<u64> = LazyLock::new(|| key64("content.empty", &[]));
static REPEAT_KEY: LazyLock<u64> = LazyLock::new(|| key64("content.repeat", &[]));
static MONOLOGUE_KEY: LazyLock<u64> = LazyLock::new(|| key64("content.monologue", &[]));
static PLAN_KEY: LazyLock<u64> = LazyLock::new(|| key64("content.restated_plan", &[]));

/// What a step without a tool is, read from its free-form `step_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Said {
    /// Reasoning, plans, compaction summaries: not addressed to anyone.
    Thought,
    /// What the agent is given: a user turn, an observation, a system prompt.
    Input,
    Message,
}

fn said(step_type: &str) -> Said {
    let has = |xs: &[&str]| xs.iter().any(|x| contains_ci(step_type, x));
    if has(&[
        "user",
        "human",
        "input",
        "observation",
        "system",
        "environment",
        "feedback",
        "prompt",
        "tool_result",
    ]) {
        Said::Input
    } else if has(&[
        "think", "thought", "reason", "plan", "reflect", "compact", "condens", "summar",
    ]) {
        Said::Thought
    } else {
        Said::Message
    }
}

/// Phrases that announce an action: a message made of little else, followed by another
/// message instead of the action, is the agent talking to itself.
const ANNOUNCE: &[&str] = &[
    "let me",
    "let's",
    "lets ",
    "i will",
    "i'll",
    "ill ",
    "i am going to",
    "i'm going to",
    "im going to",
    "i need to",
    "i should",
    "now i",
    "next i",
    "i'm now",
    "i am now",
    "still ",
    "thinking",
    "working on",
    "one moment",
    "please wait",
];

fn announcement(norm: &str, max_words: usize) -> bool {
    norm.split_whitespace().nth(max_words).is_none() && ANNOUNCE.iter().any(|a| norm.contains(a))
}

impl ContentState {
    pub(crate) fn on_step(
        &mut self,
        cfg: &ContentConfig,
        v: &StepView<'_>,
        before: &Progress,
        now: &Progress,
        features: &mut Vec<u64>,
        out: &mut Vec<Finding>,
    ) {
        if !cfg.enabled {
            return;
        }
        if v.tool.is_some() {
            if now.novel_outputs != before.novel_outputs {
                self.empty_streak = ThinVec::new();
            }
            self.answered();
            return;
        }
        let Some(content) = v.canon.content(v.step) else {
            return;
        };
        let step = v.step.step_index;
        let novel = now.novel_outputs;
        if content.trim().is_empty() {
            if self.empty_novel_at != novel {
                self.empty_streak = ThinVec::new();
            }
            self.empty_novel_at = novel;
            if self.empty_streak.len() < 64 {
                super::grow_exact_thin(&mut self.empty_streak);
                self.empty_streak.push(step);
            }
            let n = self.empty_streak.len() as u32;
            let key = *EMPTY_KEY;
            if let Some(sev) = self.latch.rise(key, cfg.empty.level(n)) {
                out.push(finding(
                    "empty responses",
                    sev,
                    key,
                    n,
                    self.empty_streak.to_vec(),
                    serde_json::json!({"rule": "empty_response"}),
                ));
            }
            return;
        }
        self.empty_streak = ThinVec::new();
        self.latch.rearm(*EMPTY_KEY);

        if let Some(f) = chanting(cfg, content, step) {
            out.push(f);
        }

        let norm = normalize_message(content);
        let key = key64("content", &[norm.as_bytes()]);
        // A loop repeats its message word for word, and the same text has the same features:
        // taken from the window, they cost no tokenising and no MinHash.
        let (rich, sig) = match self.thoughts.iter().rev().find(|t| t.key == key) {
            Some(t) => (t.rich, t.sig),
            None => feature_sig(&norm, RICH_FEATURES, features),
        };
        let kind = said(&v.step.step_type);
        if kind == Said::Input || v.step.caller.is_some() {
            // New input: whatever the agent says next starts a new streak.
            self.answered();
        }
        let mut cur = Thought {
            step,
            key,
            sig,
            rich,
            novel_at: 0,
            flags: match kind {
                Said::Message => MESSAGE,
                Said::Input => ANSWERED,
                Said::Thought => 0,
            },
            target: 0,
        };
        let like = |t: &Thought| {
            t.key == cur.key
                || (t.rich && cur.rich && similarity(&t.sig, &cur.sig) >= cfg.similarity)
        };
        if !self.thoughts.iter().any(like) {
            self.novel_messages += 1;
        }
        // Information so far, including this message if it is new.
        let info = novel + self.novel_messages;
        cur.novel_at = u32::try_from(info).unwrap_or(u32::MAX);
        let mut steps: Vec<u64> = self
            .thoughts
            .iter()
            .filter(|t| same_info(t, info) && like(t))
            .map(|t| t.step)
            .collect();
        steps.push(step);
        let n = steps.len() as u32;
        let key = *REPEAT_KEY;
        let level = if n >= cfg.repeat.floor() {
            cfg.repeat.level(n)
        } else {
            None
        };
        if let Some(sev) = self.latch.rise(key, level) {
            out.push(finding(
                "same message repeated without new information",
                sev,
                cur.key,
                n,
                steps,
                serde_json::json!({"rule": "repeated_message"}),
            ));
        }
        match kind {
            Said::Message => self.monologue(cfg, &mut cur, &norm, out),
            Said::Thought => {
                cur.flags |= skeleton(&norm) << SKELETON_SHIFT;
                cur.target = target(&norm);
                self.restated_plan(cfg, &cur, out)
            }
            Said::Input => {}
        }
        push_bounded(&mut self.thoughts, cur, cfg.window.max(1));
    }

    /// Messages unlike any recent one so far.
    pub(crate) fn novel_messages(&self) -> u64 {
        self.novel_messages
    }

    /// Marks the newest step: something came after it.
    fn answered(&mut self) {
        if let Some(t) = self.thoughts.back_mut() {
            t.flags |= ANSWERED;
        }
    }

    /// Judges the streak of reasoning steps that `cur` (a thought, not yet in the window)
    /// extends: the thoughts since the newest tool call, input or message.
    fn restated_plan(&mut self, cfg: &ContentConfig, cur: &Thought, out: &mut Vec<Finding>) {
        // Newest first.
        let streak: Vec<&Thought> = self
            .thoughts
            .iter()
            .rev()
            .take_while(|t| t.flags & (ANSWERED | MESSAGE) == 0)
            .collect();
        // The same text again, or the same content words in another sentence frame, naming no
        // new target.
        let frame = |t: &Thought| t.flags >> SKELETON_SHIFT;
        let restates = |a: &Thought, t: &Thought| {
            a.key == t.key
                || (a.rich
                    && t.rich
                    && frame(a) != frame(t)
                    && (t.target == 0 || t.target == a.target)
                    && similarity(&a.sig, &t.sig) >= cfg.restated_plan_similarity)
        };
        // The plan is what one step of the streak said, and its statements that step and the
        // later ones restating it: a chain of thought whose steps each pick up the previous one
        // moves on from what it started with. Only a new restatement (this step) raises a level.
        let mut steps: Vec<u64> = Vec::new();
        for (i, a) in streak.iter().enumerate() {
            if !restates(a, cur) {
                continue;
            }
            let mut plan: Vec<u64> = vec![a.step];
            plan.extend(
                streak[..i]
                    .iter()
                    .rev()
                    .filter(|t| restates(a, t))
                    .map(|t| t.step),
            );
            plan.push(cur.step);
            if plan.len() > steps.len() {
                steps = plan;
            }
        }
        let key = *PLAN_KEY;
        if steps.is_empty() {
            if streak.is_empty() {
                // A new streak: what the previous one reported is over.
                self.latch.rearm(key);
            }
            return;
        }
        let n = steps.len() as u32;
        let level = (n >= cfg.restated_plan.floor())
            .then(|| cfg.restated_plan.level(n))
            .flatten();
        if let Some(sev) = self.latch.rise(key, level) {
            out.push(finding(
                "monologue: reasoning steps restating one plan with no tool call",
                sev,
                key,
                n,
                steps,
                serde_json::json!({"rule": "restated_plan"}),
            ));
        }
    }

    /// Judges the streak of agent messages that `cur` (not yet in the window) extends.
    fn monologue(
        &mut self,
        cfg: &ContentConfig,
        cur: &mut Thought,
        norm: &str,
        out: &mut Vec<Finding>,
    ) {
        let streak: Vec<&Thought> = self
            .thoughts
            .iter()
            .rev()
            .take_while(|t| t.flags & ANSWERED == 0)
            .filter(|t| t.flags & MESSAGE != 0)
            .collect();
        let like = |t: &Thought| {
            t.key == cur.key
                || (t.rich && cur.rich && similarity(&t.sig, &cur.sig) >= cfg.monologue_similarity)
        };
        if !streak.is_empty()
            && (announcement(norm, cfg.monologue_announcement_words)
                || streak.iter().any(|t| like(t)))
        {
            cur.flags |= IDLE;
        }
        // The streak's first message may say anything; every later one must say nothing new.
        let n = streak.len() + 1;
        let idle = cur.flags & IDLE != 0
            && streak[..streak.len().saturating_sub(1)]
                .iter()
                .all(|t| t.flags & IDLE != 0);
        let level = if idle && n as u32 >= cfg.monologue.floor() {
            cfg.monologue.level(n as u32)
        } else {
            None
        };
        let key = *MONOLOGUE_KEY;
        if let Some(sev) = self.latch.rise(key, level) {
            let mut steps: Vec<u64> = streak.iter().rev().map(|t| t.step).collect();
            steps.push(cur.step);
            out.push(finding(
                "monologue: agent messages with no tool call or input in between",
                sev,
                key,
                n as u32,
                steps,
                serde_json::json!({"rule": "monologue"}),
            ));
        }
    }
}

fn finding(
    what: &str,
    sev: Severity,
    key: u64,
    n: u32,
    steps: Vec<u64>,
    evidence: serde_json::Value,
) -> Finding {
    Finding {
        detector: "content_repetition",
        severity: sev,
        pattern: format!("{what} x{n}"),
        fingerprint: hex64(key),
        hits: n,
        first_step_index: steps.first().copied().unwrap_or(0),
        step_indices: super::repeat::tail(&steps, 32),
        evidence,
        stop_reason: None,
        corroborating: true,
    }
}

/// Text with code blocks, table rows, headings, divider and box-drawing lines removed, list
/// and quote markers cut, whitespace collapsed: the markdown structures that repeat by design
/// (each one a false positive Gemini CLI users reported and its maintainers patched).
fn chant_text(content: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for line in content.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_code = !in_code;
            continue;
        }
        if in_code || t.is_empty() || line.starts_with("    ") || line.starts_with('\t') {
            continue;
        }
        if t.starts_with('|') || t.starts_with('#') || t.matches('|').count() >= 2 {
            continue;
        }
        let drawn = t.chars().filter(|c| is_drawing(*c)).count();
        if t.chars().all(|c| c.is_whitespace() || is_drawing(c)) || 3 * drawn >= t.chars().count() {
            continue;
        }
        let t = strip_markers(t);
        if t.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&t.split_whitespace().collect::<Vec<_>>().join(" "));
        if out.len() > 20_000 {
            break;
        }
    }
    out
}

/// Divider, rule and box-drawing characters (markdown rules, ASCII and Unicode boxes, dot
/// leaders, block elements).
fn is_drawing(c: char) -> bool {
    matches!(
        c,
        '-' | '=' | '*' | '_' | '#' | ':' | '|' | '+' | '.' | '~' | '`' | '·' | '…' | '•'
    ) || ('\u{2500}'..='\u{259f}').contains(&c)
}

/// A line without its list or quote markers (`- `, `* `, `+ `, `1. `, `2) `, `- [ ] `, `> `).
fn strip_markers(mut t: &str) -> &str {
    loop {
        let before = t;
        t = t.trim_start();
        if let Some(r) = t.strip_prefix('>') {
            t = r;
        } else if let Some(r) = ["- ", "* ", "+ ", "[ ] ", "[x] ", "[X] "]
            .iter()
            .find_map(|m| t.strip_prefix(m))
        {
            t = r;
        } else {
            let digits = t.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 && digits <= 3 && matches!(t.as_bytes().get(digits), Some(b'.' | b')')) {
                t = &t[digits + 1..];
            }
        }
        if t.len() == before.len() {
            return t;
        }
    }
}

fn chanting(cfg: &ContentConfig, content: &str, step: u64) -> Option<Finding> {
    let k = cfg.chant_chunk.max(8);
    let min = cfg.chant_min_chars.max(k * 2);
    // `chant_text` only drops and collapses, so it is never longer than the message: most
    // thoughts are too short to chant and skip building it.
    if content.len() < min {
        return None;
    }
    let text = chant_text(content);
    let b = text.as_bytes();
    if b.len() < min {
        return None;
    }
    // Every occurrence counts, overlapping ones too: a phrase shorter than the chunk repeats
    // with its own period, and a chunk of it recurs at every period.
    let mut seen: BTreeMap<u64, u32> = BTreeMap::new();
    let mut repeated = 0usize;
    let mut best = (0u32, 0u64);
    for i in 0..=b.len() - k {
        let h = fnv64(&b[i..i + k]);
        let e = seen.entry(h).or_insert(0);
        *e += 1;
        if *e > 1 {
            repeated += 1;
        }
        if *e > best.0 {
            best = (*e, h);
        }
    }
    let share = repeated as f64 / (b.len() - k + 1) as f64;
    if share < cfg.chant_repeated_share || best.0 < cfg.chant_min_repeats {
        return None;
    }
    let stop = cfg.chant_stop_repeats > 0
        && best.0 >= cfg.chant_stop_repeats
        && share >= cfg.chant_stop_share;
    Some(Finding {
        detector: "content_repetition",
        severity: if stop {
            Severity::Stop
        } else {
            Severity::Alert
        },
        pattern: format!(
            "chanting: {}-char chunk repeated {} times in one message",
            k, best.0
        ),
        fingerprint: hex64(best.1),
        hits: best.0,
        step_indices: vec![step],
        first_step_index: step,
        evidence: serde_json::json!({"rule": "chanting", "repeated_share": (share * 100.0).round() / 100.0}),
        stop_reason: None,
        corroborating: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::detectors::{view::tests::step, DetectorConfig, RunDetectors};

    /// Step `i` of a run: a thought whose content is `text`, through all detectors.
    fn think(d: &mut RunDetectors, cfg: &DetectorConfig, i: usize, text: &str) -> Vec<Finding> {
        let mut s = step("unused", "null", "null", None);
        (s.step_type, s.tool_name, s.step_index) = ("thought".into(), None, i as u64);
        (s.tool_input, s.tool_output) = (None, None);
        s.content = Some(text.into());
        d.step_through(cfg, &s)
    }

    /// Thoughts are most of a run's window: 56 bytes each (see [`Thought::novel_at`]).
    #[test]
    fn a_thought_takes_56_bytes() {
        assert_eq!(std::mem::size_of::<Thought>(), 56);
    }

    /// Empty responses are counted in a streak that a real response ends; the ended streak
    /// leaves no allocation behind (it is nearly always empty, in every open run).
    #[test]
    fn an_ended_empty_streak_is_reported_then_freed() {
        let cfg = DetectorConfig::default();
        let mut d = RunDetectors::default();
        let mut found = Vec::new();
        let first = cfg.content.empty.floor();
        for (i, text) in std::iter::repeat_n("", first as usize)
            .chain(["the deploy finished and the smoke tests pass"])
            .enumerate()
        {
            let out = think(&mut d, &cfg, i, text);
            found.extend(out.into_iter().map(|f| (i, f.detector, f.hits)));
            let streak = d.content.get().map_or(0, |c| c.empty_streak.len());
            assert_eq!(streak, if i < first as usize { i + 1 } else { 0 }, "{i}");
        }
        assert!(found
            .iter()
            .any(|(i, _, hits)| *i + 1 == first as usize && *hits == first));
        assert_eq!(d.content.get().map_or(0, |c| c.empty_streak.capacity()), 0);
    }

    /// A message repeated word for word (after normalising) takes its features from the
    /// window: every thought kept must hold what its own text gives.
    #[test]
    fn a_repeated_message_keeps_its_own_features() {
        let cfg = DetectorConfig::default();
        let mut d = RunDetectors::default();
        let texts = [
            "check the replica lag on the primary database before the migration",
            "a short note",
            "Check the replica  lag on the primary database before the MIGRATION",
            "a short note",
            "now look at the connection pool limits and the slow query log for the api",
            "check the replica lag on the primary database before the migration",
        ];
        for (i, text) in texts.iter().enumerate() {
            think(&mut d, &cfg, i, text);
        }
        let kept = d
            .content
            .get()
            .map(|c| c.thoughts.clone())
            .unwrap_or_default();
        assert_eq!(kept.len(), texts.len());
        for (t, text) in kept.iter().zip(texts) {
            let norm = normalize_message(text);
            assert_eq!(t.key, key64("content", &[norm.as_bytes()]), "{text}");
            let got = feature_sig(&norm, RICH_FEATURES, &mut Vec::new());
            assert_eq!((t.rich, t.sig), got, "{text}");
        }
    }

    proptest::proptest! {
        /// `chanting` skips messages shorter than its minimum before building their chant
        /// text, which is right only if that text is never longer than the message.
        #[test]
        fn chant_text_is_never_longer_than_the_message(
            content in "([a-z]{1,6}|[ \t\r\n]{1,3}|```|\\||-{3}|\u{e9}|\u{3a3}){0,60}"
        ) {
            proptest::prop_assert!(chant_text(&content).len() <= content.len());
        }
    }
}
