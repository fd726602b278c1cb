//! One task per assigned input partition. It owns its partition's runs' state (a
//! `PartitionEngine`), the ClickHouse rows and output deliveries it produced since the last
//! barrier, and its next offset. Tasks run on every core; they never commit: at a barrier they
//! hand their epoch to the coordinator, which makes it durable and commits (see `super`).
//!
//! A task is generic over what it sends (`TaskSink`, defined here: the worker's `Producer` fork) and is handed
//! its restore as a closure, so its tests run it without a broker (`partition_tests.rs`).
use super::{check_key, wall_ms, WorkerError};
use crate::changelog;
use crate::config::{KafkaConfig, WorkerConfig};
use crate::contract::input::decode_bounded;
use crate::contract::{Event, OutputEvent, RunKey};
use crate::emit::{DeadLetter, EmitError, Outbox, Producer};
use crate::engine::{EngineConfig, Outcome, PartitionEngine};
use crate::sink::rows::{push_output, Origin, RollupRow};
use crate::sink::{Batch, StepRow};
use crate::source::restore::Restored;
use crate::source::SourceError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Totals across partitions, for the progress line and the final summary.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) events: AtomicU64,
    pub(crate) dead_letters: AtomicU64,
    pub(crate) outputs: AtomicU64,
    pub(crate) skipped_restored: AtomicU64,
}

