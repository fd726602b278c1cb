//! The detection engine: pure and deterministic.
//!
//! `(state, event) -> (state, output events)`. No I/O, no clocks: time comes only from event
//! `ts`, and the idle-timeout watermark is the maximum event time seen *in this partition*, so
//! `eddy replay --partitions N` and `eddy run` over N partitions reach identical verdicts.
//! One [`PartitionEngine`] per input partition owns the state of every run keyed to it.
pub mod config;
pub mod detectors;
pub mod fingerprint;
pub mod json;
pub mod memo;
pub mod rollup;
pub mod run;
pub mod seen;
pub mod text;

use crate::contract::input::format_ts;
use crate::contract::output::event_id;
use crate::contract::{Event, OutputEvent, RunKey, RunTerminated, Signal, Step};
pub use config::EngineConfig;
pub use fingerprint::{Canonical, StepFingerprints};
use hashbrown::HashTable;
pub use run::RunState;
use rustc_hash::{FxBuildHasher, FxHashMap};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use triomphe::ThinArc;

/// A run's key as the engine holds it: project and run id end to end, shared by the run table
/// and the idle/eviction/dirty indexes. A thin pointer to one heap block (count, header and
/// bytes together), where an `Arc` of a boxed string took two blocks and 24 more bytes per open
/// run.
#[derive(Clone)]
struct PackedKey(ThinArc<KeyHeader, u8>);

struct KeyHeader {
    /// Where the run id starts (the project id's length).
    split: usize,
    /// The run's slot is listed in `PartitionEngine::dirty` (it changed since the last
    /// changelog flush). Kept here rather than in the slot, whose 16 bytes (two pointers) are
    /// then all of a run table entry; each open run has its own key, created with its slot.
    listed: AtomicBool,
}

impl PackedKey {
    fn new(k: &RunKey) -> Self {
        let header = KeyHeader {
            split: k.project_id.len(),
            listed: AtomicBool::new(false),
        };
        // Written straight into the key's block (an exact-size iterator), with no copy between.
        let (p, r) = (k.project_id.as_bytes(), k.run_id.as_bytes());
        let bytes =
            (0..p.len() + r.len()).map(|i| p.get(i).copied().unwrap_or_else(|| r[i - p.len()]));
        Self(ThinArc::from_header_and_iter(header, bytes))
    }

    /// Project id and run id, as bytes: the key was made from two strings, and compares and
    /// hashes as those do (bytewise), so it never needs to be read back as text but in
    /// [`PackedKey::to_key`].
    fn parts(&self) -> (&[u8], &[u8]) {
        let split = self.0.header.header.split;
        self.0.slice.split_at(split.min(self.0.slice.len()))
    }

    fn listed(&self) -> bool {
        self.0.header.header.listed.load(Relaxed)
    }

    fn set_listed(&self, on: bool) {
        self.0.header.header.listed.store(on, Relaxed);
    }

    /// On every event's table probe.
    fn is(&self, k: &RunKey) -> bool {
        self.parts() == (k.project_id.as_bytes(), k.run_id.as_bytes())
    }

    fn hash(&self) -> u64 {
        hash_parts(self.parts())
    }

    fn to_key(&self) -> RunKey {
        // Both parts are whole strings' bytes, so the conversion never replaces anything.
        let (p, r) = self.parts();
        RunKey {
            project_id: String::from_utf8_lossy(p).into_owned(),
            run_id: String::from_utf8_lossy(r).into_owned(),
        }
    }
}

impl std::fmt::Debug for PackedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.to_key().fmt(f)
    }
}

