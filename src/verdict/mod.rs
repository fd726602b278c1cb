//! Verdicts: what the signals topic says about each run, kept where an agent can ask.
//!
//! eddy's worker publishes signals to the output topic; this stage reads them back for the
//! places that stop agents: `eddy ingest-http`'s verdict routes and the Rust agent guard
//! (`crate::agent::Guard`). A consumer task (`consumer::spawn`) assigns itself every partition
//! (no group, no commits: every reader sees everything) and feeds a bounded `VerdictTable`;
//! new signals are also broadcast to whoever streams them, and kept in a bounded `Journal`
//! that a project's stream resumes from after a reconnect.
pub(crate) mod consumer;
pub(crate) mod table;

pub(crate) use table::{Applied, RunVerdict, VerdictConfig, VerdictTable};

use crate::contract::{OutputEvent, RunKey, Severity, Signal};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{broadcast, watch};

/// Why the signals topic could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum VerdictError {
    /// The consumer could not be created.
    #[error("cannot create the signals consumer: {0}")]
    Create(#[source] rdkafka::error::KafkaError),
    /// The topic's partitions could not be assigned.
    #[error("cannot assign the partitions of {topic}: {source}")]
    Assign {
        /// The signals topic.
        topic: String,
        /// The client's error.
        #[source]
        source: rdkafka::error::KafkaError,
    },
}

/// A change a streaming reader is told about.
#[derive(Debug, Clone)]
pub(crate) enum Update {
    /// A signal not seen before (copies with the same `event_id` are not repeated).
    Signal(Arc<Signal>),
    /// The run ended.
    Ended(RunKey),
}

/// Updates buffered for a slow streaming reader; past it the reader is told it lagged and reads
/// the table again.
const UPDATES_BUFFERED: usize = 1024;

/// Updates the journal holds for streams to resume from. At a few hundred bytes each this is
/// some tens of MB at most; a client away for longer than this many updates is resent the
/// table instead (see [`Journal::after`]).
pub(crate) const JOURNAL_UPDATES: usize = 65_536;

/// One update as every stream sends it: serialized once, whatever the number of streams.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) seq: u64,
    pub(crate) project_id: Arc<str>,
    pub(crate) run_id: Arc<str>,
    /// None for the end of a run (it passes every severity filter).
    pub(crate) severity: Option<Severity>,
    /// The SSE event name: `signal` or `run_terminated`.
    pub(crate) name: &'static str,
    /// The output event as JSON: the signal with its `kind`, or
    /// `{"kind":"run_terminated","project_id","run_id"}`.
    pub(crate) data: Arc<str>,
}

impl Entry {
    fn of(seq: u64, update: &Update) -> Self {
        match update {
            Update::Signal(s) => Entry {
                seq,
                project_id: s.project_id.as_str().into(),
                run_id: s.run_id.as_str().into(),
                severity: Some(s.severity),
                name: "signal",
                data: serde_json::to_string(&OutputEvent::signal((**s).clone()))
                    .unwrap_or_default()
                    .into(),
            },
            Update::Ended(k) => Entry {
                seq,
                project_id: k.project_id.as_str().into(),
                run_id: k.run_id.as_str().into(),
                severity: None,
                name: "run_terminated",
                data: serde_json::json!({
                    "kind": "run_terminated",
                    "project_id": k.project_id,
                    "run_id": k.run_id,
                })
                .to_string()
                .into(),
            },
        }
    }
}

/// The last `cap` updates, numbered from 1 without gaps.
pub(crate) struct Journal {
    entries: VecDeque<Entry>,
    /// Updates kept (0: none; an agent's guard or the UI streams nothing to resume).
    cap: usize,
    /// The number of the last update (0: none yet).
    head: u64,
}

/// What a stream resuming after update `seq` is sent.
#[derive(Debug)]
pub(crate) enum Resume {
    /// Every update after it is still held: these (possibly none).
    Held(Vec<Entry>),
    /// Some updates after it are gone (or the number was never this journal's): only the table
    /// can tell what was missed.
    Gone,
}

impl Journal {
    fn new(cap: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            cap,
            head: 0,
        }
    }

    pub(crate) fn head(&self) -> u64 {
        self.head
    }

    fn push(&mut self, update: &Update) {
        self.head += 1;
        if self.cap == 0 {
            return;
        }
        if self.entries.len() >= self.cap {
            self.entries.pop_front();
        }
        self.entries.push_back(Entry::of(self.head, update));
    }

    /// The updates after `seq` that `keep` selects.
    pub(crate) fn after(&self, seq: u64, keep: impl Fn(&Entry) -> bool) -> Resume {
        let oldest = self.entries.front().map_or(self.head + 1, |e| e.seq);
        if seq > self.head || seq + 1 < oldest {
            return Resume::Gone;
        }
        // Numbers are contiguous: the first one wanted is at a known index.
        let skip = usize::try_from(seq + 1 - oldest).unwrap_or(usize::MAX);
        Resume::Held(
            self.entries
                .iter()
                .skip(skip)
                .filter(|e| keep(e))
                .cloned()
                .collect(),
        )
    }
}

