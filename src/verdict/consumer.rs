//! The signals consumer: reads the output topic into [`Verdicts`] in the background.
//!
//! It assigns itself every partition instead of joining a group: each reader (every
//! `ingest-http` replica behind a load balancer, every agent process's guard) must see every
//! run's signals, and none commits offsets. Where it starts is a broker timestamp
//! (`offsets_for_times`): `now - lookback`, so a restarted bridge re-reads the verdicts of runs
//! still going, and a guard created with no look-back starts at the end without missing what
//! arrives between its creation and its first fetch. Partitions added to the topic later are
//! picked up from their beginning. librdkafka reconnects by itself across broker restarts.
use super::{VerdictError, Verdicts};
use crate::contract::OutputEvent;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How often the catch-up is checked (and the partitions, until assigned).
const TICK: Duration = Duration::from_millis(500);
/// Expired runs are swept every this many ticks (a pass over the whole table).
const SWEEP_EVERY: u32 = 10;
/// How often the topic's partition count is looked up again.
const REDISCOVER: Duration = Duration::from_secs(30);
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// What to read and how to reach it.
pub(crate) struct Subscription {
    /// Connection and security properties (`KafkaConfig::client_props`, or just
    /// `bootstrap.servers` for an agent).
    pub(crate) props: Vec<(String, String)>,
    pub(crate) topic: String,
    /// Start this far back (broker time); zero starts at the end.
    pub(crate) lookback: Duration,
}

/// Start the consumer task; it runs until `shutdown` is cancelled.
pub(crate) fn spawn(
    subscription: Subscription,
    verdicts: Arc<Verdicts>,
    shutdown: CancellationToken,
) -> Result<JoinHandle<()>, VerdictError> {
    let mut cc = ClientConfig::new();
    for (k, v) in &subscription.props {
        cc.set(k, v);
    }
    // No group membership: the group id only names the client; nothing is committed under it.
    cc.set("group.id", "eddy-verdicts")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        // What the worker committed (in exactly_once): a signal of an aborted transaction comes
        // back with the same id from the replay anyway.
        .set("isolation.level", "read_committed");
    let consumer: StreamConsumer = cc.create().map_err(VerdictError::Create)?;
    // Fixed now, not when the brokers first answer: nothing published after this call is missed.
    let since_ms = now_ms()
        .saturating_sub(i64::try_from(subscription.lookback.as_millis()).unwrap_or(i64::MAX));
    Ok(tokio::spawn(run(
        Arc::new(consumer),
        subscription,
        since_ms,
        verdicts,
        shutdown,
    )))
}

/// Partitions assigned so far, and those still short of the offset they held at start.
#[derive(Default)]
struct Progress {
    assigned: BTreeSet<i32>,
    /// partition → high watermark when assigned; gone once the position reaches it.
    catching_up: BTreeMap<i32, i64>,
}

async fn run(
    consumer: Arc<StreamConsumer>,
    subscription: Subscription,
    since_ms: i64,
    verdicts: Arc<Verdicts>,
    shutdown: CancellationToken,
) {
    let mut progress = Progress::default();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_discovery: Option<std::time::Instant> = None;
    let mut ticks = 0u32;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            m = consumer.recv() => match m {
                Ok(m) => {
                    let at = m.timestamp().to_millis().unwrap_or_else(now_ms);
                    match m.payload().map(serde_json::from_slice::<OutputEvent>) {
                        Some(Ok(event)) => {
                            let applied = verdicts.apply(&event, at);
                            record(&applied, at, verdicts.is_caught_up());
                        }
                        Some(Err(e)) => {
                            metrics::counter!("eddy_verdict_unreadable_total").increment(1);
                            tracing::debug!(error = %e, offset = m.offset(), "signals: unreadable record skipped");
                        }
                        None => {}
                    }
                }
                // Transport errors are retried by librdkafka; they are only worth a log line.
                Err(e) => tracing::warn!(error = %e, topic = %subscription.topic, "signals consumer"),
            },
            _ = tick.tick() => {
                let due = last_discovery.is_none_or(|t| t.elapsed() >= REDISCOVER);
                if due || progress.assigned.is_empty() {
                    last_discovery = Some(std::time::Instant::now());
                    let (c, topic) = (consumer.clone(), subscription.topic.clone());
                    let known = progress.assigned.clone();
                    match tokio::task::spawn_blocking(move || assign_new(&c, &topic, since_ms, &known)).await {
                        Ok(Ok(added)) => {
                            for (p, high) in added {
                                progress.assigned.insert(p);
                                if let Some(h) = high {
                                    progress.catching_up.insert(p, h);
                                }
                            }
                        }
                        Ok(Err(e)) => tracing::warn!(error = %e, "signals consumer: assignment pending"),
                        Err(e) => tracing::warn!(error = %e, "signals consumer: assignment task"),
                    }
                }
                if !progress.assigned.is_empty() && !verdicts.is_caught_up() {
                    check_caught_up(&consumer, &subscription.topic, &mut progress);
                    if progress.catching_up.is_empty() {
                        verdicts.set_caught_up();
                        tracing::info!(topic = %subscription.topic, partitions = progress.assigned.len(), runs = verdicts.table().len(), "signals consumer caught up");
                    }
                }
                ticks = ticks.wrapping_add(1);
                if ticks.is_multiple_of(SWEEP_EVERY) {
                    let mut table = verdicts.table();
                    table.sweep(now_ms());
                    metrics::gauge!("eddy_verdict_runs").set(table.len() as f64);
                }
            }
        }
    }
}