/// Ordered as `RunKey` is (project id, then run id; strings order bytewise): ties in the idle
/// order break the same way.
impl Ord for PackedKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl PartialOrd for PackedKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PackedKey {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for PackedKey {}

/// One open run. Its key's `listed` flag stands in for a set of changed runs: marking a run
/// changed on every event is then a load, not a hash-set probe.
struct Slot {
    key: PackedKey,
    state: Box<RunState>,
}

/// The run tables are probed with this, computed once per event (hashing two strings for each
/// of several lookups was a measurable share of an event's cost).
fn hash_key(k: &RunKey) -> u64 {
    hash_parts((k.project_id.as_bytes(), k.run_id.as_bytes()))
}

/// Each part as a string hashes (its bytes, then 0xff), so a key hashes the same from its
/// strings and from its packed bytes.
fn hash_parts((p, r): (&[u8], &[u8])) -> u64 {
    let mut h = FxBuildHasher.build_hasher();
    for part in [p, r] {
        h.write(part);
        h.write_u8(0xff);
    }
    h.finish()
}

/// What happened to one input event; the sink stage uses it to build rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A step that was new to its run.
    Step(StepFingerprints),
    /// A step whose (project_id, run_id, step_index) was already seen: ignored by detectors.
    /// Its fingerprints are not computed (left empty): the seen-steps check comes first so a
    /// redelivery storm costs no parsing or hashing.
    Redelivery(StepFingerprints),
    /// A lifecycle event (run_started / run_finished) that was applied.
    Lifecycle,
    /// An event for a run that already terminated (late, or redelivered after the end).
    AfterEnd,
}

/// Partition-level state that is not per run. Persisted with the run snapshots.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PartitionMeta {
    pub watermark_ms: Option<i64>,
    /// Events applied to this partition's runs (the eviction clock: least recently active).
    #[serde(default)]
    pub seq: u64,
    /// Runs (hashed) that reported a time beyond `max_future_skew_ms` of the watermark, with
    /// that time; `watermark_jump_quorum` distinct runs move the watermark. Bounded by it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jumps: Vec<(u64, i64)>,
    /// Runs (hashed) that reported a time more than `max_future_skew_ms` behind the watermark,
    /// with their latest such time; a quorum of them pulls the watermark back. Bounded by it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub behind: Vec<(u64, i64)>,
    /// Recently ended runs, oldest first, so a redelivered or late event cannot reopen them and
    /// publish a second `run_terminated`. Bounded by `EngineConfig::ended_runs_remembered`.
    /// Persisted as one changelog marker per run, not inside the meta record.
    #[serde(skip)]
    pub ended: VecDeque<RunKey>,
}

pub struct PartitionEngine {
    cfg: Arc<EngineConfig>,
    /// States are boxed: the table then holds pointers, not ~1 KB states with a quarter of its
    /// slots empty.
    runs: HashTable<Slot>,
    /// (event ts, run), earliest first, for the idle-timeout sweep: a sweep costs
    /// O(expired), not O(runs). One entry per run, pushed when it opens and never updated on
    /// its events: an entry is a lower bound of its run's `last_ts`, and one found below the
    /// run's `last_ts` when it surfaces goes back in at that time. Runs therefore surface in
    /// (last_ts, key) order exactly as with an always-current index, for one push per run
    /// instead of one per event. Entries of ended runs are dropped when met.
    idle: BinaryHeap<Reverse<(i64, PackedKey)>>,
    /// (event seq, run), oldest first: eviction order when `max_open_runs` is reached. Kept
    /// like `idle`, with `last_seq` as the time.
    lru: BinaryHeap<Reverse<(u64, PackedKey)>>,
    meta: PartitionMeta,
    ended_set: HashTable<RunKey>,
    /// Runs changed since the last `take_changes` (for the changelog), in no order and possibly
    /// repeated: an open run is listed when its `Slot::dirty` is first set, an ended run when it
    /// ends.
    dirty: Vec<PackedKey>,
    /// Ended runs that fell out of the remembered window since the last `take_changes`.
    forgotten: Vec<RunKey>,
    findings: Vec<detectors::Finding>,
    /// The canonical texts' buffers, handed from one step to the next.
    texts: fingerprint::TextBufs,
    /// Detector configuration per (project, agent) with overrides applied; a cache only (not
    /// persisted), rebuilt on demand from the immutable config.
    resolved: FxHashMap<(String, Option<String>), Arc<detectors::Resolved>>,
    /// The resolved configuration when there are no overrides (then every run shares it).
    resolved_default: Option<Arc<detectors::Resolved>>,
    /// Whether runs accumulate per-minute rollups (the worker's sink wants them; replay not).
    rollups: bool,
    /// Whether changes are listed for [`Self::take_changes`]. Off for replay, which has no
    /// changelog: nothing would drain `dirty` and `forgotten`, and they would grow by one key
    /// per run for as long as the input lasts.
    changes: bool,
    /// Minutes closed since the last `take_rollups`, in the order the events closed them.
    closed: Vec<rollup::Closed>,
    names: run::Names,
    caches: detectors::Caches,
}

