//! Verdicts: what the signals topic says about each run, kept where an agent can ask.
//!
//! eddy's worker publishes signals to the output topic; this stage reads them back for the
//! places that stop agents: `eddy ingest-http`'s verdict routes and the Rust agent guard
//! (`crate::agent::Guard`). A consumer task ([`consumer::spawn`]) assigns itself every partition
//! (no group, no commits: every reader sees everything) and feeds a bounded [`VerdictTable`];
//! new signals are also broadcast to whoever streams them.
pub mod consumer;
pub mod table;

pub use table::{reaches, Applied, RunVerdict, VerdictConfig, VerdictTable};

use crate::contract::{OutputEvent, RunKey, Signal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::broadcast;

#[derive(Debug, thiserror::Error)]
pub enum VerdictError {
    #[error("cannot create the signals consumer: {0}")]
    Create(#[source] rdkafka::error::KafkaError),
    #[error("cannot assign the partitions of {topic}: {source}")]
    Assign {
        topic: String,
        #[source]
        source: rdkafka::error::KafkaError,
    },
}

/// A change a streaming reader is told about.
#[derive(Debug, Clone)]
pub enum Update {
    /// A signal not seen before (copies with the same `event_id` are not repeated).
    Signal(Arc<Signal>),
    /// The run ended.
    Ended(RunKey),
}

/// Updates buffered for a slow streaming reader; past it the reader is told it lagged and reads
/// the table again.
const UPDATES_BUFFERED: usize = 1024;

/// The table, the update feed and whether the start-up read has caught up.
pub struct Verdicts {
    table: Mutex<VerdictTable>,
    updates: broadcast::Sender<Update>,
    caught_up: AtomicBool,
}

impl Verdicts {
    pub fn new(table: VerdictTable) -> Arc<Self> {
        Arc::new(Self {
            table: Mutex::new(table),
            updates: broadcast::channel(UPDATES_BUFFERED).0,
            caught_up: AtomicBool::new(false),
        })
    }

    pub fn table(&self) -> MutexGuard<'_, VerdictTable> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, key: &RunKey) -> Option<RunVerdict> {
        self.table().get(key).cloned()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Update> {
        self.updates.subscribe()
    }

    /// True once the consumer has read everything the topic held when it started (the
    /// look-back window): before, a run without a verdict may just not be read yet.
    pub fn is_caught_up(&self) -> bool {
        self.caught_up.load(Ordering::Acquire)
    }

    pub(crate) fn set_caught_up(&self) {
        self.caught_up.store(true, Ordering::Release);
    }

    /// Apply one output event (read at broker time `at_ms`) and tell the streaming readers.
    pub fn apply(&self, event: &OutputEvent, at_ms: i64) -> Applied {
        let applied = self.table().apply(event, at_ms);
        let update = match &applied {
            Applied::New { signal, .. } => Some(Update::Signal(signal.clone())),
            Applied::Ended { key, .. } => Some(Update::Ended(key.clone())),
            Applied::Ignored => None,
        };
        if let Some(u) = update {
            // No receiver is not an error: nobody is streaming.
            let _ = self.updates.send(u);
        }
        applied
    }
}