fn record(applied: &super::Applied, at_ms: i64, live: bool) {
    let result = match applied {
        super::Applied::New { .. } => "new",
        super::Applied::Ignored => "ignored",
        super::Applied::Ended { .. } => return,
    };
    metrics::counter!("eddy_verdict_signals_total", "result" => result).increment(1);
    if live && result == "new" {
        let delay = (now_ms() - at_ms).max(0) as f64 / 1000.0;
        metrics::histogram!("eddy_verdict_signal_delay_seconds").record(delay);
    }
}

/// Assign the partitions not assigned yet. The first time, each starts at broker time
/// `since_ms`; later (partitions added to the topic), at their beginning. Returns each new partition with
/// the high watermark to catch up to (none when there is nothing to read back).
fn assign_new(
    c: &StreamConsumer,
    topic: &str,
    since_ms: i64,
    known: &BTreeSet<i32>,
) -> Result<Vec<(i32, Option<i64>)>, VerdictError> {
    let err = |source| VerdictError::Assign {
        topic: topic.to_string(),
        source,
    };
    let md = c
        .fetch_metadata(Some(topic), METADATA_TIMEOUT)
        .map_err(err)?;
    let parts: Vec<i32> = md
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .filter(|p| !known.contains(p))
        .collect();
    if parts.is_empty() {
        return Ok(Vec::new());
    }
    let mut tpl = TopicPartitionList::new();
    if known.is_empty() {
        let mut query = TopicPartitionList::new();
        for p in &parts {
            query
                .add_partition_offset(topic, *p, Offset::Offset(since_ms))
                .map_err(err)?;
        }
        let found = c.offsets_for_times(query, METADATA_TIMEOUT).map_err(err)?;
        for e in found.elements_for_topic(topic) {
            // No record at or after `since`: start at the end.
            let at = match e.offset() {
                Offset::Offset(o) if o >= 0 => Offset::Offset(o),
                _ => Offset::End,
            };
            tpl.add_partition_offset(topic, e.partition(), at)
                .map_err(err)?;
        }
    } else {
        for p in &parts {
            tpl.add_partition_offset(topic, *p, Offset::Beginning)
                .map_err(err)?;
        }
    }
    let mut added = Vec::new();
    for e in tpl.elements_for_topic(topic) {
        let high = match e.offset() {
            Offset::End => None,
            Offset::Offset(start) => {
                let (_, high) = c
                    .fetch_watermarks(topic, e.partition(), METADATA_TIMEOUT)
                    .map_err(err)?;
                (high > start).then_some(high)
            }
            _ => {
                let (low, high) = c
                    .fetch_watermarks(topic, e.partition(), METADATA_TIMEOUT)
                    .map_err(err)?;
                (high > low).then_some(high)
            }
        };
        added.push((e.partition(), high));
    }
    c.incremental_assign(&tpl).map_err(err)?;
    tracing::info!(topic, partitions = ?parts, since_ms, "signals consumer assigned");
    Ok(added)
}

/// Drop from `catching_up` the partitions whose position reached their start-time high mark.
fn check_caught_up(c: &StreamConsumer, topic: &str, progress: &mut Progress) {
    let Ok(pos) = c.position() else { return };
    for e in pos.elements_for_topic(topic) {
        if let (Offset::Offset(at), Some(high)) =
            (e.offset(), progress.catching_up.get(&e.partition()))
        {
            if at >= *high {
                progress.catching_up.remove(&e.partition());
            }
        }
    }
}