/// One changelog change.
#[derive(Debug)]
pub enum Change<'a> {
    Upsert(RunKey, &'a RunState),
    /// The run ended: remember it (so late events cannot reopen it) until it is forgotten.
    Ended(RunKey),
    /// The run fell out of the remembered window: its changelog record can be deleted.
    Forget(RunKey),
}

impl PartitionEngine {
    pub fn new(cfg: Arc<EngineConfig>) -> Self {
        Self {
            cfg,
            runs: HashTable::new(),
            idle: BinaryHeap::new(),
            lru: BinaryHeap::new(),
            meta: PartitionMeta::default(),
            ended_set: HashTable::new(),
            dirty: Vec::new(),
            forgotten: Vec::new(),
            findings: Vec::new(),
            texts: Default::default(),
            resolved: FxHashMap::default(),
            resolved_default: None,
            rollups: false,
            changes: true,
            closed: Vec::new(),
            names: run::Names::default(),
            caches: detectors::Caches::default(),
        }
    }

    /// Keep per-run, per-minute rollups; collect closed minutes with [`Self::take_rollups`]
    /// after every event (they belong to that event's offset).
    pub fn with_rollups(mut self) -> Self {
        self.rollups = true;
        self
    }

    /// Keep no list of changes (no changelog will ask for them): [`Self::take_changes`] then
    /// returns nothing.
    pub fn without_changelog(mut self) -> Self {
        self.changes = false;
        self
    }

    /// Minutes closed by the events applied since the last call.
    pub fn take_rollups(&mut self) -> std::vec::Drain<'_, rollup::Closed> {
        self.closed.drain(..)
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    pub fn open_runs(&self) -> usize {
        self.runs.len()
    }

    /// Open runs and their state, for tests and diagnostics (order unspecified).
    pub fn runs(&self) -> impl Iterator<Item = (RunKey, &RunState)> {
        self.runs.iter().map(|s| (s.key.to_key(), &*s.state))
    }

    /// Ended runs remembered (bounded by `ended_runs_remembered`).
    pub fn ended_runs(&self) -> usize {
        self.meta.ended.len()
    }

    pub fn watermark_ms(&self) -> Option<i64> {
        self.meta.watermark_ms
    }

    /// Apply one event, appending the output events it causes to `out` in a deterministic order.
    pub fn apply(&mut self, ev: &Event, out: &mut Vec<OutputEvent>) -> Outcome {
        let key = ev.key();
        let hash = hash_key(key);
        // An open run is never among the ended ones (a run ends by leaving the table, and an
        // ended one cannot reopen while remembered), so most events skip that probe.
        let open = self.runs.find(hash, |s| s.key.is(key)).is_some();
        debug_assert!(
            !open || self.ended_set.find(hash, |k| k == key).is_none(),
            "run {key:?} is both open and ended"
        );
        let outcome = if !open && self.ended_set.find(hash, |k| k == key).is_some() {
            Outcome::AfterEnd
        } else {
            self.apply_to_run(ev, hash, !open, out)
        };
        self.advance_watermark(key, ev.ts_ms(), out);
        outcome
    }

    /// An event whose effect on its run is already in the restored state (the changelog records
    /// each run with the offset it covers): only partition time moves, as when first applied.
    pub fn observe_time_only(&mut self, ev: &Event, out: &mut Vec<OutputEvent>) {
        self.advance_watermark(ev.key(), ev.ts_ms(), out);
    }

    /// Evict least recently active runs until a new one fits under `max_open_runs`.
    fn make_room(&mut self, out: &mut Vec<OutputEvent>) {
        let cap = self.cfg.max_open_runs;
        while cap > 0 && self.runs.len() >= cap {
            let Some(Reverse((seq, key))) = self.lru.pop() else {
                break;
            };
            if let Some(Err(last)) = self.end_if_current(
                key,
                |s| s.last_seq,
                seq,
                |s| run::End::Evicted { at_ms: s.last_ts },
                out,
            ) {
                self.lru.push(Reverse(last));
            }
        }
    }

