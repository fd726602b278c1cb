//! Reading one partition of a compacted topic from its start to its end: how a state store
//! kept in Kafka (the worker's changelog, fleet-watch's progress) is loaded back.
//!
//! The end is the high watermark when the read starts; with `read_committed` the partition's
//! end-of-partition event also ends it (aborted transactions' records and markers leave gaps
//! below the watermark). While a broker fails over, the partition has no reachable leader for a
//! few seconds: errors are retried (librdkafka finds the new leader) until `patience` passes
//! without progress, as the group consumer does; only then does the read fail.
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};
use std::time::{Duration, Instant};

/// A partition that made no progress for the read's whole patience.
#[derive(Debug, thiserror::Error)]
#[error("{topic}/{partition} could not be read to its end: no progress for {waited:?} ({last})")]
pub struct Stalled {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) waited: Duration,
    /// The last Kafka error, or that nothing arrived.
    pub(crate) last: String,
}

/// Read `topic`/`partition` from its beginning to its end, handing every record to `each`.
/// Blocking: call it from `spawn_blocking`. `props` are the client's properties (brokers and
/// security settings); returns how many records were read.
pub fn read_to_end<E>(
    props: &[(String, String)],
    topic: &str,
    partition: i32,
    patience: Duration,
    mut each: impl FnMut(&BorrowedMessage<'_>) -> Result<(), E>,
) -> Result<u64, E>
where
    E: From<KafkaError> + From<Stalled>,
{
    let mut cc = ClientConfig::new();
    for (k, v) in props {
        cc.set(k, v);
    }
    let c: BaseConsumer<EofIsNotAnError> = cc
        .set("group.id", "eddy-compacted-reader-unused")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        // One partition read as fast as the broker serves it: fetches of up to 32 MiB instead
        // of librdkafka's 1 MiB per partition (a restore of 100,000 runs is ~260 MiB), and,
        // when the prefetch queue is full, the next fetch a moment after it drains instead of
        // librdkafka's full second later (which, a few times over, was most of a restore).
        .set("max.partition.fetch.bytes", "33554432")
        .set("fetch.max.bytes", "67108864")
        .set("fetch.queue.backoff.ms", "5")
        .create_with_context(EofIsNotAnError)?;
    let mut waiting = Patience::new(topic, partition, patience);
    let (low, high) = loop {
        match c.fetch_watermarks(topic, partition, Duration::from_secs(15)) {
            Ok(w) => break w,
            Err(e) => {
                tracing::warn!(error = %e, topic, partition, "reading a compacted topic: retrying");
                waiting.check(e.to_string())?;
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    };
    if high <= low {
        return Ok(0);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Beginning)?;
    c.assign(&tpl)?;
    let mut records = 0;
    let mut next = low;
    while next < high {
        let msg = match c.poll(Duration::from_secs(1)) {
            None => {
                waiting.check("no record arrived".into())?;
                continue;
            }
            Some(Ok(m)) => m,
            Some(Err(KafkaError::PartitionEOF(_))) => break,
            Some(Err(e)) => {
                tracing::warn!(error = %e, topic, partition, "reading a compacted topic: retrying");
                waiting.check(e.to_string())?;
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
        };
        waiting.since = None;
        next = msg.offset() + 1;
        records += 1;
        each(&msg)?;
    }
    Ok(records)
}

/// The end of the partition is what the read waits for (`enable.partition.eof`): librdkafka
/// reports it as an error event, which rdkafka's default context logs at error level on every
/// restore. Other errors are logged as before.
struct EofIsNotAnError;

impl rdkafka::ClientContext for EofIsNotAnError {
    fn error(&self, error: KafkaError, reason: &str) {
        // It comes as a global error event, not the partition-bound variant.
        if matches!(
            error,
            KafkaError::PartitionEOF(_)
                | KafkaError::Global(rdkafka::types::RDKafkaErrorCode::PartitionEOF)
        ) {
            tracing::debug!(reason, "end of a compacted partition");
        } else {
            tracing::error!(error = %error, reason, "librdkafka error (reading a compacted topic)");
        }
    }
}

impl rdkafka::consumer::ConsumerContext for EofIsNotAnError {}

/// Time without progress, against the read's patience.
struct Patience<'a> {
    topic: &'a str,
    partition: i32,
    patience: Duration,
    /// When the current stretch without progress began.
    since: Option<Instant>,
}

impl<'a> Patience<'a> {
    fn new(topic: &'a str, partition: i32, patience: Duration) -> Self {
        Self {
            topic,
            partition,
            patience,
            since: None,
        }
    }

    /// No progress this time (`last` says why): an error once the patience is spent.
    fn check(&mut self, last: String) -> Result<(), Stalled> {
        let waited = self.since.get_or_insert_with(Instant::now).elapsed();
        if waited < self.patience {
            return Ok(());
        }
        Err(Stalled {
            topic: self.topic.to_string(),
            partition: self.partition,
            waited,
            last,
        })
    }
}
