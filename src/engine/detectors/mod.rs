//! Detectors. Each one reads a step (through a [`StepView`] computed once per step) and the
//! run's detector state, and reports [`Finding`]s; the policy layer ([`policy`]) combines them
//! and the engine turns them into signals with deterministic ids.
//!
//! All state is serde-serialisable, uses ordered maps only (so serialisation and iteration are
//! deterministic) and is bounded by fixed windows and caps.
pub mod budget;
pub mod content;
pub mod context;
pub mod cycle;
pub mod failure;
pub mod handoff;
pub mod history;
pub mod keelwave;
pub mod neardup;
pub mod policy;
pub mod repeat;
pub mod stall;
pub mod view;

use super::fingerprint::{Canonical, FingerprintConfig, KeySets};
use crate::contract::input::TerminationReason;
use crate::contract::{Severity, Step};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use thin_vec::ThinVec;
pub use view::{FailClass, OutKind, StepView, ToolClass};

/// What a detector found at one step.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub detector: &'static str,
    pub severity: Severity,
    pub pattern: String,
    pub fingerprint: String,
    pub hits: u32,
    pub step_indices: Vec<u64>,
    /// Where the repetition began (becomes the run's `loop_step_index` when caught).
    pub first_step_index: u64,
    pub evidence: serde_json::Value,
    /// Termination reason this finding implies if the run reports none (budgets).
    pub stop_reason: Option<TerminationReason>,
    /// Whether this finding counts as independent evidence for the policy layer. Diagnostics
    /// (keelwave's rule, an absolute context size) do not.
    pub corroborating: bool,
}

/// warn / alert / stop counts; 0 disables that level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Levels {
    pub warn: u32,
    pub alert: u32,
    pub stop: u32,
}

impl Default for Levels {
    fn default() -> Self {
        Self {
            warn: 3,
            alert: 5,
            stop: 10,
        }
    }
}

impl Levels {
    pub const fn new(warn: u32, alert: u32, stop: u32) -> Self {
        Self { warn, alert, stop }
    }

    pub fn level(&self, n: u32) -> Option<Severity> {
        let at = |t: u32| t > 0 && n >= t;
        if at(self.stop) {
            Some(Severity::Stop)
        } else if at(self.alert) {
            Some(Severity::Alert)
        } else if at(self.warn) {
            Some(Severity::Warn)
        } else {
            None
        }
    }

    /// The lowest enabled level: below it a pattern is re-armed.
    pub fn floor(&self) -> u32 {
        [self.warn, self.alert, self.stop]
            .into_iter()
            .filter(|t| *t > 0)
            .min()
            .unwrap_or(u32::MAX)
    }
}

/// Per-tool policy (`[engine.detectors.tools."<tool_name>"]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolPolicy {
    /// `normal`, `poll`, `step`, `scroll` (repeatable: much higher thresholds) or `exempt`
    /// (never counted). Unset: inferred from the tool name and its action argument.
    pub class: Option<ToolClass>,
    /// JSON pointer to the argument that identifies the operation (e.g. `/path`); unset: the
    /// whole canonical input.
    pub primary: Option<String>,
    /// Extra volatile keys for this tool's input and output.
    pub volatile_keys: Vec<String>,
    /// Extra recoverable-error phrases for this tool (word-level match).
    pub recoverable_errors: Vec<String>,
    /// Repeated-operation thresholds for this tool.
    pub repeat: Option<Levels>,
}

/// Words that make a tool (or its `action`/`command` argument) a repeatable one.
///
/// The lists are private so that a word set never changes under its key: the step view's
/// tool-name memo is keyed by it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(from = "ClassLists", into = "ClassLists")]
pub struct ClassWords {
    poll: Vec<String>,
    step: Vec<String>,
    scroll: Vec<String>,
    /// A hash of the three lists: equal lists, equal keys.
    key: u64,
}

/// [`ClassWords`] as configured (a list left out keeps its default).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ClassLists {
    poll: Vec<String>,
    step: Vec<String>,
    scroll: Vec<String>,
}

impl From<ClassLists> for ClassWords {
    fn from(l: ClassLists) -> Self {
        Self::new(l.poll, l.step, l.scroll)
    }
}

impl From<ClassWords> for ClassLists {
    fn from(w: ClassWords) -> Self {
        Self {
            poll: w.poll,
            step: w.step,
            scroll: w.scroll,
        }
    }
}

impl Default for ClassLists {
    fn default() -> Self {
        ClassWords::default().into()
    }
}

impl PartialEq for ClassWords {
    fn eq(&self, other: &Self) -> bool {
        (&self.poll, &self.step, &self.scroll) == (&other.poll, &other.step, &other.scroll)
    }
}