    /// End `key`'s run if it is open and its time (`time_of`: `last_ts` or `last_seq`) is
    /// still `at`, the time of the index entry that named it. `Some(Err)` hands back the entry
    /// at the run's later time, for its index; `None`: the run is not open.
    #[allow(clippy::type_complexity)]
    fn end_if_current<T: Copy + PartialEq>(
        &mut self,
        key: PackedKey,
        time_of: impl Fn(&RunState) -> T,
        at: T,
        end: impl FnOnce(&RunState) -> run::End<'static>,
        out: &mut Vec<OutputEvent>,
    ) -> Option<Result<(), (T, PackedKey)>> {
        let slot = match self.runs.find_entry(key.hash(), |s| s.key == key) {
            Ok(e) => {
                let t = time_of(&e.get().state);
                if t != at {
                    return Some(Err((t, key)));
                }
                e.remove().0
            }
            Err(_) => return None,
        };
        let mut state = slot.state;
        let key = key.to_key();
        let end = end(&state);
        self.close_minute(&key, &mut state, &end);
        out.push(OutputEvent::RunTerminated(terminated(&key, &state, end)));
        self.mark_ended(key, slot.key.listed());
        Some(Ok(()))
    }

    /// `fresh`: the run is not open yet.
    fn apply_to_run(
        &mut self,
        ev: &Event,
        hash: u64,
        fresh: bool,
        out: &mut Vec<OutputEvent>,
    ) -> Outcome {
        let key = ev.key();
        let ts = ev.ts_ms();
        self.meta.seq += 1;
        let seq = self.meta.seq;
        if self.lru.len() > 2 * self.runs.len() + 1024 {
            self.compact_lru();
        }
        if self.idle.len() > 2 * self.runs.len() + 1024 {
            self.compact_idle();
        }
        if fresh {
            self.make_room(out);
            self.runs.insert_unique(
                hash,
                Slot {
                    key: PackedKey::new(key),
                    state: Box::new(RunState::new(ts)),
                },
                |s| s.key.hash(),
            );
        }
        let Some(slot) = self.runs.find_mut(hash, |s| s.key.is(key)) else {
            unreachable!("run state inserted above")
        };
        if self.changes && !slot.key.listed() {
            slot.key.set_listed(true);
            self.dirty.push(slot.key.clone());
        }
        let state = &mut *slot.state;
        state.touch(ts);
        state.last_seq = seq;
        if fresh {
            if self.cfg.idle_timeout_ms > 0 {
                self.idle.push(Reverse((state.last_ts, slot.key.clone())));
            }
            if self.cfg.max_open_runs > 0 {
                self.lru.push(Reverse((seq, slot.key.clone())));
            }
        }
        if self.rollups {
            if fresh {
                rollup::start(&mut state.minute, ts);
            } else {
                let (minute, facts) = state.rollup_parts();
                rollup::advance(key, minute, facts, ts, &mut self.closed);
            }
        }
        match ev {
            Event::RunStarted(e) => {
                state.on_started(e, &mut self.names);
                Outcome::Lifecycle
            }
            Event::Step(step) => {
                if !state.seen.insert(step.step_index) {
                    state.redeliveries += 1;
                    return Outcome::Redelivery(StepFingerprints::default());
                }
                let resolved = resolve(
                    &mut self.resolved,
                    &mut self.resolved_default,
                    &self.cfg,
                    &key.project_id,
                    state.agent_name().or(step.agent.as_deref()),
                );
                let dcfg = &resolved.cfg;
                let texts = std::mem::take(&mut self.texts);
                let canon = Canonical::compute_in(step, &dcfg.fingerprint, &resolved.keys, texts);
                state.seen.bound(self.cfg.max_seen_ranges);
                state.on_step(step, &mut self.names);
                let was_caught = state.loop_detected;
                self.findings.clear();
                let counts = state.counts();
                state.detectors.on_step(
                    dcfg,
                    step,
                    &canon,
                    counts,
                    &mut self.caches,
                    &mut self.findings,
                );
                for f in self.findings.drain(..) {
                    let sig = build_signal(key, state, step, f);
                    out.push(OutputEvent::signal(sig));
                }
                if self.rollups {
                    let (detected, began) = (state.loop_detected, state.loop_step_index());
                    rollup::count_step(&mut state.minute, step, detected, began, was_caught);
                }
                let (fps, texts) = canon.into_parts();
                self.texts = texts;
                Outcome::Step(fps)
            }
            Event::RunFinished(e) => {
                let Ok(entry) = self.runs.find_entry(hash, |s| s.key.is(key)) else {
                    unreachable!("run state inserted above")
                };
                let slot = entry.remove().0;
                let mut state = slot.state;
                let end = run::End::Finished(e);
                self.close_minute(key, &mut state, &end);
                out.push(OutputEvent::RunTerminated(terminated(key, &state, end)));
                self.mark_ended(key.clone(), slot.key.listed());
                Outcome::Lifecycle
            }
        }
    }

