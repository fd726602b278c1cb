//! The bounded table of run → strongest signal, fed from the signals topic.
//!
//! Pure bookkeeping: no I/O, no clock. Callers pass times in (the record's broker timestamp when
//! a signal arrives, the wall clock when sweeping), so the tests drive it by hand.
#[cfg(test)]
use crate::contract::Severity;
use crate::contract::{OutputEvent, RunKey, Signal};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// How long and how much the table remembers (`[verdicts]` in the configuration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VerdictConfig {
    /// At start, read the signals topic from this far back (by broker timestamp), so a restart
    /// does not forget the verdicts of runs still going. Keep it at least `ttl_ms`.
    pub(crate) lookback_ms: u64,
    /// Runs with a verdict kept at most; past it the least recently signalled run goes first.
    pub(crate) max_runs: usize,
    /// A run is forgotten this long after its last signal.
    pub(crate) ttl_ms: u64,
    /// A run that ended (its `run_terminated` arrived) is forgotten this long after the end.
    pub(crate) finished_ttl_ms: u64,
}

impl Default for VerdictConfig {
    fn default() -> Self {
        Self {
            lookback_ms: 3_600_000,
            max_runs: 100_000,
            ttl_ms: 3_600_000,
            finished_ttl_ms: 300_000,
        }
    }
}

/// Distinct signals whose ids a run remembers for de-duplication. The engine latches each
/// detector per run, so a run rarely has more than a handful; past this the oldest id is
/// forgotten (a copy of it redelivered later would count again).
const IDS_PER_RUN: usize = 64;

/// What a run's verdict is now.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunVerdict {
    /// The strongest signal so far: highest severity, then the earliest step, then the lowest
    /// event id (so the answer does not depend on arrival order).
    pub(crate) strongest: Arc<Signal>,
    /// Distinct signals seen for the run.
    pub(crate) signals: u32,
    /// The run's `run_terminated` arrived.
    pub(crate) finished: bool,
}

/// What one output event did to the table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Applied {
    /// A signal not seen before; `stronger` when it is the run's new strongest.
    New { signal: Arc<Signal>, stronger: bool },
    /// A copy of a signal already seen (same `event_id`), or a signal the filter rejects.
    Ignored,
    /// The run ended; `known` when the table held a verdict for it.
    Ended { key: RunKey, known: bool },
}

struct Entry {
    verdict: RunVerdict,
    ids: VecDeque<Box<str>>,
    /// Broker time (ms) of the last signal or of the end.
    touched_ms: i64,
    /// Position in `recency`; older stamps there are stale.
    stamp: u64,
}

pub(crate) struct VerdictTable {
    cfg: VerdictConfig,
    runs: HashMap<RunKey, Entry>,
    /// Least recently touched first; entries whose stamp no longer matches are skipped.
    recency: VecDeque<(RunKey, u64)>,
    next_stamp: u64,
    /// When set, only these runs are kept (an agent's guard watches its own runs).
    watched: Option<std::collections::HashSet<RunKey>>,
}

fn stronger(a: &Signal, b: &Signal) -> bool {
    (
        a.severity,
        std::cmp::Reverse(a.step_index),
        std::cmp::Reverse(&a.event_id),
    ) > (
        b.severity,
        std::cmp::Reverse(b.step_index),
        std::cmp::Reverse(&b.event_id),
    )
}

impl VerdictTable {
    pub(crate) fn new(cfg: VerdictConfig) -> Self {
        Self {
            cfg,
            runs: HashMap::new(),
            recency: VecDeque::new(),
            next_stamp: 0,
            watched: None,
        }
    }

    /// A table that keeps only the runs passed to [`VerdictTable::watch`].
    pub(crate) fn watching_only(cfg: VerdictConfig) -> Self {
        Self {
            watched: Some(Default::default()),
            ..Self::new(cfg)
        }
    }

    /// Keep this run's signals (a no-op for a table that keeps every run).
    pub(crate) fn watch(&mut self, key: RunKey) {
        if let Some(w) = &mut self.watched {
            w.insert(key);
        }
    }

