//! The worker: a coordinator that owns the group membership and the flush cycle, and one task
//! per assigned partition that decodes, runs the engine and builds rows (`partition`).
//!
//! The commit rule: an input offset is committed only after (1) ClickHouse acknowledged every
//! row derived from the messages before it, (2) the broker acknowledged every output event and
//! dead letter they caused, and (3) the changelog holds the run state covering them. See
//! DESIGN.md for the invariants and what each failure does.
mod flush;
mod partition;
mod seams;

use crate::admin::{self, Health};
use crate::config::{ClickHouseConfig, KafkaConfig, WorkerConfig};
use crate::contract::RunKey;
use crate::emit::{EmitError, Emitter};
use crate::engine::EngineConfig;
use crate::sink::{ClickHouseSink, SinkError};
use crate::source::{self, SourceError};
use futures::FutureExt;
use partition::Counters;
use rdkafka::consumer::Consumer;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinError;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Emit(#[from] EmitError),
    #[error(transparent)]
    Sink(#[from] SinkError),
    #[error("offset commit failed: {0}")]
    Commit(#[source] rdkafka::error::KafkaError),
    #[error("changelog restore or flush task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    #[error("the task of input partition {0} stopped unexpectedly")]
    TaskGone(i32),
    #[error(transparent)]
    Admin(#[from] admin::AdminError),
}

/// A token cancelled on the first SIGINT/SIGTERM. A second signal, or the grace period running
/// out, exits the process at once: a stuck flush must not outlive the orchestrator's patience.
pub fn shutdown_on_signal(grace: Duration) -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let mut signals = Signals::new();
        signals.next().await;
        tracing::info!(
            grace_ms = grace.as_millis() as u64,
            "shutdown requested: flushing and committing"
        );
        t.cancel();
        tokio::select! {
            _ = signals.next() => {
                tracing::warn!("second signal: exiting without a final flush");
                std::process::exit(130);
            }
            _ = tokio::time::sleep(grace) => {
                tracing::error!("shutdown grace period exceeded: exiting without a final commit");
                std::process::exit(1);
            }
        }
    });
    token
}