    /// The watermark is the maximum event time of the partition, except that one run cannot
    /// drag it far ahead: a jump beyond `max_future_skew_ms` counts only once
    /// `watermark_jump_quorum` distinct runs made one (then to the earliest of their times).
    fn advance_watermark(&mut self, key: &RunKey, ts: i64, out: &mut Vec<OutputEvent>) {
        let skew = self.cfg.max_future_skew_ms;
        // A run that caught up is no longer evidence against the watermark.
        if !self.meta.behind.is_empty()
            && self
                .meta
                .watermark_ms
                .is_some_and(|w| w.saturating_sub(ts) <= skew)
        {
            let run = text::key64(
                "watermark.behind",
                &[key.project_id.as_bytes(), key.run_id.as_bytes()],
            );
            self.meta.behind.retain(|(r, _)| *r != run);
        }
        let wm = match self.meta.watermark_ms {
            Some(w) if w >= ts => {
                if skew > 0 && w.saturating_sub(ts) > skew {
                    self.note_behind(key, ts);
                }
                return;
            }
            Some(w) if skew > 0 && ts.saturating_sub(w) > skew => {
                let run = text::key64(
                    "watermark.jump",
                    &[key.project_id.as_bytes(), key.run_id.as_bytes()],
                );
                if !self.meta.jumps.iter().any(|(r, _)| *r == run) {
                    self.meta.jumps.push((run, ts));
                }
                if self.meta.jumps.len() < self.cfg.watermark_jump_quorum.max(1) {
                    return;
                }
                let to = self.meta.jumps.iter().map(|j| j.1).min().unwrap_or(ts);
                self.meta.jumps.clear();
                to
            }
            _ => ts,
        };
        // Pending jumps that the watermark has now come close to are ordinary again.
        self.meta
            .jumps
            .retain(|(_, t)| skew > 0 && t.saturating_sub(wm) > skew);
        self.meta.watermark_ms = Some(wm);
        let timeout = self.cfg.idle_timeout_ms;
        if timeout <= 0 {
            return;
        }
        // Expire in (last_ts, key) order: deterministic for a given event sequence.
        while let Some(Reverse((last_ts, _))) = self.idle.peek() {
            if last_ts.saturating_add(timeout) >= wm {
                break;
            }
            let Some(Reverse((last_ts, key))) = self.idle.pop() else {
                break;
            };
            if let Some(Err(later)) = self.end_if_current(
                key,
                |s| s.last_ts,
                last_ts,
                |_| run::End::Idle {
                    at_ms: last_ts.saturating_add(timeout),
                },
                out,
            ) {
                self.idle.push(Reverse(later));
            }
        }
    }

    /// The run is ending: its last minute is closed, on the minute of its end.
    fn close_minute(&mut self, key: &RunKey, state: &mut RunState, end: &run::End<'_>) {
        if self.rollups {
            let (_, reason, _, end_ms) = state.verdict(end);
            let (minute, facts) = state.rollup_parts();
            rollup::end(key, minute, facts, end_ms, reason, &mut self.closed);
        }
    }

