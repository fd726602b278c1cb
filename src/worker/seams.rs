//! The four kinds of I/O a flush does, one trait each, so the commit rule (`super::flush`) can
//! run on fakes that fail at any step. The real implementations are thin: ClickHouse inserts,
//! the Kafka producer (outputs, dead letters, changelog, transaction) and the group consumer.
//!
//! These are per-flush calls, not per-message ones: the partition tasks' hot path keeps calling
//! the concrete `Emitter` directly.
use crate::emit::{blocking, EmitError, Emitter, Outbox};
use crate::sink::{Batch, ClickHouseSink, SinkError};
use crate::source::Input;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::TopicPartitionList;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Step 1: a flush's rows, into ClickHouse. Inserting the same rows again is harmless (every
/// table is a `ReplacingMergeTree` keyed by row identity), which is what makes retrying safe.
pub(crate) trait RowSink {
    /// Returns once ClickHouse acknowledged every row of every batch.
    fn insert_all(&self, batches: &[Batch]) -> impl Future<Output = Result<(), SinkError>> + Send;
}

/// Step 2: output events and dead letters, which partition tasks sent (at_least_once) or held
/// back for the transaction (exactly_once).
pub(crate) trait OutputSink {
    /// What a partition task hands over at a barrier.
    type Outbox: Default;
    /// Take over a task's outbox: its deliveries join those awaited here; held-back records are
    /// sent now (inside the open transaction).
    fn absorb(&mut self, outbox: Self::Outbox) -> Result<(), EmitError>;
    /// exactly_once: everything sent since the last commit is one transaction.
    fn is_transactional(&self) -> bool;
    /// Wait until the broker acknowledged every output and dead letter sent so far, for at
    /// most `deadline` (then `EmitError::Timeout`).
    fn outputs_acknowledged(
        &mut self,
        deadline: Duration,
    ) -> impl Future<Output = Result<(), EmitError>> + Send;
}

/// Step 3: the state changelog, co-partitioned with the input.
pub(crate) trait ChangelogSink {
    fn send_changelog(
        &mut self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), EmitError>;
    /// Wait until the broker acknowledged every changelog record sent so far, for at most
    /// `deadline` (then `EmitError::Timeout`).
    fn changelog_acknowledged(
        &mut self,
        deadline: Duration,
    ) -> impl Future<Output = Result<(), EmitError>> + Send;
}

/// Step 4: the input offsets.
pub(crate) trait OffsetCommitter {
    /// at_least_once: the group's offset commit, answered within `deadline` (else an
    /// `OperationTimedOut` commit error).
    fn commit_offsets(
        &mut self,
        offsets: &TopicPartitionList,
        deadline: Duration,
    ) -> impl Future<Output = Result<(), KafkaError>> + Send;
    /// exactly_once: the offsets join the open transaction, which then commits with everything
    /// sent in it (KIP-447); each call waits at most `deadline`.
    fn commit_transaction(
        &mut self,
        offsets: &TopicPartitionList,
        deadline: Duration,
    ) -> Result<(), EmitError>;
}

impl RowSink for ClickHouseSink {
    fn insert_all(&self, batches: &[Batch]) -> impl Future<Output = Result<(), SinkError>> + Send {
        ClickHouseSink::insert_all(self, batches)
    }
}

/// The worker's Kafka side during one flush: its one producer carries outputs, dead letters,
/// changelog and (exactly_once) the transaction; the consumer owns the group's offsets.
pub(crate) struct KafkaIo<'a> {
    pub(crate) emitter: &'a mut Emitter,
    pub(crate) consumer: &'a Arc<Input>,
    pub(crate) changelog_topic: &'a str,
}

/// What an offset commit that got no answer in time turns into.
pub(crate) fn commit_timed_out() -> KafkaError {
    KafkaError::ConsumerCommit(rdkafka::error::RDKafkaErrorCode::OperationTimedOut)
}

impl OutputSink for KafkaIo<'_> {
    type Outbox = Outbox;

    fn absorb(&mut self, outbox: Outbox) -> Result<(), EmitError> {
        self.emitter.absorb(outbox)
    }

    fn is_transactional(&self) -> bool {
        self.emitter.is_transactional()
    }

    async fn outputs_acknowledged(&mut self, deadline: Duration) -> Result<(), EmitError> {
        self.emitter.acknowledged(deadline).await.map(drop)
    }
}

impl ChangelogSink for KafkaIo<'_> {
    fn send_changelog(
        &mut self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), EmitError> {
        self.emitter
            .send_changelog(self.changelog_topic, partition, key, value)
    }

    async fn changelog_acknowledged(&mut self, deadline: Duration) -> Result<(), EmitError> {
        self.emitter.acknowledged(deadline).await.map(drop)
    }
}

impl OffsetCommitter for KafkaIo<'_> {
    /// librdkafka's synchronous commit waits for the group coordinator's answer without any
    /// time limit, and the coordinator answers a commit only after the requests before it on
    /// the same connection: a JoinGroup that the broker parks for a whole rebalance (up to
    /// `max.poll.interval.ms`) holds the commit that long. So the commit waits on a blocking
    /// thread of its own, and the flush waits for it only until its deadline. (Its asynchronous
    /// form reports its result only to a C callback that rdkafka does not set.) A commit left
    /// behind finishes when the coordinator answers; the next commit covers its partitions.
    async fn commit_offsets(
        &mut self,
        offsets: &TopicPartitionList,
        deadline: Duration,
    ) -> Result<(), KafkaError> {
        let (consumer, offsets) = (self.consumer.clone(), offsets.clone());
        let commit =
            tokio::task::spawn_blocking(move || consumer.commit(&offsets, CommitMode::Sync));
        match tokio::time::timeout(deadline, commit).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) | Err(_) => Err(commit_timed_out()),
        }
    }

    fn commit_transaction(
        &mut self,
        offsets: &TopicPartitionList,
        deadline: Duration,
    ) -> Result<(), EmitError> {
        let (emitter, consumer) = (&mut *self.emitter, &**self.consumer);
        blocking(|| emitter.commit_transaction(offsets, consumer, deadline))
    }
}