impl ClassWords {
    pub fn new(poll: Vec<String>, step: Vec<String>, scroll: Vec<String>) -> Self {
        let mut parts: Vec<&[u8]> = Vec::new();
        for (tag, list) in [("poll", &poll), ("step", &step), ("scroll", &scroll)] {
            parts.push(tag.as_bytes());
            parts.extend(list.iter().map(|w| w.as_bytes()));
        }
        let key = crate::engine::text::key64("class_words", &parts);
        Self {
            poll,
            step,
            scroll,
            key,
        }
    }

    /// Equal for equal word lists (the memos of tool names key on it).
    pub fn key(&self) -> u64 {
        self.key
    }
}

impl Default for ClassWords {
    fn default() -> Self {
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect();
        Self::new(
            v(&[
                "poll",
                "status",
                "wait",
                "sleep",
                "progress",
                "health",
                "healthcheck",
                "ping",
                "watch",
                "tail",
                "await",
                "heartbeat",
                "monitor",
                "log",
                "logs",
            ]),
            v(&[
                "step",
                "next",
                "stepi",
                "nexti",
                "continue",
                "cont",
                "finish",
                "until",
                "step_over",
                "step_into",
                "step_out",
            ]),
            v(&[
                "scroll",
                "scroll_down",
                "scroll_up",
                "page_down",
                "page_up",
                "pagedown",
                "pageup",
            ]),
        )
    }
}

/// Per project / agent overrides: `set` is a partial `[engine.detectors]` table merged over the
/// defaults for runs that match (`project` and/or `agent`; later entries win).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Override {
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
    pub set: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DetectorConfig {
    pub fingerprint: FingerprintConfig,
    pub tools: BTreeMap<String, ToolPolicy>,
    pub classes: ClassWords,
    /// Recoverable-error phrases for every tool (loopctl's "old text not found" family).
    pub recoverable_errors: Vec<String>,
    pub keelwave: keelwave::KeelwaveConfig,
    pub repeat: repeat::RepeatConfig,
    pub stall: stall::StallConfig,
    pub failure: failure::FailureConfig,
    pub cycle: cycle::CycleConfig,
    pub handoff: handoff::HandoffConfig,
    pub neardup: neardup::NearDupConfig,
    pub content: content::ContentConfig,
    pub context: context::ContextConfig,
    pub budget: budget::BudgetConfig,
    pub policy: policy::PolicyConfig,
    pub overrides: Vec<Override>,
}

impl DetectorConfig {
    /// The key sets of this configuration's volatile and redacted keys.
    pub fn key_sets(&self) -> KeySets {
        let tools = self.tools.iter();
        KeySets::new(
            &self.fingerprint,
            tools.map(|(t, p)| (t.as_str(), p.volatile_keys.as_slice())),
        )
    }

    /// A step's canonical form under this configuration, for one-off use (tests, tools): the
    /// engine keeps the key sets per resolved configuration and calls
    /// [`Canonical::compute_in`].
    pub fn canonical<'s>(&self, step: &'s Step) -> Canonical<'s> {
        Canonical::compute_with(step, &self.fingerprint, &self.key_sets())
    }
}

impl Default for DetectorConfig {
    fn default() -> Self {
        let rec = [
            "old text not found",
            "old_string not found",
            "old string not found",
            "string to replace not found",
            "could not find the text",
            "no match found for",
            "did not match any",
            "file has been modified since",
            "file has not been read",
            "read the file first",
            "must read the file",
            "found multiple matches",
            "is not unique",
            "multiple occurrences",
        ];
        Self {
            fingerprint: FingerprintConfig::default(),
            tools: BTreeMap::new(),
            classes: ClassWords::default(),
            recoverable_errors: rec.iter().map(|s| s.to_string()).collect(),
            keelwave: Default::default(),
            repeat: Default::default(),
            stall: Default::default(),
            failure: Default::default(),
            cycle: Default::default(),
            handoff: Default::default(),
            neardup: Default::default(),
            content: Default::default(),
            context: Default::default(),
            budget: Default::default(),
            policy: Default::default(),
            overrides: Vec::new(),
        }
    }
}