    /// A watermark an outlier set (a far-future *first* event of a partition, which no guard
    /// can judge) would stop idle timeouts: once `watermark_jump_quorum` distinct runs report
    /// times more than `max_future_skew_ms` behind it, it comes back to the earliest of theirs.
    /// Moving back only delays timeouts, never causes one.
    fn note_behind(&mut self, key: &RunKey, ts: i64) {
        let run = text::key64(
            "watermark.behind",
            &[key.project_id.as_bytes(), key.run_id.as_bytes()],
        );
        match self.meta.behind.iter_mut().find(|(r, _)| *r == run) {
            Some(e) => e.1 = e.1.max(ts),
            None => self.meta.behind.push((run, ts)),
        }
        if self.meta.behind.len() < self.cfg.watermark_jump_quorum.max(1) {
            return;
        }
        let back = self.meta.behind.iter().map(|b| b.1).min().unwrap_or(ts);
        self.meta.behind.clear();
        self.meta.jumps.clear();
        self.meta.watermark_ms = Some(back);
    }

    /// `listed`: the run is in `dirty` already (its slot was dirty).
    fn mark_ended(&mut self, key: RunKey, listed: bool) {
        let hash = hash_key(&key);
        if !listed && self.changes {
            self.dirty.push(PackedKey::new(&key));
        }
        if self.ended_set.find(hash, |k| *k == key).is_none() {
            self.ended_set.insert_unique(hash, key.clone(), hash_key);
            self.meta.ended.push_back(key);
        }
        while self.meta.ended.len() > self.cfg.ended_runs_remembered {
            if let Some(old) = self.meta.ended.pop_front() {
                if let Ok(e) = self.ended_set.find_entry(hash_key(&old), |k| *k == old) {
                    e.remove();
                }
                if self.changes {
                    self.forgotten.push(old);
                }
            }
        }
    }

    /// Changes since the last call, for the changelog: at most one per run per flush, however
    /// many events it saw, in a deterministic order.
    pub fn take_changes(&mut self) -> Vec<Change<'_>> {
        let mut keys: Vec<RunKey> = self.dirty.drain(..).map(|k| k.to_key()).collect();
        keys.sort();
        keys.dedup();
        for k in &keys {
            if let Some(s) = self.runs.find(hash_key(k), |s| s.key.is(k)) {
                s.key.set_listed(false);
            }
        }
        let (runs, ended) = (&self.runs, &self.ended_set);
        let mut out: Vec<Change<'_>> = keys
            .into_iter()
            .filter_map(|k| {
                let hash = hash_key(&k);
                match runs.find(hash, |s| s.key.is(&k)) {
                    Some(s) => Some(Change::Upsert(k, &s.state)),
                    // Ended, unless it has since been forgotten (then `forgotten` says so).
                    None if ended.find(hash, |e| *e == k).is_some() => Some(Change::Ended(k)),
                    None => None,
                }
            })
            .collect();
        out.extend(self.forgotten.drain(..).map(Change::Forget));
        out
    }

    pub fn meta(&self) -> &PartitionMeta {
        &self.meta
    }

    /// Rebuild from a snapshot (changelog restore). `ended` is oldest first.
    pub fn restore(
        &mut self,
        meta: PartitionMeta,
        runs: impl IntoIterator<Item = (RunKey, RunState)>,
        ended: impl IntoIterator<Item = RunKey>,
    ) {
        self.runs.clear();
        self.idle.clear();
        self.lru.clear();
        self.dirty.clear();
        self.forgotten.clear();
        self.meta = meta;
        self.meta.ended = ended.into_iter().collect();
        self.ended_set.clear();
        for k in &self.meta.ended {
            let hash = hash_key(k);
            if self.ended_set.find(hash, |e| e == k).is_none() {
                self.ended_set.insert_unique(hash, k.clone(), hash_key);
            }
        }
        for (k, mut s) in runs {
            s.share_agent_name(&mut self.names);
            let hash = hash_key(&k);
            if self.ended_set.find(hash, |e| *e == k).is_some() {
                continue;
            }
            // A key listed twice: the later state wins, as an insert into a map would.
            if let Ok(e) = self.runs.find_entry(hash, |x| x.key.is(&k)) {
                let old = e.remove().0;
                drop(old);
            }
            let k = PackedKey::new(&k);
            self.runs.insert_unique(
                hash,
                Slot {
                    key: k,
                    state: Box::new(s),
                },
                |x| x.key.hash(),
            );
        }
        self.compact_lru();
        self.compact_idle();
    }

    /// Rebuild the idle heap from the current entries only (one per open run).
    fn compact_idle(&mut self) {
        self.idle = if self.cfg.idle_timeout_ms > 0 {
            heap_of(&self.runs, |s| s.last_ts)
        } else {
            BinaryHeap::new()
        };
    }

    /// Rebuild the eviction heap from the current entries only (one per open run).
    fn compact_lru(&mut self) {
        self.lru = if self.cfg.max_open_runs > 0 {
            heap_of(&self.runs, |s| s.last_seq)
        } else {
            BinaryHeap::new()
        };
    }
}