/// The table, the update feed and whether the start-up read has caught up.
pub(crate) struct Verdicts {
    table: Mutex<VerdictTable>,
    updates: broadcast::Sender<Update>,
    journal: Mutex<Journal>,
    /// The journal's head, for streams waiting on the next update (a watch cannot lag).
    head: watch::Sender<u64>,
    /// Names this journal in event ids: an id from another process (a restarted or another
    /// replica) is not mistaken for a position in this one.
    epoch: String,
    caught_up: AtomicBool,
}

impl Verdicts {
    /// Without a journal: for readers that stream nothing to resume (an agent's guard, the UI).
    pub(crate) fn new(table: VerdictTable) -> Arc<Self> {
        Self::with_journal(table, 0)
    }

    /// Keeping the last `journal` updates for project streams to resume from.
    pub(crate) fn with_journal(table: VerdictTable, journal: usize) -> Arc<Self> {
        Arc::new(Self {
            table: Mutex::new(table),
            updates: broadcast::channel(UPDATES_BUFFERED).0,
            journal: Mutex::new(Journal::new(journal)),
            head: watch::channel(0).0,
            epoch: format!("{:x}", rand::random::<u64>()),
            caught_up: AtomicBool::new(false),
        })
    }

    pub(crate) fn journal(&self) -> MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes when the journal's head moves.
    pub(crate) fn watch_head(&self) -> watch::Receiver<u64> {
        self.head.subscribe()
    }

    /// This journal's name in event ids (`<epoch>-<seq>`).
    pub(crate) fn epoch(&self) -> &str {
        &self.epoch
    }

    pub(crate) fn table(&self) -> MutexGuard<'_, VerdictTable> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn get(&self, key: &RunKey) -> Option<RunVerdict> {
        self.table().get(key).cloned()
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Update> {
        self.updates.subscribe()
    }

    /// True once the consumer has read everything the topic held when it started (the
    /// look-back window): before, a run without a verdict may just not be read yet.
    pub(crate) fn is_caught_up(&self) -> bool {
        self.caught_up.load(Ordering::Acquire)
    }

    pub(crate) fn set_caught_up(&self) {
        self.caught_up.store(true, Ordering::Release);
    }

    /// Apply one output event (read at broker time `at_ms`) and tell the streaming readers.
    pub(crate) fn apply(&self, event: &OutputEvent, at_ms: i64) -> Applied {
        let applied = self.table().apply(event, at_ms);
        let update = match &applied {
            Applied::New { signal, .. } => Some(Update::Signal(signal.clone())),
            Applied::Ended { key, .. } => Some(Update::Ended(key.clone())),
            Applied::Ignored => None,
        };
        if let Some(u) = update {
            let head = {
                let mut j = self.journal();
                j.push(&u);
                j.head()
            };
            self.head.send_replace(head);
            // No receiver is not an error: nobody is streaming.
            let _ = self.updates.send(u);
        }
        applied
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(n: u64) -> Update {
        Update::Ended(RunKey {
            project_id: "p".into(),
            run_id: format!("r{n}"),
        })
    }

    #[test]
    fn the_journal_resumes_only_what_it_still_holds() {
        let mut j = Journal::new(JOURNAL_UPDATES);
        assert!(matches!(j.after(0, |_| true), Resume::Held(v) if v.is_empty()));
        assert!(
            matches!(j.after(1, |_| true), Resume::Gone),
            "never reached"
        );
        for n in 1..=3 {
            j.push(&ended(n));
        }
        let Resume::Held(v) = j.after(1, |_| true) else {
            panic!("held")
        };
        assert_eq!(v.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(&*v[0].run_id, "r2");
        assert_eq!(v[0].name, "run_terminated");
        let Resume::Held(v) = j.after(0, |e| &*e.run_id == "r3") else {
            panic!("held")
        };
        assert_eq!(v.len(), 1);
        for n in 4..=(JOURNAL_UPDATES as u64 + 2) {
            j.push(&ended(n));
        }
        // Update 2 fell out: a client after 1 missed it; one after 2 missed nothing.
        assert!(matches!(j.after(1, |_| true), Resume::Gone));
        let Resume::Held(v) = j.after(2, |_| true) else {
            panic!("held")
        };
        assert_eq!(v.len(), JOURNAL_UPDATES);
        assert_eq!(j.head(), JOURNAL_UPDATES as u64 + 2);
        // No journal: positions move on, nothing is held to resume from.
        let mut none = Journal::new(0);
        none.push(&ended(1));
        assert!(matches!(none.after(0, |_| true), Resume::Gone));
        assert_eq!(none.head(), 1);
    }
}