fn merge(base: &mut serde_json::Value, over: &serde_json::Value) {
    match (base, over) {
        (serde_json::Value::Object(b), serde_json::Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

impl DetectorConfig {
    /// The configuration for one run: the matching overrides merged in order.
    pub fn resolve(&self, project: &str, agent: Option<&str>) -> Result<DetectorConfig, String> {
        let matching: Vec<&Override> = self
            .overrides
            .iter()
            .filter(|o| {
                o.project.as_deref().is_none_or(|p| p == project)
                    && o.agent.as_deref().is_none_or(|a| Some(a) == agent)
            })
            .collect();
        if matching.is_empty() {
            return Ok(self.clone());
        }
        let mut base = serde_json::to_value(self).map_err(|e| e.to_string())?;
        for o in matching {
            merge(&mut base, &o.set);
        }
        let mut cfg: DetectorConfig = serde_json::from_value(base).map_err(|e| e.to_string())?;
        cfg.overrides.clear();
        Ok(cfg)
    }

    /// Check every override once, so a typo fails at start-up instead of being ignored.
    pub fn validate(&self) -> Result<(), String> {
        self.check_windows()
            .map_err(|e| format!("engine.detectors.{e}"))?;
        for (i, o) in self.overrides.iter().enumerate() {
            let mut base = serde_json::to_value(self).map_err(|e| e.to_string())?;
            merge(&mut base, &o.set);
            serde_json::from_value::<DetectorConfig>(base)
                .map_err(|e| e.to_string())
                .and_then(|c| c.check_windows())
                .map_err(|e| format!("engine.detectors.overrides[{i}]: {e}"))?;
        }
        Ok(())
    }

    /// Windows of recent calls hold at most [`history::MAX_WINDOW`]; a longer one would be
    /// cut silently.
    fn check_windows(&self) -> Result<(), String> {
        let windows = [
            ("repeat.window", self.repeat.window),
            ("repeat.window_repeatable", self.repeat.window_repeatable),
            ("stall.window", self.stall.window),
            ("context.window", self.context.window),
            ("neardup.window", self.neardup.window),
            ("cycle levels x max_len", cycle::window(&self.cycle)),
        ];
        match windows.iter().find(|(_, w)| *w > history::MAX_WINDOW) {
            Some((name, w)) => Err(format!(
                "{name} = {w}: a window holds at most {} calls",
                history::MAX_WINDOW
            )),
            None => Ok(()),
        }
    }
}

/// A run's detector configuration with what is derived from it once per configuration
/// instead of once per step.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub cfg: DetectorConfig,
    pub keys: KeySets,
}

impl Resolved {
    pub fn new(cfg: DetectorConfig) -> Self {
        let keys = cfg.key_sets();
        Self { cfg, keys }
    }
}

/// A small ordered map kept as a sorted vector. Per-run maps hold a handful of entries and
/// there are hundreds of thousands of runs: a B-tree node costs ~200 bytes however few keys it
/// holds, this costs 16 per entry, and a thin vector is 8 bytes inline and nothing on the heap
/// while empty. Serialised exactly like a `BTreeMap` (a JSON object in key order), so
/// changelog records are unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VecMap<K, V>(ThinVec<(K, V)>);

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        Self(ThinVec::new())
    }
}

impl<K: Ord + Copy, V> VecMap<K, V> {
    fn find(&self, k: &K) -> Result<usize, usize> {
        self.0.binary_search_by(|(x, _)| x.cmp(k))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, k: &K) -> Option<&V> {
        self.find(k).ok().map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, k: &K) -> bool {
        self.find(k).is_ok()
    }

    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        match self.find(&k) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, v)),
            Err(i) => {
                grow_exact_thin(&mut self.0);
                self.0.insert(i, (k, v));
                None
            }
        }
    }

    pub fn remove(&mut self, k: &K) -> Option<V> {
        let v = self.find(k).ok().map(|i| self.0.remove(i).1);
        if self.0.is_empty() {
            // An emptied map keeps no capacity: most runs' maps empty again and stay so.
            self.0 = ThinVec::new();
        }
        v
    }

    pub fn keys(&self) -> impl Iterator<Item = K> + '_ {
        self.0.iter().map(|(k, _)| *k)
    }

    pub fn get_or_insert_with(&mut self, k: K, v: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(&k) {
            Ok(i) => i,
            Err(i) => {
                grow_exact_thin(&mut self.0);
                self.0.insert(i, (k, v()));
                i
            }
        };
        &mut self.0[i].1
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> + '_ {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl<K: Ord + Copy, V> FromIterator<(K, V)> for VecMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(it: I) -> Self {
        let mut m = Self::default();
        for (k, v) in it {
            m.insert(k, v);
        }
        m
    }
}

impl<K: Serialize, V: Serialize> Serialize for VecMap<K, V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl<'de, K: Deserialize<'de> + Ord, V: Deserialize<'de>> Deserialize<'de> for VecMap<K, V> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = BTreeMap::<K, V>::deserialize(d)?;
        Ok(Self(m.into_iter().collect()))
    }
}

/// Rising-edge bookkeeping: the highest level already reported per pattern key. A level is
/// reported once per crossing; a pattern that falls below its floor is forgotten (re-armed).
///
/// Kept as a sorted thin vector (8 bytes inline, nothing on the heap while empty): seven
/// detectors have one per open run, nearly all of them empty, and entries change only when a
/// finding fires or re-arms. Serialised like a `BTreeMap` under `fired`, as before.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Latch {
    fired: ThinVec<(u64, Severity)>,
}