/// An index of every open run at its current `time`, earliest first.
fn heap_of<T: Ord>(
    runs: &HashTable<Slot>,
    time: impl Fn(&RunState) -> T,
) -> BinaryHeap<Reverse<(T, PackedKey)>> {
    runs.iter()
        .map(|s| Reverse((time(&s.state), s.key.clone())))
        .collect()
}

/// The run's detector configuration: the engine's, with project/agent overrides merged. An
/// override that does not deserialise falls back to the engine's configuration (call
/// `DetectorConfig::validate` at start-up to reject it instead).
fn resolve(
    cache: &mut FxHashMap<(String, Option<String>), Arc<detectors::Resolved>>,
    default: &mut Option<Arc<detectors::Resolved>>,
    cfg: &EngineConfig,
    project: &str,
    agent: Option<&str>,
) -> Arc<detectors::Resolved> {
    if cfg.detectors.overrides.is_empty() {
        return default
            .get_or_insert_with(|| Arc::new(detectors::Resolved::new(cfg.detectors.clone())))
            .clone();
    }
    let k = (project.to_string(), agent.map(str::to_string));
    if let Some(c) = cache.get(&k) {
        return c.clone();
    }
    if cache.len() >= 4096 {
        cache.clear();
    }
    let c = Arc::new(detectors::Resolved::new(
        cfg.detectors
            .resolve(project, agent)
            .unwrap_or_else(|_| cfg.detectors.clone()),
    ));
    cache.insert(k, c.clone());
    c
}

fn build_signal(key: &RunKey, state: &mut RunState, step: &Step, f: detectors::Finding) -> Signal {
    state.signals += 1;
    if f.severity.is_caught() {
        state.caught(step.step_index, f.first_step_index);
    }
    if let Some(reason) = f.stop_reason {
        state.inferred_reason.get_or_insert(reason);
    }
    let step_str = step.step_index.to_string();
    Signal {
        event_id: event_id(&[
            &key.project_id,
            &key.run_id,
            "signal",
            f.detector,
            &f.fingerprint,
            f.severity.as_str(),
            &step_str,
        ]),
        project_id: key.project_id.clone(),
        run_id: key.run_id.clone(),
        agent_name: state.agent_name().map(str::to_owned),
        step_index: step.step_index,
        ts: format_ts(step.ts_ms),
        detector: f.detector.to_string(),
        severity: f.severity,
        pattern: f.pattern,
        fingerprint: f.fingerprint,
        hits: f.hits,
        step_indices: f.step_indices,
        first_step_index: f.first_step_index,
        evidence: f.evidence,
    }
}

fn terminated(key: &RunKey, state: &RunState, end: run::End<'_>) -> RunTerminated {
    let (status, reason, reported, end_ms) = state.verdict(&end);
    RunTerminated {
        event_id: event_id(&[&key.project_id, &key.run_id, "run_terminated"]),
        project_id: key.project_id.clone(),
        run_id: key.run_id.clone(),
        agent_name: state.agent_name().map(str::to_owned),
        ts: format_ts(end_ms),
        started_at: format_ts(state.started_ms()),
        status: status.to_string(),
        termination_reason: reason.as_str().to_string(),
        termination_reason_reported: reported,
        loop_detected: state.loop_detected,
        loop_step_index: state.loop_step_index(),
        loop_caught_step_index: state.loop_caught_step_index(),
        reported_loop_detected: match end {
            run::End::Finished(e) => e.reported_loop_detected,
            run::End::Idle { .. } | run::End::Evicted { .. } => None,
        },
        signals: state.signals,
        redeliveries: state.redeliveries,
        totals: state.totals(end_ms),
    }
}