/// SIGINT or SIGTERM, as a stream of arrivals.
struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Self {
        Self {
            #[cfg(unix)]
            term: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok(),
        }
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        if let Some(term) = self.term.as_mut() {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The message key should be the run id (that is what keeps a run in one partition). A
/// different or missing key is not an error of the event: the run's events still land in one
/// partition as long as the producer keys them consistently. It is counted and logged (at most
/// once a minute), never dead-lettered.
fn check_key(key: Option<&[u8]>, run: &RunKey) {
    static LAST_WARN: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    let kind = match key {
        None => "missing",
        Some(k) if k == run.run_id.as_bytes() => return,
        Some(_) => "mismatch",
    };
    metrics::counter!("eddy_key_mismatch_total", "kind" => kind).increment(1);
    let now = wall_ms();
    let last = LAST_WARN.load(std::sync::atomic::Ordering::Relaxed);
    if now - last >= 60_000
        && LAST_WARN
            .compare_exchange(
                last,
                now,
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
            )
            .is_ok()
    {
        tracing::warn!(
            kind,
            "input message key is not the event's run_id (counted in eddy_key_mismatch_total; \
             events are processed, but a run keyed inconsistently can be split across partitions)"
        );
    }
}

#[derive(Default)]
struct FlushCounters {
    flushes: u64,
    rewinds: u64,
}

/// `eddy run`. The worker's own section, and those it hands down: Kafka to `source/` and `emit/`,
/// ClickHouse to `sink/`, the engine's to every partition's `PartitionEngine`.
pub async fn run(
    kafka: KafkaConfig,
    clickhouse: ClickHouseConfig,
    worker: WorkerConfig,
    engine: EngineConfig,
    shutdown: CancellationToken,
) -> Result<(), WorkerError> {
    let health = Arc::new(Health::default());
    admin::serve(&worker.admin_addr, health.clone()).await?;
    source::ensure_topics(&kafka).await?;
    let sink = ClickHouseSink::connect(&clickhouse).await?;
    let version = sink.version().await?;
    if worker.migrate_on_start {
        let applied = sink.migrate().await?;
        tracing::info!(clickhouse = %version, migrations = ?applied, "ClickHouse ready");
    } else {
        sink.check_migrated().await?;
        tracing::info!(clickhouse = %version, "ClickHouse ready (migrations left to `eddy migrate`)");
    }
    let (consumer, assignment) = source::consumer(&kafka)?;
    let consumer = Arc::new(consumer);
    let emitter = Emitter::new(&kafka)?;
    let forker = emitter.fork();
    let (kafka, worker) = (Arc::new(kafka), Arc::new(worker));
    let changelog_topic: Arc<str> = kafka.changelog_topic().into();
    let counters = Arc::new(partition::Counters::default());
    let shared = Arc::new(partition::Shared {
        kafka: kafka.clone(),
        worker: worker.clone(),
        engine_cfg: Arc::new(engine),
        changelog_topic: changelog_topic.to_string(),
        counters: counters.clone(),
    });
    let mut co = Coordinator {
        flusher: Flusher {
            kafka: kafka.clone(),
            worker: worker.clone(),
            sink,
            consumer: consumer.clone(),
            emitter: Arc::new(tokio::sync::Mutex::new(emitter)),
            changelog_topic,
            health: health.clone(),
        },
        assignment: assignment.clone(),
        shared,
        forker,
        tasks: HashMap::new(),
        open_runs: HashMap::new(),
        inflight: None,
        batch_msgs: 0,
        staged: 0,
        deadline: None,
        counts: FlushCounters::default(),
    };
    let mut last_progress = Instant::now();
    let progress_every = Duration::from_secs(worker.progress_interval_s.max(1));
    // Declared after the consumer, so dropped before it: closing the consumer revokes
    // everything, and nothing would be left to drain those revokes.
    let _defer = DeferRevokes::on(&assignment);
    let wake = assignment
        .lock()
        .map(|a| a.wake.clone())
        .unwrap_or_default();
    tracing::info!(topic = %kafka.topics.input, group = %kafka.group_id, "consuming");
    health.set_clickhouse_ok(true);
    health.set_consuming(true);

    loop {
        // A due batch waits for the flush in flight (its completion wakes the loop), so the
        // timer only counts while no flush runs.
        let timeout = match co.deadline {
            Some(d) if co.inflight.is_none() => d,
            _ => tokio::time::Instant::now() + Duration::from_secs(1),
        };
        // A full batch stops reading until the flush in flight is done: at most two batches are
        // ever buffered, so a slow ClickHouse turns into lag, not memory.
        let full = co.batch_msgs >= worker.batch_max_messages;
        let msg = tokio::select! {
            _ = shutdown.cancelled() => {
                health.set_draining();
                break;
            }
            r = wait(&mut co.inflight) => {
                co.inflight = None;
                co.settle(r).await?;
                None
            }
            _ = tokio::time::sleep_until(timeout) => None,
            _ = wake.notified() => None,
            m = consumer.recv(), if !full => Some(m),
        };
        // Partitions lost since the last message: their uncommitted work is dropped; the next
        // owner restores from the changelog and resumes from the committed offset.
        let lost: Vec<i32> = match assignment.lock() {
            Ok(mut a) => std::mem::take(&mut a.revoked),
            Err(_) => Vec::new(),
        };
        for p in lost {
            co.remove(p);
        }
        // A cooperative revoke waits for us: make what was done for those partitions durable
        // and committed, so their next owner starts exactly there, then hand them back.
        let draining = assignment.lock().ok().and_then(|mut a| a.draining.take());
        if let Some(tpl) = draining {
            co.drain(&tpl, &shutdown).await?;
        }
        match msg {
            Some(Ok(m)) => {
                co.stage(&m);
                // Take whatever else librdkafka already holds, without waiting: tasks get
                // chunks, not single messages, which keeps wake-ups and timers off the per-event
                // path.
                while co.staged < STAGE_MAX && co.batch_msgs < worker.batch_max_messages {
                    match consumer.recv().now_or_never() {
                        Some(Ok(m)) => co.stage(&m),
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "consumer error (librdkafka retries)")
                        }
                        None => break,
                    }
                }
                co.dispatch().await?;
            }
            Some(Err(e)) => tracing::warn!(error = %e, "consumer error (librdkafka retries)"),
            None => {}
        }
        let due = co
            .deadline
            .is_some_and(|d| tokio::time::Instant::now() >= d);
        if co.inflight.is_none() && co.batch_msgs > 0 && (due || full) {
            co.start_flush(&shutdown).await?;
        }
        if worker.progress_interval_s > 0 && last_progress.elapsed() >= progress_every {
            last_progress = Instant::now();
            let open: usize = co.open_runs.values().sum();
            metrics::gauge!("eddy_open_runs").set(open as f64);
            tracing::info!(
                events = Counters::get(&counters.events),
                outputs = Counters::get(&counters.outputs),
                dead_letters = Counters::get(&counters.dead_letters),
                flushes = co.counts.flushes,
                partitions = co.tasks.len(),
                open_runs = open,
                "progress"
            );
        }
    }
    // Graceful shutdown: make everything durable and commit it before leaving.
    if let Some(h) = co.inflight.take() {
        co.check(h.await)?;
    }
    if co.batch_msgs > 0 {
        let epochs = co.barrier().await?;
        co.flusher.flush(epochs, &CancellationToken::new()).await?;
    }
    // A revoke that arrived as we stopped: everything is committed now, hand the partitions back.
    if let Some(tpl) = assignment.lock().ok().and_then(|mut a| a.draining.take()) {
        if let Err(e) = consumer.incremental_unassign(&tpl) {
            tracing::warn!(error = %e, "handing back revoked partitions failed");
        }
    }
    co.tasks.clear();
    tracing::info!(
        events = Counters::get(&counters.events),
        outputs = Counters::get(&counters.outputs),
        dead_letters = Counters::get(&counters.dead_letters),
        skipped_restored = Counters::get(&counters.skipped_restored),
        rewinds = co.counts.rewinds,
        "stopped"
    );
    Ok(())
}

