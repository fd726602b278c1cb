//! The detection engine: pure and deterministic.
//!
//! `(state, event) -> (state, output events)`. No I/O, no clocks: time comes only from event
//! `ts`, and the idle-timeout watermark is the maximum event time seen *in this partition*, so
//! `eddy replay --partitions N` and `eddy run` over N partitions reach identical verdicts.
//! One [`PartitionEngine`] per input partition owns the state of every run keyed to it.
//!
//! Here the engine and its event path (open, apply, end, evict); beside it `run_table` (the run
//! table's entries and keys), `watermark` (partition time and idle timeouts), `snapshot` (changes for the
//! changelog, restore), `emit` (signals and verdicts), `advice` (the corrective message a
//! signal carries), `outcome` (what callers get back) and `partitioner` (which partition a run
//! id belongs to).
mod advice;
pub mod detectors;
mod emit;
mod engine_config;
pub mod fingerprint;
pub(crate) mod json;
pub(crate) mod memo;
mod outcome;
mod partitioner;
pub(crate) mod rollup;
pub(crate) mod run;
mod run_table;
pub(crate) mod seen;
mod snapshot;
pub(crate) mod text;
mod watermark;

use crate::contract::{Event, OutputEvent, RunKey};
use emit::{build_signal, terminated};
pub use engine_config::EngineConfig;
pub(crate) use fingerprint::Canonical;
pub use fingerprint::StepFingerprints;
use hashbrown::HashTable;
pub(crate) use outcome::PartitionMeta;
pub use outcome::{Change, Outcome};
pub use partitioner::partition_for;
pub use run::RunState;
use run_table::{hash_key, PackedKey, Slot};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// The detectors for one input partition: every open run's state, the watermark, the
/// changes the changelog must record.
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

impl PartitionEngine {
    /// An empty engine.
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
    pub(crate) fn without_changelog(mut self) -> Self {
        self.changes = false;
        self
    }

    /// Minutes closed by the events applied since the last call.
    pub fn take_rollups(&mut self) -> std::vec::Drain<'_, rollup::Closed> {
        self.closed.drain(..)
    }

    /// Runs currently tracked (bounded by `max_open_runs`).
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

    /// The partition's event-time watermark, once an event has set it.
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
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn observe_time_only(&mut self, ev: &Event, out: &mut Vec<OutputEvent>) {
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
                if step.is_steer() {
                    // The guard's report that it steered the agent, not a step of the agent:
                    // recorded on the run (its outcome is told at the end), never counted in
                    // the run's totals nor judged; the detectors only re-arm, so a loop that
                    // goes on after the steer is reported (stopped) again.
                    state.seen.bound(self.cfg.max_seen_ranges);
                    state.steered(step.step_index);
                    state.detectors.on_steered();
                    return Outcome::Step(StepFingerprints::default());
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
                    let detected = state.loop_detected;
                    let since = (detected && !was_caught)
                        .then(|| state.loop_step_index())
                        .flatten()
                        .and_then(|began| state.steps_between(began, step.step_index));
                    rollup::count_step(&mut state.minute, step, detected, since, was_caught);
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

    /// The run is ending: its last minute is closed, on the minute of its end.
    fn close_minute(&mut self, key: &RunKey, state: &mut RunState, end: &run::End<'_>) {
        if self.rollups {
            let (_, reason, _, end_ms) = state.verdict(end);
            let (minute, facts) = state.rollup_parts();
            rollup::end(key, minute, facts, end_ms, reason, &mut self.closed);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
