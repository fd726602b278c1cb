//! The worker: a coordinator that owns the group membership and the flush cycle, and one task
//! per assigned partition that decodes, runs the engine and builds rows (`partition`).
//!
//! The commit rule: an input offset is committed only after (1) ClickHouse acknowledged every
//! row derived from the messages before it, (2) the broker acknowledged every output event and
//! dead letter they caused, and (3) the changelog holds the run state covering them. See
//! DESIGN.md for the invariants and what each failure does.
mod coordinator;
#[cfg(test)]
mod fakes;
mod flush;
mod live;
mod partition;
mod seams;
mod watchdog;

use crate::admin::{self, Health};
use crate::config::{ClickHouseConfig, KafkaConfig, WorkerConfig};
use crate::contract::RunKey;
use crate::emit::{EmitError, Producer};
use crate::engine::EngineConfig;
use crate::sink::{ClickHouseSink, SinkError};
use crate::source::{self, SourceError};
use coordinator::{lock, Coordinator, STAGE_MAX};
use futures::FutureExt;
use partition::Counters;
use rdkafka::consumer::Consumer;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Why the worker stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The consumer or changelog failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The producer failed.
    #[error(transparent)]
    Emit(#[from] EmitError),
    /// ClickHouse failed.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// Offsets could not be committed.
    #[error("offset commit failed: {0}")]
    Commit(#[source] rdkafka::error::KafkaError),
    /// A restore or flush task panicked or was cancelled.
    #[error("changelog restore or flush task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    /// A partition's task ended while the partition was still assigned.
    #[error("the task of input partition {0} stopped unexpectedly")]
    TaskGone(i32),
    /// The admin server failed.
    #[error(transparent)]
    Admin(#[from] admin::AdminError),
    /// A panic while the assignment bookkeeping (or the group view) was held left it unusable.
    #[error(
        "{0}: what it says can no longer be trusted, so the worker stops; its restart rejoins \
         the group and resumes from the last commit"
    )]
    Poisoned(#[from] source::Poisoned),
    #[error(
        "watchdog: {0}. Exiting so that a restart rejoins the consumer group (watchdog_timeout_ms)"
    )]
    /// The watchdog found the worker stuck (why).
    Stuck(String),
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

/// `eddy run`. The worker's own section, and those it hands down: Kafka to `source/` and `emit/`,
/// ClickHouse to `sink/`, the engine's to every partition's `PartitionEngine`.
pub async fn serve(
    kafka: KafkaConfig,
    clickhouse: ClickHouseConfig,
    worker: WorkerConfig,
    engine: EngineConfig,
    shutdown: CancellationToken,
) -> Result<(), WorkerError> {
    let health =
        crate::daemon::admin_server(Some(&worker.admin_addr), crate::daemon::Readiness::Managed)
            .await?;
    source::ensure_topics(&kafka).await?;
    let sink = clickhouse_ready(&clickhouse, &worker).await?;
    let mut w = assemble(kafka, worker, engine, sink, health.clone())?;
    // Declared after the consumer, so dropped before it: closing the consumer revokes
    // everything, and nothing would be left to drain those revokes.
    let _defer = DeferRevokes::on(&w.assignment)?;
    let stuck = consume(&mut w, &health, &shutdown).await?;
    finish(&mut w, stuck).await
}

/// The sink, once ClickHouse answered and holds eddy's tables (migrated here or by
/// `eddy migrate`).
async fn clickhouse_ready(
    clickhouse: &ClickHouseConfig,
    worker: &WorkerConfig,
) -> Result<ClickHouseSink, WorkerError> {
    let sink = ClickHouseSink::connect(clickhouse).await?;
    let version = sink.version().await?;
    if worker.migrate_on_start {
        let applied = sink.migrate().await?;
        tracing::info!(clickhouse = %version, migrations = ?applied, "ClickHouse ready");
    } else {
        sink.check_migrated().await?;
        tracing::info!(clickhouse = %version, "ClickHouse ready (migrations left to `eddy migrate`)");
    }
    Ok(sink)
}

