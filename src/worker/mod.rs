//! The worker: consume → decode → engine → emit + sink → commit.
//!
//! The commit rule: an input offset is committed only after (1) ClickHouse acknowledged every
//! row derived from the messages before it, (2) the broker acknowledged every output event and
//! dead letter they caused, and (3) the changelog holds the run state covering them. See
//! DESIGN.md for the invariants and what each failure does.
use crate::admin::{self, Health};
use crate::config::Config;
use crate::contract::input::decode_bounded;
use crate::contract::{Event, RunKey};
use crate::emit::{DeadLetter, EmitError, Emitter};
use crate::engine::{Outcome, PartitionEngine};
use crate::sink::rows::{push_output, RollupRow, Source};
use crate::sink::{Batch, ClickHouseSink, SinkError, StepRow};
use crate::source::changelog;
use crate::source::{self, SourceError};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
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
    #[error("changelog restore task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
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

/// Everything one input partition owns.
struct PartitionTask {
    engine: PartitionEngine,
    /// Next offset to commit (one past the last message applied).
    next_offset: Option<i64>,
    /// Messages below this offset are already reflected in the restored state.
    skip_below: i64,
    /// Restored runs whose changelog record is newer than the meta record: their events below
    /// the given offset are already in their state (see `changelog::Restored::run_offsets`).
    run_offsets: HashMap<crate::contract::RunKey, i64>,
    run_offsets_max: i64,
}

#[derive(Default)]
struct Counters {
    events: u64,
    dead_letters: u64,
    outputs: u64,
    skipped_restored: u64,
    flushes: u64,
    rewinds: u64,
}