impl Counters {
    pub(crate) fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

fn bump(c: &AtomicU64) {
    add(c, 1);
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// An input message, detached from librdkafka's buffer.
pub(crate) struct Raw {
    pub(crate) offset: i64,
    pub(crate) key: Option<Vec<u8>>,
    pub(crate) payload: Option<Vec<u8>>,
}

pub(crate) enum Cmd {
    /// Consecutive messages of the partition, in offset order.
    Msgs(Vec<Raw>),
    /// Hand over everything since the last barrier. Queued behind the messages already sent,
    /// so the epoch covers exactly the messages forwarded before it.
    Barrier(oneshot::Sender<Result<Epoch, WorkerError>>),
}

/// What a partition task sends to Kafka, per message.
pub(crate) trait TaskSink: Send + 'static {
    fn send_output(&mut self, topic: &str, o: &OutputEvent) -> Result<(), EmitError>;
    fn send_dead_letter(&mut self, topic: &str, d: &DeadLetter<'_>) -> Result<(), EmitError>;
    /// Everything sent (or held back) since the last barrier, for the flush to await or send.
    fn take_outbox(&mut self) -> Outbox;
}

impl TaskSink for Producer {
    fn send_output(&mut self, topic: &str, o: &OutputEvent) -> Result<(), EmitError> {
        Producer::send_output(self, topic, o)
    }

    fn send_dead_letter(&mut self, topic: &str, d: &DeadLetter<'_>) -> Result<(), EmitError> {
        Producer::send_dead_letter(self, topic, d)
    }

    fn take_outbox(&mut self) -> Outbox {
        Producer::take_outbox(self)
    }
}

/// What one partition produced between two barriers, ready to be made durable in the order of
/// the commit rule: rows, then deliveries, then changelog, then the offset. `O` is what the
/// task sent to Kafka (generic so the flush can be tested on fakes).
pub(crate) struct Epoch<O = Outbox> {
    pub(crate) partition: i32,
    /// One past the last message applied; `None` if nothing was applied.
    pub(crate) next_offset: Option<i64>,
    pub(crate) batch: Batch,
    /// Changelog records (key, value or tombstone) of the runs changed, then the meta record.
    /// Encoded at the barrier, so they describe the state exactly at `next_offset`.
    pub(crate) changelog: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub(crate) outbox: O,
}

/// What every partition task shares.
pub(crate) struct Shared {
    pub(crate) kafka: Arc<KafkaConfig>,
    pub(crate) worker: Arc<WorkerConfig>,
    pub(crate) engine_cfg: Arc<EngineConfig>,
    pub(crate) changelog_topic: String,
    pub(crate) counters: Arc<Counters>,
}

/// A running partition task, as the coordinator sees it.
pub(crate) struct Handle {
    /// Unbounded, so that handing over a chunk or a barrier never makes the coordinator wait
    /// (it must keep polling the consumer). What is in flight is bounded by the batch size
    /// instead: the coordinator pauses the input when a batch is full.
    pub(crate) tx: mpsc::UnboundedSender<Cmd>,
    pub(crate) join: tokio::task::JoinHandle<()>,
    /// Messages were forwarded since the last barrier.
    pub(crate) dirty: bool,
    /// The next chunk, filled by the coordinator.
    pub(crate) staged: Vec<Raw>,
    status: Arc<Status>,
}

/// What the coordinator can read of a task without asking it.
struct Status {
    /// `RESTORING`, `RESTORED` or `FAILED`.
    restore: AtomicU8,
    open_runs: AtomicUsize,
}

const RESTORING: u8 = 0;
const RESTORED: u8 = 1;
const FAILED: u8 = 2;

impl Default for Status {
    fn default() -> Self {
        Self {
            restore: AtomicU8::new(RESTORING),
            open_runs: AtomicUsize::new(0),
        }
    }
}

impl Handle {
    /// Start the task; it restores the partition's state at once, with `restore` (reading the
    /// changelog partition: blocking, so it runs on a blocking thread).
    pub fn spawn<E: TaskSink>(
        sh: Arc<Shared>,
        partition: i32,
        emitter: E,
        restore: impl FnOnce() -> Result<Restored, SourceError> + Send + 'static,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let status = Arc::new(Status::default());
        let join = tokio::spawn(run(sh, partition, emitter, restore, rx, status.clone()));
        Self {
            tx,
            join,
            dirty: false,
            staged: Vec::new(),
            status,
        }
    }

    /// Its state is restored and it applies messages.
    pub(crate) fn restored(&self) -> bool {
        self.status.restore.load(Ordering::Relaxed) == RESTORED
    }

    /// The restore failed: the error waits for the next barrier.
    pub(crate) fn failed(&self) -> bool {
        self.status.restore.load(Ordering::Relaxed) == FAILED
    }

    /// Open runs as of the last chunk applied.
    pub(crate) fn open_runs(&self) -> usize {
        self.status.open_runs.load(Ordering::Relaxed)
    }
}

impl Drop for Handle {
    /// A partition removed (revoked, lost, rewound) stops at once: whatever it still queued
    /// belongs to the next owner.
    fn drop(&mut self) {
        self.join.abort();
    }
}

struct Task<E> {
    sh: Arc<Shared>,
    partition: i32,
    engine: PartitionEngine,
    emitter: E,
    batch: Batch,
    outs: Vec<OutputEvent>,
    /// Next offset to commit (one past the last message applied).
    next_offset: Option<i64>,
    /// Messages below this offset are already reflected in the restored state.
    skip_below: i64,
    /// Restored runs whose changelog record is newer than the meta record: their events below
    /// the given offset are already in their state (see `source::restore::Restored::run_offsets`).
    run_offsets: HashMap<RunKey, i64>,
    run_offsets_max: i64,
}

async fn run<E: TaskSink>(
    sh: Arc<Shared>,
    partition: i32,
    emitter: E,
    restore: impl FnOnce() -> Result<Restored, SourceError> + Send + 'static,
    mut rx: mpsc::UnboundedReceiver<Cmd>,
    status: Arc<Status>,
) {
    // Restore before the first message; messages wait in the queue meanwhile.
    let mut task = match Task::restore(sh, partition, emitter, restore).await {
        Ok(t) => {
            status
                .open_runs
                .store(t.engine.open_runs(), Ordering::Relaxed);
            status.restore.store(RESTORED, Ordering::Relaxed);
            t
        }
        Err(e) => {
            status.restore.store(FAILED, Ordering::Relaxed);
            // Reported at the next barrier, which ends the worker. Only a barrier takes the
            // error: messages queued before it must not consume it, or the barrier's reply is
            // dropped and the worker ends with "task stopped unexpectedly" instead of the cause.
            let mut err = Some(e);
            while let Some(cmd) = rx.recv().await {
                if let Cmd::Barrier(reply) = cmd {
                    if let Some(e) = err.take() {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            return;
        }
    };
    let mut failed: Option<WorkerError> = None;
    while let Some(cmd) = rx.recv().await {
        match cmd {
            Cmd::Msgs(chunk) if failed.is_none() => {
                if let Err(e) = task.apply_chunk(chunk) {
                    failed = Some(e);
                }
                status
                    .open_runs
                    .store(task.engine.open_runs(), Ordering::Relaxed);
            }
            Cmd::Msgs(_) => {}
            Cmd::Barrier(reply) => {
                let epoch = match failed.take() {
                    Some(e) => Err(e),
                    None => Ok(task.epoch()),
                };
                let _ = reply.send(epoch);
            }
        }
    }
}

impl<E: TaskSink> Task<E> {
    async fn restore(
        sh: Arc<Shared>,
        partition: i32,
        emitter: E,
        restore: impl FnOnce() -> Result<Restored, SourceError> + Send + 'static,
    ) -> Result<Self, WorkerError> {
        let restored = tokio::task::spawn_blocking(restore).await??;
        metrics::histogram!("eddy_state_restore_seconds").record(restored.elapsed.as_secs_f64());
        tracing::info!(
            partition,
            open_runs = restored.runs.len(),
            ended_runs = restored.ended.len(),
            records = restored.records,
            applied_offset = ?restored.applied_offset,
            ms = restored.elapsed.as_millis() as u64,
            "state restored from changelog"
        );
        let mut engine = PartitionEngine::new(sh.engine_cfg.clone()).with_rollups();
        engine.restore(restored.meta, restored.runs, restored.ended);
        Ok(Self {
            sh,
            partition,
            engine,
            emitter,
            batch: Batch::default(),
            outs: Vec::new(),
            next_offset: None,
            skip_below: restored.applied_offset.unwrap_or(0),
            run_offsets_max: restored.run_offsets.values().copied().max().unwrap_or(0),
            run_offsets: restored.run_offsets,
        })
    }

    fn apply_chunk(&mut self, chunk: Vec<Raw>) -> Result<(), WorkerError> {
        // Wall clock only feeds metrics; the engine never sees it. Read once per chunk.
        let now_ms = wall_ms();
        let mut newest_ts = None;
        let mut applied = 0;
        for m in chunk {
            if self.apply(m, now_ms, &mut newest_ts)? {
                applied += 1;
            }
        }
        add(&self.sh.counters.events, applied);
        metrics::counter!("eddy_events_consumed_total").increment(applied);
        // Sampled per chunk: the age of the newest event says how far behind we are.
        if let Some(ts) = newest_ts {
            metrics::histogram!("eddy_event_age_seconds")
                .record((now_ms - ts).max(0) as f64 / 1000.0);
        }
        Ok(())
    }

    /// Apply one message (an event, or a dead letter); false if the restored state already had
    /// it. `event_ts` gets the time of a decoded event.
    fn apply(
        &mut self,
        m: Raw,
        now_ms: i64,
        event_ts: &mut Option<i64>,
    ) -> Result<bool, WorkerError> {
        let topics = &self.sh.kafka.topics;
        let counters = &*self.sh.counters;
        let offset = m.offset;
        if offset < self.skip_below {
            bump(&counters.skipped_restored);
            // The last message the restored state already covers: commit up to it (the meta
            // record then written says what the restored one said), so a partition whose
            // previous owner could not commit does not keep that lag until its next message.
            if offset + 1 == self.skip_below {
                self.next_offset = Some(self.skip_below);
            }
            return Ok(false);
        }
        let src = Origin {
            partition: self.partition,
            offset,
        };
        match decode_bounded(m.payload.as_deref(), self.sh.worker.max_message_bytes) {
            Ok(ev) => {
                check_key(m.key.as_deref(), ev.key());
                *event_ts = Some(ev.ts_ms());
                // Already in this run's restored state (its changelog record is newer than the
                // partition's meta record after a crash mid-flush): only time moves. Its rows
                // and outputs were made durable before that record was written.
                let covered = self.run_offsets.get(ev.key()).is_some_and(|o| offset < *o);
                if !self.run_offsets.is_empty() && offset >= self.run_offsets_max {
                    self.run_offsets.clear();
                }
                let outcome = if covered {
                    bump(&counters.skipped_restored);
                    self.engine.observe_time_only(&ev, &mut self.outs);
                    Outcome::AfterEnd
                } else {
                    self.engine.apply(&ev, &mut self.outs)
                };
                if matches!(outcome, Outcome::Redelivery(_)) {
                    metrics::counter!("eddy_redeliveries_total").increment(1);
                }
                if let (Event::Step(step), Outcome::Step(fps)) = (&ev, &outcome) {
                    self.batch.steps.push(StepRow::new(step, fps, src));
                }
                for o in self.outs.drain(..) {
                    self.emitter.send_output(&topics.output, &o)?;
                    record_output(&o, now_ms - ev.ts_ms());
                    push_output(&mut self.batch, &o, src);
                    bump(&counters.outputs);
                }
                self.batch
                    .rollups
                    .extend(self.engine.take_rollups().map(|c| RollupRow::new(&c, src)));
            }
            Err(e) => {
                bump(&counters.dead_letters);
                metrics::counter!("eddy_dead_letters_total", "reason" => e.reason()).increment(1);
                let detail = e.to_string();
                self.emitter.send_dead_letter(
                    &topics.dlq,
                    &DeadLetter {
                        payload: m.payload.as_deref(),
                        key: m.key.as_deref(),
                        reason: e.reason(),
                        detail: &detail,
                        topic: &topics.input,
                        partition: self.partition,
                        offset,
                    },
                )?;
            }
        }
        self.next_offset = Some(offset + 1);
        Ok(true)
    }

    fn epoch(&mut self) -> Epoch {
        let next_offset = self.next_offset.take();
        let mut changelog = Vec::new();
        if let Some(next) = next_offset {
            changelog.extend(
                self.engine
                    .take_changes()
                    .iter()
                    .map(|c| changelog::encode(c, next)),
            );
            changelog.push((
                changelog::META_KEY.to_vec(),
                Some(changelog::encode_meta(next, self.engine.meta())),
            ));
        }
        Epoch {
            partition: self.partition,
            next_offset,
            batch: std::mem::take(&mut self.batch),
            changelog,
            outbox: self.emitter.take_outbox(),
        }
    }
}

fn record_output(o: &OutputEvent, age_ms: i64) {
    match o {
        OutputEvent::LoopDetected(sig) => {
            metrics::counter!("eddy_signals_total", "detector" => sig.detector.clone(), "severity" => sig.severity.as_str()).increment(1);
            metrics::histogram!("eddy_detection_latency_seconds")
                .record(age_ms.max(0) as f64 / 1000.0);
        }
        OutputEvent::LoopWarning(sig) => {
            metrics::counter!("eddy_signals_total", "detector" => sig.detector.clone(), "severity" => sig.severity.as_str()).increment(1);
        }
        OutputEvent::RunTerminated(t) => {
            metrics::counter!("eddy_runs_terminated_total", "loop_detected" => if t.loop_detected { "true" } else { "false" }).increment(1);
        }
    }
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