/// Partition a run id exactly as Kafka's default (Java) partitioner does for a keyed record:
/// murmur2 of the key bytes, positive, modulo the partition count. Producers of the input topic
/// are expected to use it (librdkafka: `partitioner=murmur2_random`).
pub fn partition_for(run_id: &str, partitions: u32) -> u32 {
    if partitions <= 1 {
        return 0;
    }
    (murmur2(run_id.as_bytes()) & 0x7fff_ffff) % partitions
}

fn murmur2(data: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rem = chunks.remainder();
    if rem.len() >= 3 {
        h ^= u32::from(rem[2]) << 16;
    }
    if rem.len() >= 2 {
        h ^= u32::from(rem[1]) << 8;
    }
    if !rem.is_empty() {
        h ^= u32::from(rem[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packed key is its two strings: equal, ordered and hashed as the `RunKey` it came from,
    /// wherever the project id ends.
    #[test]
    fn packed_keys_behave_as_their_run_keys() {
        let key = |p: &str, r: &str| RunKey {
            project_id: p.into(),
            run_id: r.into(),
        };
        let keys = [
            key("ab", "c"),
            key("a", "bc"),
            key("", "abc"),
            key("abc", ""),
            key("proj-1", "run-78b34b2853aad6a1"),
            key("projé", "rün-✓"),
            key("a", "b"),
        ];
        for a in &keys {
            let pa = PackedKey::new(a);
            assert_eq!(pa.to_key(), *a);
            assert_eq!(pa.hash(), hash_key(a));
            assert!(!pa.listed());
            for b in &keys {
                let pb = PackedKey::new(b);
                assert_eq!(pa.is(b), a == b, "{a:?} {b:?}");
                assert_eq!(pa == pb, a == b, "{a:?} {b:?}");
                assert_eq!(pa.cmp(&pb), a.cmp(b), "{a:?} {b:?}");
            }
        }
        // The flag is the key's, shared by its clones.
        let k = PackedKey::new(&keys[0]);
        k.clone().set_listed(true);
        assert!(k.listed());
    }

    #[test]
    fn murmur2_matches_kafka_java_partitioner() {
        // Reference values from Kafka's own Utils.murmur2 test vectors.
        assert_eq!(murmur2(b"21") as i32, -973932308);
        assert_eq!(murmur2(b"foobar") as i32, -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string") as i32, -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string") as i32, -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") as i32,
            -58897971
        );
        assert_eq!(murmur2(b"abc") as i32, 479470107);
    }

    /// Replay's engine lists no changes, whatever it sees (runs opening, ending, being
    /// forgotten), and finds exactly what the worker's engine finds.
    #[test]
    fn an_engine_without_changelog_lists_nothing_and_finds_the_same() {
        let cfg = Arc::new(EngineConfig {
            ended_runs_remembered: 3,
            ..EngineConfig::default()
        });
        let mut tracked = PartitionEngine::new(cfg.clone());
        let mut quiet = PartitionEngine::new(cfg).without_changelog();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for r in 0..10u64 {
            for i in 0..6u64 {
                let line = format!(
                    r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r{r}","ts":{},"step_index":{i},"step_type":"tool_call","tool_name":"search","tool_input":{{"q":"same"}},"tool_output":"[]"}}"#,
                    1_000 + 10 * r + i
                );
                let ev = crate::contract::decode(line.as_bytes()).expect("valid event");
                tracked.apply(&ev, &mut a);
                quiet.apply(&ev, &mut b);
            }
            let fin = format!(
                r#"{{"v":1,"kind":"run_finished","project_id":"p","run_id":"r{r}","ts":{},"status":"completed"}}"#,
                1_100 + 10 * r
            );
            let ev = crate::contract::decode(fin.as_bytes()).expect("valid event");
            tracked.apply(&ev, &mut a);
            quiet.apply(&ev, &mut b);
        }
        assert!(a.iter().any(|o| matches!(o, OutputEvent::LoopDetected(_))));
        assert_eq!(a, b);
        let listed = tracked.take_changes();
        assert!(listed.iter().any(|c| matches!(c, Change::Forget(_))));
        assert!(listed.iter().any(|c| matches!(c, Change::Ended(_))));
        assert!(quiet.take_changes().is_empty());
        assert_eq!(quiet.ended_runs(), 3);
    }
}