impl Latch {
    const CAP: usize = 256;

    fn find(&self, k: u64) -> Result<usize, usize> {
        self.fired.binary_search_by(|(x, _)| x.cmp(&k))
    }

    fn remove(&mut self, k: u64) {
        if let Ok(i) = self.find(k) {
            self.fired.remove(i);
            if self.fired.is_empty() {
                // Back to no allocation, as nearly all latches are.
                self.fired = ThinVec::new();
            }
        }
    }

    /// Returns the level to report, if `level` is above what was reported for `key`.
    pub fn rise(&mut self, key: u64, level: Option<Severity>) -> Option<Severity> {
        let Some(level) = level else {
            self.remove(key);
            return None;
        };
        match self.find(key) {
            Ok(i) if self.fired[i].1 >= level => None,
            Ok(i) => {
                self.fired[i].1 = level;
                Some(level)
            }
            Err(mut i) => {
                if self.fired.len() >= Self::CAP {
                    // Bounded: drop the smallest key (deterministic, order-independent).
                    self.fired.remove(0);
                    i = i.saturating_sub(1);
                }
                grow_exact_thin(&mut self.fired);
                self.fired.insert(i, (key, level));
                Some(level)
            }
        }
    }

    pub fn rearm(&mut self, key: u64) {
        self.remove(key);
    }

    /// Whether a level was reported for `key` (and not re-armed since).
    pub fn has(&self, key: u64) -> bool {
        self.find(key).is_ok()
    }

    pub fn keys(&self) -> Vec<u64> {
        self.fired.iter().map(|(k, _)| *k).collect()
    }
}

impl Serialize for Latch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Fired<'a>(&'a [(u64, Severity)]);
        impl Serialize for Fired<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
            }
        }
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Latch", 1)?;
        st.serialize_field("fired", &Fired(&self.fired[..]))?;
        st.end()
    }
}

impl<'de> Deserialize<'de> for Latch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Record {
            fired: BTreeMap<u64, Severity>,
        }
        let r = Record::deserialize(d)?;
        Ok(Self {
            fired: r.fired.into_iter().collect(),
        })
    }
}

/// A detector state that stays at its default for most runs, boxed only once it is not: 8
/// bytes inline instead of the whole state. Serialised exactly as the state itself (a default
/// one when absent), and compared as the state, so records and equality are unchanged.
#[derive(Debug, Clone, Default)]
pub struct Lazy<T>(Option<Box<T>>);

impl<T: Default + PartialEq> Lazy<T> {
    pub fn new(t: T) -> Self {
        Self(if t == T::default() {
            None
        } else {
            Some(Box::new(t))
        })
    }

    /// Runs `f` on the state; a state at its default afterwards is not allocated (or no
    /// longer: a failure streak that ended leaves nothing behind).
    pub fn with<R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        if let Some(b) = self.0.as_deref_mut() {
            let r = f(b);
            if *b == T::default() {
                self.0 = None;
            }
            return r;
        }
        let mut t = T::default();
        let r = f(&mut t);
        if t != T::default() {
            self.0 = Some(Box::new(t));
        }
        r
    }

    pub fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }
}

impl<T: Default + PartialEq> PartialEq for Lazy<T> {
    fn eq(&self, other: &Self) -> bool {
        match (self.get(), other.get()) {
            (Some(a), Some(b)) => a == b,
            (None, None) => true,
            (Some(x), None) | (None, Some(x)) => *x == T::default(),
        }
    }
}

impl<T: Default + Serialize> Serialize for Lazy<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_deref() {
            Some(t) => t.serialize(s),
            None => T::default().serialize(s),
        }
    }
}

impl<'de, T: Default + PartialEq + Deserialize<'de>> Deserialize<'de> for Lazy<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Self::new)
    }
}

/// Make room for one more element, and no more. A run's windows are nearly all it holds and
/// most runs are short, so any slack reserved is a lasting cost of every open run; the
/// allocator already rounds each block up to its size class and grows a block in place within
/// it, so most of these growths are a `realloc` that returns the same block.
pub fn grow_exact<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact(1);
    }
}

/// [`grow_exact`] for the thin vectors of mostly empty state.
pub fn grow_exact_thin<T>(v: &mut ThinVec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact(1);
    }
}

pub fn push_bounded<T>(q: &mut VecDeque<T>, x: T, cap: usize) {
    // Make room first so a full window never grows past its bound; growth is exact, as in
    // [`grow_exact`].
    while cap > 0 && q.len() >= cap {
        q.pop_front();
    }
    if q.len() == q.capacity() {
        q.reserve_exact(1);
    }
    q.push_back(x);
    while q.len() > cap {
        q.pop_front();
    }
}