/// Most messages taken from librdkafka in one go before they are handed to the tasks.
const STAGE_MAX: usize = 4096;

type FlushTask = tokio::task::JoinHandle<Result<(), WorkerError>>;

/// The flush in flight, if any; never resolves without one.
async fn wait(inflight: &mut Option<FlushTask>) -> Result<Result<(), WorkerError>, JoinError> {
    match inflight {
        Some(h) => h.await,
        None => std::future::pending().await,
    }
}

/// The consumer loop: it owns the group membership, forwards each message to its partition's
/// task, cuts epochs with barriers and runs one flush at a time, overlapping with consumption.
struct Coordinator {
    flusher: Flusher,
    assignment: Arc<std::sync::Mutex<source::Assignment>>,
    shared: Arc<partition::Shared>,
    /// Forked into each new partition task (same producer).
    forker: Emitter,
    tasks: HashMap<i32, partition::Handle>,
    open_runs: HashMap<i32, usize>,
    inflight: Option<FlushTask>,
    /// Messages forwarded since the last barrier.
    batch_msgs: usize,
    /// Messages staged but not yet handed to their tasks.
    staged: usize,
    deadline: Option<tokio::time::Instant>,
    counts: FlushCounters,
}

impl Coordinator {
    /// Copy a message into its partition's next chunk (if the partition is still ours).
    fn stage(&mut self, m: &BorrowedMessage<'_>) {
        let p = m.partition();
        let owned = self
            .assignment
            .lock()
            .map(|a| a.assigned.contains(&p))
            .unwrap_or(false);
        if !owned {
            return;
        }
        let raw = partition::Raw {
            offset: m.offset(),
            key: m.key().map(<[u8]>::to_vec),
            payload: m.payload().map(<[u8]>::to_vec),
        };
        let task = match self.tasks.entry(p) {
            std::collections::hash_map::Entry::Occupied(t) => t.into_mut(),
            std::collections::hash_map::Entry::Vacant(slot) => slot.insert(
                partition::Handle::spawn(self.shared.clone(), p, self.forker.fork()),
            ),
        };
        task.staged.push(raw);
        self.staged += 1;
        self.batch_msgs += 1;
        if self.deadline.is_none() {
            self.deadline = Some(
                tokio::time::Instant::now()
                    + Duration::from_millis(self.flusher.worker.flush_interval_ms),
            );
        }
    }