/// A worker put together: the coordinator over the group consumer, and what its loop and its
/// end need besides.
struct Running {
    co: Coordinator,
    consumer: Arc<source::Input>,
    assignment: Arc<std::sync::Mutex<source::Assignment>>,
    counters: Arc<Counters>,
    kafka: Arc<KafkaConfig>,
    worker: Arc<WorkerConfig>,
}

/// The consumer, the producer, what every partition task shares, and the coordinator.
fn assemble(
    kafka: KafkaConfig,
    worker: WorkerConfig,
    engine: EngineConfig,
    sink: ClickHouseSink,
    health: Arc<Health>,
) -> Result<Running, WorkerError> {
    let (consumer, assignment) = source::consumer(&kafka)?;
    let consumer = Arc::new(consumer);
    let emitter = Producer::new(&kafka)?;
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
    let ctx = consumer.context().clone();
    let live = live::Live::new(
        Flusher {
            kafka: kafka.clone(),
            worker: worker.clone(),
            sink,
            consumer: consumer.clone(),
            emitter: Arc::new(tokio::sync::Mutex::new(emitter)),
            changelog_topic,
            health,
        },
        shared,
        forker,
    );
    let co = Coordinator::new(
        consumer.clone(),
        Arc::new(live),
        kafka.clone(),
        worker.clone(),
        assignment.clone(),
        ctx.group.clone(),
    );
    Ok(Running {
        co,
        consumer,
        assignment,
        counters,
        kafka,
        worker,
    })
}

/// The worker's loop, until shutdown or its watchdog gives up (then why).
async fn consume(
    w: &mut Running,
    health: &Health,
    shutdown: &CancellationToken,
) -> Result<Option<String>, WorkerError> {
    let Running {
        co,
        consumer,
        assignment,
        counters,
        kafka,
        worker,
    } = w;
    let mut last_progress = Instant::now();
    let mut last_watch = Instant::now();
    let progress_every = Duration::from_secs(worker.progress_interval_s.max(1));
    let wake = lock(assignment)?.wake.clone();
    tracing::info!(topic = %kafka.topics.input, group = %kafka.group_id, "consuming");
    health.set_clickhouse_ok(true);
    health.set_member(false);
    health.set_consuming(true);

    loop {
        // A due batch waits for the flush in flight (its completion wakes the loop), so the
        // timer only counts while no flush runs.
        let timeout = match co.deadline {
            Some(d) if co.inflight.is_none() => d,
            _ => tokio::time::Instant::now() + Duration::from_secs(1),
        };
        // The consumer is polled in every round, whatever else waits: rebalances, commit
        // answers and librdkafka's own log lines are served from its poll.
        let msg = tokio::select! {
            _ = shutdown.cancelled() => {
                health.set_draining();
                return Ok(None);
            }
            r = co.finished() => {
                r?;
                None
            }
            _ = tokio::time::sleep_until(timeout) => None,
            _ = wake.notified() => None,
            m = consumer.recv() => Some(m),
        };
        // Partitions lost since the last message, and a cooperative revoke waiting for us to
        // make what was done for its partitions durable and committed before handing them back.
        co.rebalanced()?;
        match msg {
            Some(Ok(m)) => {
                co.stage(&m)?;
                // Take whatever else librdkafka already holds, without waiting: tasks get
                // chunks, not single messages, which keeps wake-ups and timers off the per-event
                // path.
                while co.staged < STAGE_MAX && !co.must_hold() {
                    match consumer.recv().now_or_never() {
                        Some(Ok(m)) => co.stage(&m)?,
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "consumer error (librdkafka retries)")
                        }
                        None => break,
                    }
                }
                co.dispatch()?;
            }
            Some(Err(e)) => tracing::warn!(error = %e, "consumer error (librdkafka retries)"),
            None => {}
        }
        co.spawn_assigned()?;
        health.set_member(co.member()?);
        health.set_restoring(co.restoring().await?);
        co.tend(shutdown)?;
        if last_watch.elapsed() >= Duration::from_secs(1) {
            last_watch = Instant::now();
            // Waiting on purpose: input held back, or ClickHouse not answering a flush.
            let holding = co.paused || health.ready().is_err_and(|_| co.inflight.is_some());
            if let Some(why) = co.watch(holding)? {
                tracing::error!(
                    why,
                    "watchdog: this worker is stuck; exiting so that a restart rejoins the group"
                );
                health.set_stuck(why.clone());
                health.set_draining();
                metrics::counter!("eddy_watchdog_exits_total").increment(1);
                return Ok(Some(why));
            }
        }
        if worker.progress_interval_s > 0 && last_progress.elapsed() >= progress_every {
            last_progress = Instant::now();
            co.progress(counters)?;
        }
    }
}