pub fn hex64(k: u64) -> String {
    format!("{k:016x}")
}

/// The low half of a 64-bit key, what [`Progress`] keeps of it.
fn low32(k: u64) -> u32 {
    k as u32
}

/// Run-wide counters shared by several detectors.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Progress {
    /// Steps applied to the detectors (dense, unlike `step_index`).
    pub seq: u64,
    /// Tool outputs not among the recent ones: a proxy for "the agent learned something".
    pub novel_outputs: u64,
    /// Successful, non-repeatable tool calls whose action was not among the recent ones.
    pub novel_actions: u64,
    /// The recent outputs (the first `outputs` values) then the recent actions, each oldest
    /// first: one allocation per open run instead of two queues. Each is the low half of its
    /// key ([`low32`]): they are only tested for membership, among at most [`Self::RECENT`],
    /// so a new key passes for a known one with probability at most 2⁻²⁶, and half the bytes
    /// are a few percent of an open run.
    recent: Vec<u32>,
    outputs: u32,
    /// Repeated operation's streak: how many of the newest counted tool calls were the same
    /// call with the same output, back to back (0 after a failure). Here, in what would be
    /// padding, rather than in the repeat state, which would grow a size class.
    streak: u32,
}

/// What records hold: the two recent sets as separate sequences. Records written before the
/// streak was kept restore with none (the next identical call starts one).
#[derive(Serialize, Deserialize)]
#[serde(rename = "Progress")]
struct ProgressRecord<O, A> {
    seq: u64,
    novel_outputs: u64,
    novel_actions: u64,
    recent_outputs: O,
    recent_actions: A,
    #[serde(default)]
    streak: u32,
}

impl Serialize for Progress {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (o, a) = self.recent.split_at(self.outputs());
        ProgressRecord {
            seq: self.seq,
            novel_outputs: self.novel_outputs,
            novel_actions: self.novel_actions,
            recent_outputs: o,
            recent_actions: a,
            streak: self.streak,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Progress {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Records of version 3 and before hold whole keys: read as their low halves.
        let r = ProgressRecord::<VecDeque<u64>, VecDeque<u64>>::deserialize(d)?;
        let mut recent: Vec<u32> = r.recent_outputs.into_iter().map(low32).collect();
        let outputs = u32::try_from(recent.len()).map_err(serde::de::Error::custom)?;
        recent.extend(r.recent_actions.into_iter().map(low32));
        Ok(Self {
            seq: r.seq,
            novel_outputs: r.novel_outputs,
            novel_actions: r.novel_actions,
            recent,
            outputs,
            streak: r.streak,
        })
    }
}

impl Progress {
    const RECENT: usize = 64;

    /// The counters alone (the recent sets left empty): what detectors compare against as
    /// "before this step", without copying the sets on every step.
    fn counters(&self) -> Progress {
        Progress {
            seq: self.seq,
            novel_outputs: self.novel_outputs,
            novel_actions: self.novel_actions,
            recent: Vec::new(),
            outputs: 0,
            streak: self.streak,
        }
    }

    fn outputs(&self) -> usize {
        (self.outputs as usize).min(self.recent.len())
    }

    fn insert(&mut self, at: usize, x: u32) {
        grow_exact(&mut self.recent);
        self.recent.insert(at, x);
    }