    /// Hand every staged chunk to its task (waiting when a task's queue is full).
    async fn dispatch(&mut self) -> Result<(), WorkerError> {
        for (p, task) in self.tasks.iter_mut() {
            if task.staged.is_empty() {
                continue;
            }
            let chunk = std::mem::take(&mut task.staged);
            task.dirty = true;
            task.tx
                .send(partition::Cmd::Msgs(chunk))
                .await
                .map_err(|_| WorkerError::TaskGone(*p))?;
        }
        self.staged = 0;
        Ok(())
    }

    /// Collect every partition's epoch: all messages forwarded so far, and nothing after.
    async fn barrier(&mut self) -> Result<Vec<partition::Epoch>, WorkerError> {
        let mut waits = Vec::new();
        for (p, task) in self.tasks.iter_mut().filter(|(_, t)| t.dirty) {
            let (tx, rx) = tokio::sync::oneshot::channel();
            task.tx
                .send(partition::Cmd::Barrier(tx))
                .await
                .map_err(|_| WorkerError::TaskGone(*p))?;
            task.dirty = false;
            waits.push((*p, rx));
        }
        let mut epochs = Vec::with_capacity(waits.len());
        for (p, rx) in waits {
            let epoch = rx.await.map_err(|_| WorkerError::TaskGone(p))??;
            self.open_runs.insert(p, epoch.open_runs);
            epochs.push(epoch);
        }
        self.batch_msgs = 0;
        self.deadline = None;
        Ok(epochs)
    }

    async fn start_flush(&mut self, shutdown: &CancellationToken) -> Result<(), WorkerError> {
        let epochs = self.barrier().await?;
        let f = self.flusher.clone();
        let shutdown = shutdown.clone();
        self.inflight = Some(tokio::spawn(
            async move { f.flush(epochs, &shutdown).await },
        ));
        Ok(())
    }

    fn check(&mut self, r: Result<Result<(), WorkerError>, JoinError>) -> Result<(), WorkerError> {
        r??;
        self.counts.flushes += 1;
        Ok(())
    }

    /// A finished flush: an abortable transaction error rewinds, anything else fatal ends us.
    async fn settle(
        &mut self,
        r: Result<Result<(), WorkerError>, JoinError>,
    ) -> Result<(), WorkerError> {
        match self.check(r) {
            Err(e) if needs_rewind(&e) => {
                tracing::warn!(error = %e, "rewinding to the last commit");
                self.rewind().await
            }
            other => other,
        }
    }

    /// Flush and commit everything so far (waiting for the flush in flight first).
    async fn flush_all(&mut self, shutdown: &CancellationToken) -> Result<(), WorkerError> {
        if let Some(h) = self.inflight.as_mut() {
            let r = h.await;
            self.inflight = None;
            self.check(r)?;
        }
        if self.batch_msgs > 0 {
            self.start_flush(shutdown).await?;
            if let Some(h) = self.inflight.as_mut() {
                let r = h.await;
                self.inflight = None;
                self.check(r)?;
            }
        }
        Ok(())
    }

    /// A cooperative revoke: flush and commit within `revoke_drain_ms`, then hand back.
    async fn drain(
        &mut self,
        tpl: &TopicPartitionList,
        shutdown: &CancellationToken,
    ) -> Result<(), WorkerError> {
        let drain_ms = self.flusher.worker.revoke_drain_ms;
        let drained =
            tokio::time::timeout(Duration::from_millis(drain_ms), self.flush_all(shutdown)).await;
        match drained {
            Ok(Ok(())) => {}
            Ok(Err(e)) if needs_rewind(&e) => {
                tracing::warn!(error = %e, "rewinding to the last commit");
                self.rewind().await?;
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                // A half-done flush leaves deliveries untracked: start over from the last
                // commit rather than commit past anything unacknowledged.
                tracing::warn!(
                    revoke_drain_ms = drain_ms,
                    "revoked partitions not drained in time; their next owner redoes the \
                     uncommitted batch"
                );
                self.rewind().await?;
            }
        }
        for e in tpl.elements_for_topic(&self.flusher.kafka.topics.input) {
            self.remove(e.partition());
        }
        if let Err(e) = self.flusher.consumer.incremental_unassign(tpl) {
            tracing::warn!(error = %e, "handing back revoked partitions failed");
        }
        Ok(())
    }