/// Graceful shutdown: make everything durable and commit it before leaving (unless a rewind is
/// under way: then nothing since the last commit is kept). A signal's grace period bounds this;
/// so does the same period after the watchdog gave up.
async fn finish(w: &mut Running, stuck: Option<String>) -> Result<(), WorkerError> {
    let co = &mut w.co;
    if co.rewinding.is_none() {
        let grace = Duration::from_millis(w.worker.shutdown_grace_ms);
        let stop = CancellationToken::new();
        match tokio::time::timeout(grace, co.flush_all(&stop)).await {
            Ok(r) => r?,
            Err(_) => tracing::error!("final flush not done within shutdown_grace_ms"),
        }
    }
    // A revoke that arrived as we stopped: everything is committed now, hand the partitions back.
    co.rebalanced()?;
    co.hand_back_on_exit()?;
    co.tasks.clear();
    let counters = &w.counters;
    tracing::info!(
        events = Counters::get(&counters.events),
        outputs = Counters::get(&counters.outputs),
        dead_letters = Counters::get(&counters.dead_letters),
        skipped_restored = Counters::get(&counters.skipped_restored),
        rewinds = co.counts.rewinds,
        "stopped"
    );
    match stuck {
        Some(why) => Err(WorkerError::Stuck(why)),
        None => Ok(()),
    }
}

/// Revokes wait for the worker loop while it runs (see `source::Assignment::draining`).
struct DeferRevokes(Arc<std::sync::Mutex<source::Assignment>>);

impl DeferRevokes {
    fn on(a: &Arc<std::sync::Mutex<source::Assignment>>) -> Result<Self, WorkerError> {
        lock(a)?.defer_revokes = true;
        Ok(Self(a.clone()))
    }
}

impl Drop for DeferRevokes {
    fn drop(&mut self) {
        // A poisoned bookkeeping leaves nothing to switch off: the rebalance callback then
        // defers nothing (it answers every rebalance at once), and the worker is already
        // failing with that error.
        if let Ok(mut st) = lock(&self.0) {
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
    emitter: Arc<tokio::sync::Mutex<Producer>>,
    changelog_topic: Arc<str>,
    health: Arc<Health>,
}

impl Flusher {
    /// One flush cycle on the real ClickHouse and Kafka (see `flush`). Returns the offsets it
    /// made durable but could not commit (the group refused them), to carry into the next.
    async fn flush(
        &self,
        epochs: Vec<partition::Epoch>,
        carry: Vec<(i32, i64)>,
        shutdown: &CancellationToken,
    ) -> Result<Vec<(i32, i64)>, WorkerError> {
        let mut attempted: Vec<(i32, i64)> = epochs
            .iter()
            .filter_map(|e| e.next_offset.map(|n| (e.partition, n)))
            .collect();
        for c in &carry {
            if !attempted.iter().any(|(p, _)| *p == c.0) {
                attempted.push(*c);
            }
        }
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
            timeout: Duration::from_millis(self.worker.flush_timeout_ms),
            carry: &carry,
        };
        match flush::flush(io, epochs, shutdown).await? {
            flush::Committed::Refused => Ok(attempted),
            flush::Committed::Offsets | flush::Committed::Transaction => Ok(Vec::new()),
        }
    }
}
