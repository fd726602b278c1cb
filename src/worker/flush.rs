//! One flush: the commit rule, written against the I/O seams (`super::seams`) so that tests can
//! make any step fail and check what was, and was not, committed.
//!
//! Order: (1) ClickHouse has the rows, (2) the broker acknowledged the outputs and dead letters
//! (at_least_once), (3) the changelog holds the state covering them, (4) the offsets commit.
//! In exactly_once, (2) to (4) are one transaction. A failure anywhere stops the flush before
//! the commit; only a refused or unanswered offset commit in at_least_once is survived
//! (everything below those offsets is durable by then, so the next commit covers it).
//!
//! Every wait has a deadline (`Io::timeout`, the worker's `flush_timeout_ms`): a ClickHouse
//! insert that gets no answer in time is abandoned and tried again (inserts are idempotent),
//! and a Kafka acknowledgement or transaction that misses it fails the flush with a transient
//! error, on which the worker aborts the transaction and redoes the batch from the last commit.
//! A flush never waits on a server without a limit.
use super::partition::Epoch;
use super::seams::{ChangelogSink, OffsetCommitter, OutputSink, RowSink};
use super::WorkerError;
use crate::admin::Health;
use crate::sink::{Batch, SinkError};
use rdkafka::{Offset, TopicPartitionList};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How ClickHouse inserts are retried: capped, jittered, doubling back-off.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retry {
    pub(crate) first: Duration,
    pub(crate) cap: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            first: Duration::from_millis(200),
            cap: Duration::from_secs(10),
        }
    }
}

/// What a flush wrote to, and where it commits offsets.
pub(crate) struct Io<'a, R, K> {
    pub(crate) rows: &'a R,
    pub(crate) kafka: &'a mut K,
    pub(crate) input_topic: &'a str,
    pub(crate) health: &'a Health,
    pub(crate) retry: Retry,
    /// The longest any single wait of the flush may take.
    pub(crate) timeout: Duration,
    /// at_least_once: offsets an earlier flush made durable but could not commit (the group
    /// refused them during a rebalance), committed along with this flush's for partitions it
    /// has none of. Without it a partition that receives nothing more would show that lag
    /// until its next message.
    pub(crate) carry: &'a [(i32, i64)],
}

/// How a flush ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Committed {
    /// Offsets committed (or there were none to commit).
    Offsets,
    /// The group refused the commit (a rebalance in progress) or did not answer it in time:
    /// logged, not fatal.
    Refused,
    /// exactly_once: the transaction committed, offsets included.
    Transaction,
}

/// One flush cycle, in the order the commit rule needs. `shutdown` ends the ClickHouse retries
/// (the process is going; the next owner redoes the batch).
pub(crate) async fn flush<R, K>(
    io: Io<'_, R, K>,
    mut epochs: Vec<Epoch<K::Outbox>>,
    shutdown: &CancellationToken,
) -> Result<Committed, WorkerError>
where
    R: RowSink,
    K: OutputSink + ChangelogSink + OffsetCommitter,
{
    let Io {
        rows: sink,
        kafka,
        input_topic,
        health,
        retry,
        timeout,
        carry,
    } = io;
    let started = Instant::now();
    let batches: Vec<Batch> = epochs
        .iter_mut()
        .map(|e| std::mem::take(&mut e.batch))
        .collect();
    let count = |f: fn(&Batch) -> usize| batches.iter().map(f).sum::<usize>();
    let rows = [
        ("steps", count(|b| b.steps.len())),
        ("signals", count(|b| b.signals.len())),
        ("runs", count(|b| b.runs.len())),
        ("rollup_minute", count(|b| b.rollups.len())),
    ];
    // 1. ClickHouse: retried with capped, jittered back-off; a transient outage only grows lag.
    // An attempt that gets no answer within the deadline (a hung server) counts as failed.
    let mut delay = retry.first;
    loop {
        let t = Instant::now();
        let attempt = match tokio::time::timeout(timeout, sink.insert_all(&batches)).await {
            Ok(r) => r,
            Err(_) => Err(SinkError::Timeout {
                waited_ms: timeout.as_millis() as u64,
            }),
        };
        match attempt {
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
                delay = (delay * 2).min(retry.cap);
            }
            Err(e) => return Err(e.into()),
        }
    }
    drop(batches);
    let inserted = started.elapsed();
    // The tasks' outputs and dead letters: at_least_once sent them when they were detected, and
    // their deliveries are awaited now; exactly_once held them back, and they are sent now, in
    // a transaction that opens only once ClickHouse has the rows (a ClickHouse outage must not
    // outlast the transaction's timeout).
    for e in &mut epochs {
        kafka.absorb(std::mem::take(&mut e.outbox))?;
    }
    // 2. at_least_once: output events and dead letters acknowledged before the changelog says
    // they are done (a restore skips what the changelog covers).
    if !kafka.is_transactional() {
        kafka.outputs_acknowledged(timeout).await?;
    }
    let acked = started.elapsed();
    // 3. Changelog: one record per changed run, then the partition's meta record last.
    let mut tpl = TopicPartitionList::new();
    let mut changelog_bytes = 0usize;
    for e in &epochs {
        let Some(next) = e.next_offset else {
            continue;
        };
        for (key, value) in &e.changelog {
            changelog_bytes += key.len() + value.as_ref().map_or(0, Vec::len);
            kafka.send_changelog(e.partition, key, value.as_deref())?;
        }
        tpl.add_partition_offset(input_topic, e.partition, Offset::Offset(next))
            .map_err(WorkerError::Commit)?;
    }
    if !kafka.is_transactional() {
        let ours: Vec<i32> = tpl.elements().iter().map(|e| e.partition()).collect();
        for (p, next) in carry.iter().filter(|(p, _)| !ours.contains(p)) {
            tpl.add_partition_offset(input_topic, *p, Offset::Offset(*next))
                .map_err(WorkerError::Commit)?;
        }
    }
    if kafka.is_transactional() {
        // 4. Outputs, dead letters, changelog and offsets commit atomically (KIP-447).
        kafka.commit_transaction(&tpl, timeout)?;
        metrics::counter!("eddy_commits_total", "result" => "transaction").increment(1);
        metrics::histogram!("eddy_flush_seconds").record(started.elapsed().as_secs_f64());
        return Ok(Committed::Transaction);
    }
    kafka.changelog_acknowledged(timeout).await?;
    // 4. Only now the offsets. A commit refused because the group is rebalancing (illegal
    // generation, unknown member, rebalance in progress), or not answered in time, loses
    // nothing: everything below these offsets is already durable, the changelog says where the
    // state stands, and whoever owns the partition next re-reads at most this batch. So it is
    // logged, never fatal.
    let mut committed = Committed::Offsets;
    if tpl.count() > 0 {
        match kafka.commit_offsets(&tpl, timeout).await {
            Ok(()) => metrics::counter!("eddy_commits_total", "result" => "ok").increment(1),
            Err(e) => {
                metrics::counter!("eddy_commits_total", "result" => "refused").increment(1);
                tracing::warn!(error = %e, "offset commit refused; the next commit or owner covers it");
                committed = Committed::Refused;
            }
        }
    }
    metrics::histogram!("eddy_flush_seconds").record(started.elapsed().as_secs_f64());
    tracing::debug!(
        rows = ?rows,
        changelog_bytes,
        insert_ms = inserted.as_millis() as u64,
        outputs_acked_ms = acked.as_millis() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        "flushed"
    );
    Ok(committed)
}

#[cfg(test)]
#[path = "flush_tests.rs"]
mod tests;