    fn remove(&mut self, p: i32) {
        if self.tasks.remove(&p).is_some() {
            metrics::counter!("eddy_partitions_revoked_total").increment(1);
        }
        self.open_runs.remove(&p);
    }

    /// Throw away everything since the last commit and read it again. State comes back from
    /// the changelog (read_committed, so it matches the committed offsets exactly).
    async fn rewind(&mut self) -> Result<(), WorkerError> {
        if let Some(h) = self.inflight.take() {
            h.abort();
        }
        self.tasks.clear();
        self.open_runs.clear();
        self.batch_msgs = 0;
        self.deadline = None;
        self.counts.rewinds += 1;
        // Waits for an aborted flush to let go of the emitter.
        self.flusher.emitter.lock().await.abort_transaction()?;
        let consumer = &self.flusher.consumer;
        let committed = tokio::task::block_in_place(|| consumer.committed(Duration::from_secs(30)))
            .map_err(WorkerError::Commit)?;
        let mut seek = TopicPartitionList::new();
        for e in committed.elements() {
            let off = match e.offset() {
                Offset::Offset(o) => Offset::Offset(o),
                _ => Offset::Beginning,
            };
            seek.add_partition_offset(e.topic(), e.partition(), off)
                .map_err(WorkerError::Commit)?;
        }
        if seek.count() > 0 {
            consumer
                .seek_partitions(seek, Duration::from_secs(30))
                .map_err(WorkerError::Commit)?;
        }
        Ok(())
    }
}

/// Revokes wait for the worker loop while it runs (see `source::Assignment::draining`).
struct DeferRevokes(Arc<std::sync::Mutex<source::Assignment>>);

impl DeferRevokes {
    fn on(a: &Arc<std::sync::Mutex<source::Assignment>>) -> Self {
        if let Ok(mut st) = a.lock() {
            st.defer_revokes = true;
        }
        Self(a.clone())
    }
}

impl Drop for DeferRevokes {
    fn drop(&mut self) {
        if let Ok(mut st) = self.0.lock() {
            st.defer_revokes = false;
        }
    }
}

/// What every flush writes to and commits on.
#[derive(Clone)]
struct Flusher {
    kafka: Arc<KafkaConfig>,
    worker: Arc<WorkerConfig>,
    sink: ClickHouseSink,
    consumer: Arc<source::Input>,
    /// Held for a whole flush; partition tasks send through forks of it.
    emitter: Arc<tokio::sync::Mutex<Emitter>>,
    changelog_topic: Arc<str>,
    health: Arc<Health>,
}

impl Flusher {
    /// One flush cycle on the real ClickHouse and Kafka (see `flush`).
    async fn flush(
        &self,
        epochs: Vec<partition::Epoch>,
        shutdown: &CancellationToken,
    ) -> Result<(), WorkerError> {
        let mut emitter = self.emitter.lock().await;
        let mut kafka = seams::KafkaIo {
            emitter: &mut emitter,
            consumer: &self.consumer,
            changelog_topic: &self.changelog_topic,
        };
        let io = flush::Io {
            rows: &self.sink,
            kafka: &mut kafka,
            input_topic: &self.kafka.topics.input,
            health: &self.health,
            retry: flush::Retry::default(),
        };
        flush::flush(io, epochs, shutdown).await.map(drop)
    }
}

/// Whether a failed flush is survived by going back to the last commit: an abortable
/// transaction error. Anything else ends the worker (its restart resumes from the last commit).
fn needs_rewind(e: &WorkerError) -> bool {
    matches!(e, WorkerError::Emit(EmitError::Abortable(_)))
}