    /// Stop keeping this run (watching tables): its verdict goes too.
    pub(crate) fn unwatch(&mut self, key: &RunKey) {
        if let Some(w) = &mut self.watched {
            w.remove(key);
            self.runs.remove(key);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.runs.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    pub(crate) fn get(&self, key: &RunKey) -> Option<&RunVerdict> {
        self.runs.get(key).map(|e| &e.verdict)
    }

    /// Every run of `project_id` the table holds, with its verdict (a pass over the whole table:
    /// for a stream that must be told everything again, not for each request).
    pub(crate) fn runs_of(&self, project_id: &str) -> Vec<(RunKey, RunVerdict)> {
        self.runs
            .iter()
            .filter(|(k, _)| k.project_id == project_id)
            .map(|(k, e)| (k.clone(), e.verdict.clone()))
            .collect()
    }

    /// Take one output event read at broker time `at_ms`.
    pub(crate) fn apply(&mut self, event: &OutputEvent, at_ms: i64) -> Applied {
        let signal = match event {
            OutputEvent::LoopWarning(s) | OutputEvent::LoopDetected(s) => s,
            OutputEvent::RunTerminated(t) => {
                let key = RunKey {
                    project_id: t.project_id.clone(),
                    run_id: t.run_id.clone(),
                };
                let known = self.runs.contains_key(&key);
                if known {
                    if let Some(e) = self.runs.get_mut(&key) {
                        e.verdict.finished = true;
                    }
                    self.touch(&key, at_ms);
                }
                return Applied::Ended { key, known };
            }
        };
        let key = RunKey {
            project_id: signal.project_id.clone(),
            run_id: signal.run_id.clone(),
        };
        if self.watched.as_ref().is_some_and(|w| !w.contains(&key)) {
            return Applied::Ignored;
        }
        let arc = Arc::new(signal.clone());
        let stronger_now = match self.runs.get_mut(&key) {
            Some(e) => {
                if e.ids.iter().any(|id| **id == *signal.event_id) {
                    return Applied::Ignored;
                }
                if e.ids.len() >= IDS_PER_RUN {
                    e.ids.pop_front();
                }
                e.ids.push_back(signal.event_id.as_str().into());
                e.verdict.signals = e.verdict.signals.saturating_add(1);
                let s = stronger(signal, &e.verdict.strongest);
                if s {
                    e.verdict.strongest = arc.clone();
                }
                s
            }
            None => {
                self.make_room();
                self.runs.insert(
                    key.clone(),
                    Entry {
                        verdict: RunVerdict {
                            strongest: arc.clone(),
                            signals: 1,
                            finished: false,
                        },
                        ids: VecDeque::from([signal.event_id.as_str().into()]),
                        touched_ms: at_ms,
                        stamp: 0,
                    },
                );
                true
            }
        };
        self.touch(&key, at_ms);
        Applied::New {
            signal: arc,
            stronger: stronger_now,
        }
    }

    /// Forget runs past their time to live; returns how many went.
    pub(crate) fn sweep(&mut self, now_ms: i64) -> usize {
        let (ttl, fin) = (
            i64::try_from(self.cfg.ttl_ms).unwrap_or(i64::MAX),
            i64::try_from(self.cfg.finished_ttl_ms).unwrap_or(i64::MAX),
        );
        let before = self.runs.len();
        self.runs.retain(|_, e| {
            let keep_for = if e.verdict.finished { fin } else { ttl };
            now_ms.saturating_sub(e.touched_ms) < keep_for
        });
        let gone = before - self.runs.len();
        if gone > 0 {
            self.compact();
        }
        gone
    }

    fn touch(&mut self, key: &RunKey, at_ms: i64) {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        if let Some(e) = self.runs.get_mut(key) {
            // Replayed history can arrive out of broker-time order across partitions.
            e.touched_ms = e.touched_ms.max(at_ms);
            e.stamp = stamp;
            self.recency.push_back((key.clone(), stamp));
        }
        if self.recency.len() > 2 * self.runs.len() + 16 {
            self.compact();
        }
    }

    /// Rebuild the recency queue from the live entries, dropping stale positions.
    fn compact(&mut self) {
        let mut live: Vec<(u64, RunKey)> = self
            .runs
            .iter()
            .map(|(k, e)| (e.stamp, k.clone()))
            .collect();
        live.sort_unstable_by_key(|(s, _)| *s);
        self.recency = live.into_iter().map(|(s, k)| (k, s)).collect();
    }

    /// Evict least recently touched runs until one more fits.
    fn make_room(&mut self) {
        let cap = self.cfg.max_runs.max(1);
        while self.runs.len() >= cap {
            let Some((key, stamp)) = self.recency.pop_front() else {
                break;
            };
            if self.runs.get(&key).is_some_and(|e| e.stamp == stamp) {
                self.runs.remove(&key);
            }
        }
    }
}

#[cfg(test)]
/// Does `verdict` reach `min`?
pub(crate) fn reaches(verdict: Option<&RunVerdict>, min: Severity) -> bool {
    verdict.is_some_and(|v| v.strongest.severity >= min)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::RunTerminated;

    fn sig(project: &str, run: &str, id: &str, sev: Severity, step: u64) -> OutputEvent {
        OutputEvent::signal(Signal {
            event_id: id.into(),
            project_id: project.into(),
            run_id: run.into(),
            agent_name: None,
            step_index: step,
            ts: "2026-01-01T00:00:00Z".into(),
            detector: format!("det-{id}"),
            severity: sev,
            pattern: "web_search(q=x)".into(),
            fingerprint: "ff".into(),
            hits: 3,
            step_indices: vec![step - 2, step - 1, step],
            first_step_index: step - 2,
            evidence: serde_json::json!({"calls": 3}),
            advice: String::new(),
        })
    }

    fn ended(project: &str, run: &str) -> OutputEvent {
        OutputEvent::RunTerminated(RunTerminated {
            event_id: format!("end-{run}"),
            project_id: project.into(),
            run_id: run.into(),
            agent_name: None,
            ts: "2026-01-01T00:00:00Z".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            status: "completed".into(),
            termination_reason: "clean".into(),
            termination_reason_reported: true,
            loop_detected: true,
            loop_step_index: None,
            loop_caught_step_index: None,
            loop_step_number: None,
            loop_caught_step_number: None,
            reported_loop_detected: None,
            signals: 1,
            redeliveries: 0,
            totals: Default::default(),
            steered_step_index: None,
            steers: 0,
            steer_outcome: None,
        })
    }

    fn key(project: &str, run: &str) -> RunKey {
        RunKey {
            project_id: project.into(),
            run_id: run.into(),
        }
    }

    fn strongest(t: &VerdictTable, p: &str, r: &str) -> Option<(Severity, String)> {
        t.get(&key(p, r))
            .map(|v| (v.strongest.severity, v.strongest.event_id.clone()))
    }

    #[test]
    fn the_strongest_signal_wins_whatever_the_arrival_order() {
        let events = [
            sig("p", "r", "a", Severity::Warn, 3),
            sig("p", "r", "b", Severity::Stop, 9),
            sig("p", "r", "c", Severity::Alert, 5),
            sig("p", "r", "d", Severity::Stop, 7),
        ];
        // Every order of arrival ends with the earliest stop.
        for rotation in 0..events.len() {
            let mut t = VerdictTable::new(VerdictConfig::default());
            for i in 0..events.len() {
                t.apply(&events[(i + rotation) % events.len()], 0);
            }
            assert_eq!(
                strongest(&t, "p", "r"),
                Some((Severity::Stop, "d".into())),
                "rotation {rotation}"
            );
            assert_eq!(t.get(&key("p", "r")).map(|v| v.signals), Some(4));
        }
        let mut t = VerdictTable::new(VerdictConfig::default());
        let first = t.apply(&sig("p", "r", "a", Severity::Warn, 3), 0);
        assert!(
            matches!(first, Applied::New { stronger: true, .. }),
            "{first:?}"
        );
        let weaker = t.apply(&sig("p", "r", "x", Severity::Info, 4), 0);
        assert!(
            matches!(
                weaker,
                Applied::New {
                    stronger: false,
                    ..
                }
            ),
            "{weaker:?}"
        );
        assert_eq!(strongest(&t, "p", "r"), Some((Severity::Warn, "a".into())));
        assert!(reaches(t.get(&key("p", "r")), Severity::Warn));
        assert!(!reaches(t.get(&key("p", "r")), Severity::Stop));
    }

    #[test]
    fn copies_of_one_signal_count_once() {
        let mut t = VerdictTable::new(VerdictConfig::default());
        let s = sig("p", "r", "a", Severity::Stop, 4);
        assert!(matches!(t.apply(&s, 0), Applied::New { .. }));
        for _ in 0..3 {
            assert_eq!(t.apply(&s, 5), Applied::Ignored);
        }
        assert_eq!(t.get(&key("p", "r")).map(|v| v.signals), Some(1));
        // The same id in another run is another signal.
        assert!(matches!(
            t.apply(&sig("p", "other", "a", Severity::Stop, 4), 0),
            Applied::New { .. }
        ));
    }

    #[test]
    fn runs_are_scoped_by_project() {
        let mut t = VerdictTable::new(VerdictConfig::default());
        t.apply(&sig("proj-b", "r1", "a", Severity::Stop, 4), 0);
        assert!(t.get(&key("proj-a", "r1")).is_none());
        assert!(t.get(&key("proj-b", "r1")).is_some());
        // One run id in two projects: two runs, two verdicts.
        t.apply(&sig("proj-a", "r1", "b", Severity::Warn, 6), 0);
        assert_eq!(
            strongest(&t, "proj-a", "r1"),
            Some((Severity::Warn, "b".into()))
        );
        assert_eq!(
            strongest(&t, "proj-b", "r1"),
            Some((Severity::Stop, "a".into()))
        );
    }

    #[test]
    fn full_tables_evict_the_least_recently_signalled_run() {
        let cfg = VerdictConfig {
            max_runs: 3,
            ..VerdictConfig::default()
        };
        let mut t = VerdictTable::new(cfg);
        for (i, run) in ["r1", "r2", "r3"].iter().enumerate() {
            t.apply(
                &sig("p", run, &format!("{run}a"), Severity::Warn, 3),
                i as i64,
            );
        }
        // r1 signals again: r2 is now the least recent.
        t.apply(&sig("p", "r1", "r1b", Severity::Stop, 5), 10);
        t.apply(&sig("p", "r4", "r4a", Severity::Stop, 3), 11);
        assert_eq!(t.len(), 3);
        assert!(t.get(&key("p", "r2")).is_none());
        for run in ["r1", "r3", "r4"] {
            assert!(t.get(&key("p", run)).is_some(), "{run}");
        }
        // Many updates to one run never grow the table or its queue past bounds.
        for i in 0..1000 {
            t.apply(&sig("p", "r1", &format!("x{i}"), Severity::Info, 5), 20);
        }
        assert_eq!(t.len(), 3);
        assert!(t.recency.len() <= 2 * t.len() + 17, "{}", t.recency.len());
        assert!(t.runs[&key("p", "r1")].ids.len() <= IDS_PER_RUN);
    }

    #[test]
    fn finished_and_old_runs_expire() {
        let cfg = VerdictConfig {
            ttl_ms: 1_000,
            finished_ttl_ms: 100,
            ..VerdictConfig::default()
        };
        let mut t = VerdictTable::new(cfg);
        t.apply(&sig("p", "open", "a", Severity::Stop, 3), 0);
        t.apply(&sig("p", "done", "b", Severity::Stop, 3), 0);
        assert_eq!(
            t.apply(&ended("p", "done"), 50),
            Applied::Ended {
                key: key("p", "done"),
                known: true
            }
        );
        assert!(t.get(&key("p", "done")).is_some_and(|v| v.finished));
        // A run that never signalled is not remembered for its end.
        assert!(matches!(
            t.apply(&ended("p", "quiet"), 50),
            Applied::Ended { known: false, .. }
        ));
        assert_eq!(t.len(), 2);
        assert_eq!(t.sweep(149), 0);
        assert_eq!(t.sweep(150), 1);
        assert!(t.get(&key("p", "done")).is_none());
        assert_eq!(t.sweep(999), 0);
        assert_eq!(t.sweep(1_000), 1);
        assert!(t.is_empty());
    }

    #[test]
    fn a_watching_table_keeps_only_watched_runs() {
        let mut t = VerdictTable::watching_only(VerdictConfig::default());
        assert_eq!(
            t.apply(&sig("p", "r", "a", Severity::Stop, 3), 0),
            Applied::Ignored
        );
        t.watch(key("p", "r"));
        assert!(matches!(
            t.apply(&sig("p", "r", "a", Severity::Stop, 3), 0),
            Applied::New { .. }
        ));
        assert_eq!(
            t.apply(&sig("q", "r", "a", Severity::Stop, 3), 0),
            Applied::Ignored
        );
        t.unwatch(&key("p", "r"));
        assert!(t.is_empty());
    }
}