pub async fn run(cfg: Config, shutdown: CancellationToken) -> Result<(), WorkerError> {
    let health = Arc::new(Health::default());
    admin::serve(&cfg.admin_addr, health.clone()).await?;
    source::ensure_topics(&cfg).await?;
    let sink = ClickHouseSink::connect(&cfg).await?;
    let version = sink.version().await?;
    let applied = sink.migrate().await?;
    tracing::info!(clickhouse = %version, migrations = ?applied, "ClickHouse ready");
    let (consumer, assignment) = source::consumer(&cfg)?;
    let mut emitter = Emitter::new(&cfg)?;
    let engine_cfg = Arc::new(cfg.engine.clone());
    let changelog_topic = cfg.changelog_topic();
    let mut parts: HashMap<i32, PartitionTask> = HashMap::new();
    let mut batch = Batch::default();
    let mut batch_msgs = 0usize;
    let mut deadline: Option<tokio::time::Instant> = None;
    let mut counters = Counters::default();
    let mut outs = Vec::new();
    let mut last_progress = Instant::now();
    let progress_every = Duration::from_secs(cfg.progress_interval_s.max(1));
    let flusher = Flusher {
        cfg: &cfg,
        sink: &sink,
        consumer: &consumer,
        changelog_topic: &changelog_topic,
        health: &health,
    };
    // Declared after the consumer, so dropped before it: closing the consumer revokes
    // everything, and nothing would be left to drain those revokes.
    let _defer = DeferRevokes::on(&assignment);
    let drain_for = Duration::from_millis(cfg.revoke_drain_ms);
    let wake = assignment
        .lock()
        .map(|a| a.wake.clone())
        .unwrap_or_default();
    tracing::info!(topic = %cfg.input_topic, group = %cfg.group_id, "consuming");
    health.set_clickhouse_ok(true);
    health.set_consuming(true);

    loop {
        let timeout =
            deadline.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(1));
        let msg = tokio::select! {
            _ = shutdown.cancelled() => {
                health.set_draining();
                break;
            }
            _ = tokio::time::sleep_until(timeout) => None,
            _ = wake.notified() => None,
            m = consumer.recv() => Some(m),
        };
        // Partitions revoked since the last message: their uncommitted work is dropped; the
        // next owner restores from the changelog and resumes from the committed offset.
        let revoked: Vec<i32> = match assignment.lock() {
            Ok(mut a) => std::mem::take(&mut a.revoked),
            Err(_) => Vec::new(),
        };
        for p in revoked {
            parts.remove(&p);
            metrics::counter!("eddy_partitions_revoked_total").increment(1);
        }
        // A cooperative revoke waits for us: make what was done for those partitions durable
        // and committed, so their next owner starts exactly there, then hand them back.
        let draining = assignment.lock().ok().and_then(|mut a| a.draining.take());
        if let Some(tpl) = draining {
            if batch_msgs > 0 {
                let drained = tokio::time::timeout(
                    drain_for,
                    flush(&flusher, &mut emitter, &mut parts, &mut batch, &shutdown),
                )
                .await;
                match drained {
                    Ok(Ok(())) => counters.flushes += 1,
                    Ok(Err(WorkerError::Emit(e @ EmitError::Abortable(_)))) => {
                        tracing::warn!(error = %e, "rewinding to the last commit");
                        rewind(&mut emitter, &consumer, &mut parts, &mut batch)?;
                        counters.rewinds += 1;
                    }
                    Ok(Err(e)) => return Err(e),
                    Err(_) => {
                        // A half-done flush leaves deliveries untracked: start over from the
                        // last commit rather than commit past anything unacknowledged.
                        tracing::warn!(
                            revoke_drain_ms = cfg.revoke_drain_ms,
                            "revoked partitions not drained in time; their next owner redoes the \
                             uncommitted batch"
                        );
                        rewind(&mut emitter, &consumer, &mut parts, &mut batch)?;
                        counters.rewinds += 1;
                    }
                }
                batch_msgs = 0;
                deadline = None;
            }
            for e in tpl.elements_for_topic(&cfg.input_topic) {
                parts.remove(&e.partition());
                metrics::counter!("eddy_partitions_revoked_total").increment(1);
            }
            if let Err(e) = consumer.incremental_unassign(&tpl) {
                tracing::warn!(error = %e, "handing back revoked partitions failed");
            }
        }
        if let Some(m) = msg {
            let m = match m {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(error = %e, "consumer error (librdkafka retries)");
                    continue;
                }
            };
            let p = m.partition();
            let owned = assignment
                .lock()
                .map(|a| a.assigned.contains(&p))
                .unwrap_or(false);
            if !owned {
                continue;
            }
            if let std::collections::hash_map::Entry::Vacant(slot) = parts.entry(p) {
                let props = cfg.kafka_client_props();
                let topic = changelog_topic.clone();
                let restored =
                    tokio::task::spawn_blocking(move || changelog::restore_with(&props, &topic, p))
                        .await??;
                metrics::histogram!("eddy_state_restore_seconds")
                    .record(restored.elapsed.as_secs_f64());
                tracing::info!(
                    partition = p,
                    open_runs = restored.runs.len(),
                    ended_runs = restored.ended.len(),
                    records = restored.records,
                    applied_offset = ?restored.applied_offset,
                    ms = restored.elapsed.as_millis() as u64,
                    "state restored from changelog"
                );
                let mut engine = PartitionEngine::new(engine_cfg.clone()).with_rollups();
                engine.restore(restored.meta, restored.runs, restored.ended);
                slot.insert(PartitionTask {
                    engine,
                    next_offset: None,
                    skip_below: restored.applied_offset.unwrap_or(0),
                    run_offsets_max: restored.run_offsets.values().copied().max().unwrap_or(0),
                    run_offsets: restored.run_offsets,
                });
            }
            let Some(task) = parts.get_mut(&p) else {
                continue;
            };
            let offset = m.offset();
            if offset < task.skip_below {
                counters.skipped_restored += 1;
                continue;
            }
            let src = Source {
                partition: p,
                offset,
            };
            counters.events += 1;
            metrics::counter!("eddy_events_consumed_total").increment(1);
            match decode_bounded(m.payload(), cfg.max_message_bytes) {
                Ok(ev) => {
                    check_key(m.key(), ev.key());
                    // Wall clock only feeds metrics; the engine never sees it.
                    let now_ms = wall_ms();
                    metrics::histogram!("eddy_event_age_seconds")
                        .record((now_ms - ev.ts_ms()).max(0) as f64 / 1000.0);
                    // Already in this run's restored state (its changelog record is newer than the
                    // partition's meta record after a crash mid-flush): only time moves. Its rows
                    // and outputs were made durable before that record was written.
                    let covered = task.run_offsets.get(ev.key()).is_some_and(|o| offset < *o);
                    if !task.run_offsets.is_empty() && offset >= task.run_offsets_max {
                        task.run_offsets.clear();
                    }
                    let outcome = if covered {
                        counters.skipped_restored += 1;
                        task.engine.observe_time_only(&ev, &mut outs);
                        Outcome::AfterEnd
                    } else {
                        task.engine.apply(&ev, &mut outs)
                    };
                    if matches!(outcome, Outcome::Redelivery(_)) {
                        metrics::counter!("eddy_redeliveries_total").increment(1);
                    }
                    if let (Event::Step(step), Outcome::Step(fps)) = (&ev, &outcome) {
                        batch.steps.push(StepRow::new(step, fps, src));
                    }
                    for o in outs.drain(..) {
                        emitter.send_output(&cfg.output_topic, &o)?;
                        match &o {
                            crate::contract::OutputEvent::LoopDetected(sig) => {
                                metrics::counter!("eddy_signals_total", "detector" => sig.detector.clone(), "severity" => sig.severity.as_str()).increment(1);
                                metrics::histogram!("eddy_detection_latency_seconds")
                                    .record((now_ms - ev.ts_ms()).max(0) as f64 / 1000.0);
                            }
                            crate::contract::OutputEvent::LoopWarning(sig) => {
                                metrics::counter!("eddy_signals_total", "detector" => sig.detector.clone(), "severity" => sig.severity.as_str()).increment(1);
                            }
                            crate::contract::OutputEvent::RunTerminated(t) => {
                                metrics::counter!("eddy_runs_terminated_total", "loop_detected" => if t.loop_detected { "true" } else { "false" }).increment(1);
                            }
                        }
                        push_output(&mut batch, &o, src);
                        counters.outputs += 1;
                    }
                    batch
                        .rollups
                        .extend(task.engine.take_rollups().map(|c| RollupRow::new(&c, src)));
                }
                Err(e) => {
                    counters.dead_letters += 1;
                    metrics::counter!("eddy_dead_letters_total", "reason" => e.reason())
                        .increment(1);
                    let detail = e.to_string();
                    emitter.send_dead_letter(
                        &cfg.dlq_topic,
                        &DeadLetter {
                            payload: m.payload(),
                            key: m.key(),
                            reason: e.reason(),
                            detail: &detail,
                            topic: m.topic(),
                            partition: p,
                            offset,
                        },
                    )?;
                }
            }
            task.next_offset = Some(offset + 1);
            batch_msgs += 1;
            if deadline.is_none() {
                deadline = Some(
                    tokio::time::Instant::now() + Duration::from_millis(cfg.flush_interval_ms),
                );
            }
        }
        let due = deadline.is_some_and(|d| tokio::time::Instant::now() >= d);
        if batch_msgs >= cfg.batch_max_messages || (due && batch_msgs > 0) {
            let res = flush(&flusher, &mut emitter, &mut parts, &mut batch, &shutdown).await;
            match res {
                Ok(()) => counters.flushes += 1,
                Err(WorkerError::Emit(e @ EmitError::Abortable(_))) => {
                    tracing::warn!(error = %e, "rewinding to the last commit");
                    rewind(&mut emitter, &consumer, &mut parts, &mut batch)?;
                    counters.rewinds += 1;
                }
                Err(e) => return Err(e),
            }
            batch_msgs = 0;
            deadline = None;
        } else if due {
            deadline = None;
        }
        if cfg.progress_interval_s > 0 && last_progress.elapsed() >= progress_every {
            last_progress = Instant::now();
            let open: usize = parts.values().map(|t| t.engine.open_runs()).sum();
            metrics::gauge!("eddy_open_runs").set(open as f64);
            tracing::info!(
                events = counters.events,
                outputs = counters.outputs,
                dead_letters = counters.dead_letters,
                flushes = counters.flushes,
                partitions = parts.len(),
                open_runs = open,
                "progress"
            );
        }
    }
    if batch_msgs > 0 {
        // Graceful shutdown: make the last batch durable and commit it before leaving.
        let never = CancellationToken::new();
        flush(&flusher, &mut emitter, &mut parts, &mut batch, &never).await?;
    }
    // A revoke that arrived as we stopped: everything is committed now, hand the partitions back.
    if let Some(tpl) = assignment.lock().ok().and_then(|mut a| a.draining.take()) {
        if let Err(e) = consumer.incremental_unassign(&tpl) {
            tracing::warn!(error = %e, "handing back revoked partitions failed");
        }
    }
    tracing::info!(
        events = counters.events,
        outputs = counters.outputs,
        dead_letters = counters.dead_letters,
        skipped_restored = counters.skipped_restored,
        rewinds = counters.rewinds,
        "stopped"
    );
    Ok(())
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
struct Flusher<'a> {
    cfg: &'a Config,
    sink: &'a ClickHouseSink,
    consumer: &'a source::Input,
    changelog_topic: &'a str,
    health: &'a Health,
}