    fn observe(&mut self, v: &StepView<'_>) {
        self.seq += 1;
        if v.tool.is_none() || v.class == ToolClass::Exempt {
            return;
        }
        let no = self.outputs();
        let output = low32(v.output_key);
        if !self.recent[..no].contains(&output) {
            self.novel_outputs += 1;
            let mut no = no;
            if no >= Self::RECENT {
                self.recent.remove(0);
                no -= 1;
            }
            self.insert(no, output);
            // At most RECENT.
            self.outputs = (no + 1) as u32;
        }
        let no = self.outputs();
        let action = low32(v.action_key);
        let known = self.recent[no..].contains(&action);
        if v.failure.is_none() && !v.class.is_repeatable() && !known {
            self.novel_actions += 1;
        }
        if !known {
            if self.recent.len() - no >= Self::RECENT {
                self.recent.remove(no);
            }
            let end = self.recent.len();
            self.insert(end, action);
        }
    }
}

/// All detector state of one run. The windows of recent tool calls that several detectors
/// keep are one shared [`history::History`]; records still hold each detector's own window
/// (written from the history, read into it), so they are what they were.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "DetectorsRecord")]
pub struct RunDetectors {
    pub keelwave: keelwave::KeelwaveState,
    pub progress: Progress,
    pub repeat: repeat::RepeatState,
    pub stall: stall::StallState,
    /// Only runs with failures use it.
    pub failure: Lazy<failure::FailureState>,
    pub cycle: cycle::CycleState,
    pub handoff: handoff::HandoffState,
    pub neardup: neardup::NearDupState,
    /// Only runs with messages or thoughts use it.
    pub content: Lazy<content::ContentState>,
    /// Only runs reporting `tokens_in_context` use it (its window of outputs is the history's).
    pub context: Lazy<context::ContextState>,
    pub budget: budget::BudgetState,
    /// Only runs with corroborating findings use it.
    pub policy: Lazy<policy::PolicyState>,
    history: history::History,
}

#[derive(Deserialize)]
struct DetectorsRecord {
    keelwave: keelwave::KeelwaveState,
    progress: Progress,
    repeat: repeat::Record,
    stall: stall::Record,
    failure: Lazy<failure::FailureState>,
    cycle: cycle::Record,
    handoff: handoff::HandoffState,
    neardup: neardup::Record,
    content: Lazy<content::ContentState>,
    context: context::Record,
    budget: budget::BudgetState,
    policy: Lazy<policy::PolicyState>,
}

impl From<DetectorsRecord> for RunDetectors {
    fn from(r: DetectorsRecord) -> Self {
        let mut history = history::History::default();
        Self {
            keelwave: r.keelwave,
            progress: r.progress,
            repeat: r.repeat.restore(&mut history),
            stall: r.stall.restore(&mut history),
            failure: r.failure,
            cycle: r.cycle.restore(&mut history),
            handoff: r.handoff,
            neardup: r.neardup.restore(&mut history),
            content: r.content,
            context: Lazy::new(r.context.restore(&mut history)),
            budget: r.budget,
            policy: r.policy,
            history,
        }
    }
}

/// The detectors as records hold them; budgets write the run's counts (`RunState`'s).
pub struct Ser<'a>(pub &'a RunDetectors, pub budget::Counts);

impl Serialize for Ser<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let Ser(d, counts) = self;
        let h = &d.history;
        let mut st = s.serialize_struct("RunDetectors", 12)?;
        st.serialize_field("keelwave", &d.keelwave)?;
        st.serialize_field("progress", &d.progress)?;
        st.serialize_field("repeat", &repeat::Ser(&d.repeat, h))?;
        st.serialize_field("stall", &stall::Ser(&d.stall, h))?;
        st.serialize_field("failure", &d.failure)?;
        st.serialize_field("cycle", &cycle::Ser(&d.cycle, h))?;
        st.serialize_field("handoff", &d.handoff)?;
        st.serialize_field("neardup", &neardup::Ser(&d.neardup, h))?;
        st.serialize_field("content", &d.content)?;
        let no_context = context::ContextState::default();
        let context = d.context.get().unwrap_or(&no_context);
        st.serialize_field("context", &context::Ser(context, h))?;
        st.serialize_field("budget", &budget::Ser(&d.budget, *counts))?;
        st.serialize_field("policy", &d.policy)?;
        st.end()
    }
}

/// The memos and scratch buffers of one partition's detectors, owned by its engine and lent to
/// each step (see [`crate::engine::memo`]): nothing is kept per thread, and outputs never
/// depend on what these hold.
#[derive(Default)]
pub struct Caches {
    view: view::ViewMemos,
    agents: crate::engine::text::NameKeys,
    /// Feature hashes of the text at hand (thoughts, handoff payloads).
    features: Vec<u64>,
    neardup: neardup::Scratch,
}

impl RunDetectors {
    /// One step through the detectors as the engine runs it, for tests (fresh caches: outputs
    /// never depend on them).
    #[cfg(test)]
    pub(crate) fn step_through(&mut self, cfg: &DetectorConfig, s: &Step) -> Vec<Finding> {
        let canon = cfg.canonical(s);
        let mut out = Vec::new();
        let caches = &mut Caches::default();
        self.on_step(cfg, s, &canon, budget::Counts::default(), caches, &mut out);
        out
    }