/// One flush cycle, in the order the commit rule needs.
async fn flush(
    f: &Flusher<'_>,
    emitter: &mut Emitter,
    parts: &mut HashMap<i32, PartitionTask>,
    batch: &mut Batch,
    shutdown: &CancellationToken,
) -> Result<(), WorkerError> {
    let Flusher {
        cfg,
        sink,
        consumer,
        changelog_topic,
        health,
    } = *f;
    let started = Instant::now();
    let rows = [
        ("steps", batch.steps.len()),
        ("signals", batch.signals.len()),
        ("runs", batch.runs.len()),
        ("rollup_minute", batch.rollups.len()),
    ];
    // 1. ClickHouse: retried with capped, jittered back-off; a transient outage only grows lag.
    let mut delay = Duration::from_millis(200);
    loop {
        let t = Instant::now();
        match sink.insert(batch).await {
            Ok(()) => {
                health.set_clickhouse_ok(true);
                metrics::histogram!("eddy_clickhouse_insert_seconds")
                    .record(t.elapsed().as_secs_f64());
                for (table, n) in rows {
                    metrics::counter!("eddy_clickhouse_rows_total", "table" => table)
                        .increment(n as u64);
                }
                break;
            }
            Err(e) if !shutdown.is_cancelled() => {
                health.set_clickhouse_ok(false);
                metrics::counter!("eddy_clickhouse_insert_errors_total").increment(1);
                tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "ClickHouse insert failed; retrying");
                let jitter = rand::random::<u64>() % (delay.as_millis() as u64 / 2 + 1);
                tokio::time::sleep(delay + Duration::from_millis(jitter)).await;
                delay = (delay * 2).min(Duration::from_secs(10));
            }
            Err(e) => return Err(e.into()),
        }
    }
    batch.clear();
    // 2. Changelog: one record per changed run, then the partition's meta record last.
    let mut tpl = TopicPartitionList::new();
    for (p, task) in parts.iter_mut() {
        let Some(next) = task.next_offset else {
            continue;
        };
        for change in task.engine.take_changes() {
            let (key, value) = changelog::encode(&change, next);
            emitter.send_changelog(changelog_topic, *p, &key, value.as_deref())?;
        }
        let meta = changelog::encode_meta(next, task.engine.meta());
        emitter.send_changelog(changelog_topic, *p, changelog::META_KEY, Some(&meta))?;
        tpl.add_partition_offset(&cfg.input_topic, *p, Offset::Offset(next))
            .map_err(WorkerError::Commit)?;
        task.next_offset = None;
    }
    if emitter.is_transactional() {
        // 3+4. Outputs, dead letters, changelog and offsets commit atomically (KIP-447).
        emitter.commit_transaction(&tpl, consumer)?;
        metrics::counter!("eddy_commits_total", "result" => "transaction").increment(1);
        metrics::histogram!("eddy_flush_seconds").record(started.elapsed().as_secs_f64());
        return Ok(());
    }
    // 3. Output events, dead letters and changelog acknowledged by the broker.
    emitter.flush().await?;
    // 4. Only now the offsets. A commit refused because the group is rebalancing (illegal
    // generation, unknown member, rebalance in progress) loses nothing: everything below these
    // offsets is already durable, the changelog says where the state stands, and whoever owns
    // the partition next re-reads at most this batch. So it is logged, never fatal.
    if tpl.count() > 0 {
        match tokio::task::block_in_place(|| consumer.commit(&tpl, CommitMode::Sync)) {
            Ok(()) => metrics::counter!("eddy_commits_total", "result" => "ok").increment(1),
            Err(e) => {
                metrics::counter!("eddy_commits_total", "result" => "refused").increment(1);
                tracing::warn!(error = %e, "offset commit refused; the next commit or owner covers it");
            }
        }
    }
    metrics::histogram!("eddy_flush_seconds").record(started.elapsed().as_secs_f64());
    Ok(())
}

/// Exactly-once: throw away everything since the last commit and read it again. State comes back
/// from the changelog (read_committed, so it matches the committed offsets exactly).
fn rewind(
    emitter: &mut Emitter,
    consumer: &source::Input,
    parts: &mut HashMap<i32, PartitionTask>,
    batch: &mut Batch,
) -> Result<(), WorkerError> {
    emitter.abort_transaction()?;
    batch.clear();
    parts.clear();
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