    /// Run every detector on one new step. `canon` comes from [`Canonical::compute`].
    pub fn on_step(
        &mut self,
        cfg: &DetectorConfig,
        step: &Step,
        canon: &Canonical<'_>,
        run: budget::Counts,
        caches: &mut Caches,
        out: &mut Vec<Finding>,
    ) {
        let start = out.len();
        let v = StepView::new(cfg, step, canon, &mut caches.view);
        // Progress counters first: detectors compare against the state *including* this step.
        let before = self.progress.counters();
        self.progress.observe(&v);
        if v.counted_tool() {
            self.history.push(history::Call::new(
                step.step_index,
                v.action_key,
                v.primary_key,
                v.output_key,
                self.progress.novel_actions,
                v.class.tolerates_same_output(),
            ));
        }
        self.keelwave.on_step(&cfg.keelwave, step, &canon.fps, out);
        self.budget.on_step(&cfg.budget, &v, run, out);
        // A run with no failure streaks stays without one on a success: nothing to run.
        if self.failure.get().is_some() || v.failure.is_some() {
            let recovered = self
                .failure
                .with(|f| f.on_step(&cfg.failure, &v, &before, out));
            if recovered && self.policy.get().is_some() {
                // Errors that recover are not evidence any more (goose resets its error streak
                // on a success): they must not turn another detector's warning into an alert.
                self.policy.with(|p| p.forget("repeated_failure"));
            }
        }
        let h = &mut self.history;
        let streak = &mut self.progress.streak;
        self.repeat
            .on_step(&cfg.repeat, &v, &before, streak, h, out);
        self.stall.on_step(&cfg.stall, &v, h, out);
        self.cycle.on_step(&cfg.cycle, &v, h, out);
        let features = &mut caches.features;
        self.neardup.on_step(
            &cfg.neardup,
            &v,
            &mut self.history,
            &mut caches.neardup,
            out,
        );
        self.handoff
            .on_step(&cfg.handoff, &v, &mut caches.agents, features, out);
        let now = &self.progress;
        self.content
            .with(|c| c.on_step(&cfg.content, &v, &before, now, features, out));
        let h = &mut self.history;
        let messages = self.content.get().map_or(0, |c| c.novel_messages());
        let tools = self.progress.novel_outputs + self.progress.novel_actions;
        self.context
            .with(|c| c.on_step(&cfg.context, &v, h, (tools, messages), out));
        self.history.settle();
        let seq = self.progress.seq;
        // Nothing recent and nothing found: the policy has nothing to do or remember.
        if self.policy.get().is_some() || out.len() > start {
            self.policy
                .with(|p| p.apply(&cfg.policy, seq, &mut out[start..]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records of version 3 and before hold whole keys in the recent sets: they restore as
    /// the low halves a live run keeps, and are written back as those.
    #[test]
    fn progress_records_with_whole_keys_read_as_low_halves() {
        let (out, act) = (0x1234_5678_9abc_def0_u64, 0xfedc_ba98_7654_3210_u64);
        let json = format!(
            r#"{{"seq":3,"novel_outputs":1,"novel_actions":1,"recent_outputs":[{out}],"recent_actions":[{act}]}}"#
        );
        let p: Progress = serde_json::from_str(&json).unwrap();
        assert_eq!(
            (p.recent.as_slice(), p.outputs()),
            (&[0x9abc_def0, 0x7654_3210][..], 1)
        );
        let back = serde_json::to_value(&p).unwrap();
        assert_eq!(back["recent_outputs"], serde_json::json!([0x9abc_def0_u32]));
        assert_eq!(back["recent_actions"], serde_json::json!([0x7654_3210_u32]));
    }

    #[test]
    fn windows_longer_than_the_history_holds_are_refused() {
        let mut cfg = DetectorConfig::default();
        assert!(cfg.validate().is_ok());
        cfg.repeat.window = history::MAX_WINDOW + 1;
        let err = cfg.validate().unwrap_err();
        assert!(err.contains("engine.detectors.repeat.window"), "{err}");
        let mut cfg = DetectorConfig::default();
        cfg.overrides.push(Override {
            project: Some("p".into()),
            agent: None,
            set: serde_json::json!({"cycle": {"normal": {"stop": 100000}}}),
        });
        let err = cfg.validate().unwrap_err();
        assert!(
            err.contains("overrides[0]") && err.contains("cycle"),
            "{err}"
        );
    }

    #[test]
    fn overrides_merge_per_project_and_agent() {
        let mut cfg = DetectorConfig::default();
        cfg.overrides.push(Override {
            project: Some("p".into()),
            agent: None,
            set: serde_json::json!({"repeat": {"normal": {"warn": 7}}}),
        });
        cfg.overrides.push(Override {
            project: None,
            agent: Some("poller".into()),
            set: serde_json::json!({"repeat": {"normal": {"alert": 9}}}),
        });
        assert!(cfg.validate().is_ok());
        let r = cfg.resolve("p", Some("poller")).unwrap();
        assert_eq!(r.repeat.normal.warn, 7);
        assert_eq!(r.repeat.normal.alert, 9);
        let q = cfg.resolve("q", None).unwrap();
        assert_eq!(q.repeat.normal, repeat::RepeatConfig::default().normal);
        cfg.overrides.push(Override {
            project: None,
            agent: None,
            set: serde_json::json!({"repeat": {"nope": 1}}),
        });
        assert!(cfg.validate().is_err());
    }

    /// Steps from a few tools, inputs and outputs, failing now and then, run through the
    /// detectors under short, long and empty windows: the shortcuts (the repeated-operation
    /// count from its first scan, the near-duplicate precheck, the stall buffer) assert in
    /// debug builds that they agree with the full scans; the findings are checked here.
    #[test]
    fn shortcuts_agree_with_full_scans_under_any_window() {
        let tools = ["read", "search", "poll_status", "edit"];
        let inputs = [
            r#"{"path":"a.rs"}"#,
            r#"{"q":"rust async runtime"}"#,
            r#"{"q":"async runtime for rust"}"#,
            "{}",
        ];
        let outputs = [r#"{"ok":true}"#, "[]", r#""data one two""#, r#"{"n":1}"#];
        let mut found = 0usize;
        for (rw, sw, nw) in [
            (0, 2, 1),
            (1, 3, 2),
            (3, 8, 10),
            (20, 40, 3),
            (70_000, 33, 0),
        ] {
            let mut cfg = DetectorConfig::default();
            cfg.repeat.window = rw;
            cfg.repeat.window_repeatable = rw / 2;
            cfg.stall.window = sw;
            cfg.neardup.window = nw;
            let mut d = RunDetectors::default();
            let mut seed = 0x9e37_79b9_7f4a_7c15u64;
            let mut next = |n: usize| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed % n as u64) as usize
            };
            for i in 0..400u64 {
                let success = match next(6) {
                    0 => Some(false),
                    _ => Some(true),
                };
                let mut s = view::tests::step(
                    tools[next(tools.len())],
                    inputs[next(inputs.len())],
                    outputs[next(2) * next(outputs.len())],
                    success,
                );
                s.step_index = i;
                let out = d.step_through(&cfg, &s);
                for f in &out {
                    assert!(f.step_indices.iter().all(|x| *x <= i), "{f:?}");
                    if f.detector == "repeated_operation" {
                        assert!(f.hits as usize <= rw.max(rw / 2).min(history::MAX_WINDOW));
                    }
                }
                found += out.len();
            }
        }
        assert!(found > 0);
    }

    /// A stall window longer than the stack buffer holds still finds the stall.
    #[test]
    fn long_stall_windows_are_judged_whole() {
        for window in [8, 32, 33, 100] {
            let mut cfg = DetectorConfig::default();
            cfg.stall.window = window;
            let mut d = RunDetectors::default();
            let mut first = None;
            for i in 0..(window as u64 + 5) {
                let input = format!(r#"{{"path":"f{}.rs"}}"#, i % 3);
                let mut s = view::tests::step("read", &input, r#"{"n":1}"#, Some(true));
                s.step_index = i;
                let out = d.step_through(&cfg, &s);
                if first.is_none() && out.iter().any(|f| f.detector == "no_progress") {
                    first = Some(i);
                }
            }
            assert_eq!(first, Some(window as u64 - 1), "window {window}");
        }
    }

    #[test]
    fn latch_is_rising_edge() {
        let mut l = Latch::default();
        assert_eq!(l.rise(1, Some(Severity::Warn)), Some(Severity::Warn));
        assert_eq!(l.rise(1, Some(Severity::Warn)), None);
        assert_eq!(l.rise(1, Some(Severity::Alert)), Some(Severity::Alert));
        assert_eq!(l.rise(1, None), None);
        assert_eq!(l.rise(1, Some(Severity::Warn)), Some(Severity::Warn));
    }

    #[test]
    fn an_emptied_latch_or_map_holds_no_allocation() {
        let mut l = Latch::default();
        l.rise(7, Some(Severity::Warn));
        l.rise(3, Some(Severity::Warn));
        assert_eq!(l.keys(), vec![3, 7]);
        l.rearm(7);
        l.rearm(3);
        assert_eq!(
            (l.fired.capacity(), l, Latch::default().fired.capacity()),
            (0, Latch::default(), 0)
        );
        let mut m = VecMap::<u64, u64>::default();
        m.insert(1, 10);
        assert_eq!(m.remove(&1), Some(10));
        assert_eq!(m.0.capacity(), 0);
    }

    #[test]
    fn windows_grow_exactly() {
        let mut q = VecDeque::new();
        let mut v = Vec::new();
        for i in 0..40u64 {
            push_bounded(&mut q, i, 25);
            grow_exact(&mut v);
            v.push(i);
            assert_eq!(
                (q.capacity(), v.capacity()),
                (q.len(), v.len()),
                "after {i}"
            );
        }
        assert_eq!(q.len(), 25);
        assert_eq!(q.front(), Some(&15));
    }
}
