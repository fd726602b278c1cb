//! The I/O of the worker, as traits, so that its logic runs on fakes in unit tests:
//!
//! - the four kinds of I/O a flush does, one trait each, so the commit rule (`super::flush`)
//!   can be made to fail at any step: ClickHouse inserts, the Kafka producer (outputs, dead
//!   letters, changelog, transaction) and the group consumer's offset commit;
//! - what the coordinator (`super::coordinator`) does outside itself: the few calls it makes
//!   on the group consumer (`GroupConsumer`), and the work it starts beside its loop
//!   (`Background`: partition tasks, flushes, a rewind's transaction abort), so its barriers,
//!   drains and rewinds can be driven step by step;
//! - what a partition task sends per message (`partition::TaskSink`, kept beside the task so
//!   that this file and `partition` do not import each other), and its restore (a closure
//!   handed to `partition::Handle::spawn`), so a task runs without a broker.
//!
//! The flush's and the coordinator's traits are per-flush or per-rebalance calls. The
//! per-message one, `TaskSink`, is a generic parameter, not a trait object: the worker's one
//! instantiation calls the concrete `Producer` directly.
use super::partition::{self, Epoch};
use super::WorkerError;
use crate::emit::{blocking, EmitError, Outbox, Producer};
use crate::sink::{Batch, ClickHouseSink, SinkError};
use crate::source::Input;
use futures::future::BoxFuture;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::TopicPartitionList;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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
    pub emitter: &'a mut Producer,
    pub consumer: &'a Arc<Input>,
    pub changelog_topic: &'a str,
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

/// The group consumer as the coordinator, its only caller, uses it. The calls mirror rdkafka's
/// `Consumer`, so the real implementation only forwards them.
pub(crate) trait GroupConsumer: Send + Sync + 'static {
    /// The partitions librdkafka holds for this member.
    fn assignment(&self) -> KafkaResult<TopicPartitionList>;
    fn pause(&self, tpl: &TopicPartitionList) -> KafkaResult<()>;
    fn resume(&self, tpl: &TopicPartitionList) -> KafkaResult<()>;
    /// Hand revoked partitions back: a cooperative rebalance waits for this call.
    fn incremental_unassign(&self, tpl: &TopicPartitionList) -> KafkaResult<()>;
    /// The group's committed offsets. Blocks for up to `timeout`: call it off the runtime.
    fn committed_offsets(
        &self,
        tpl: TopicPartitionList,
        timeout: Duration,
    ) -> KafkaResult<TopicPartitionList>;
    /// Move the fetch positions; what was fetched before is dropped. Blocks for up to `timeout`.
    fn seek_partitions(
        &self,
        tpl: TopicPartitionList,
        timeout: Duration,
    ) -> KafkaResult<TopicPartitionList>;
    /// One poll whose message, if any, is dropped: on the way out, rebalance callbacks and
    /// commit answers still need serving while nothing read is processed any more.
    fn serve(&self) -> impl Future<Output = ()>;
}

impl GroupConsumer for Input {
    fn assignment(&self) -> KafkaResult<TopicPartitionList> {
        Consumer::assignment(self)
    }

    fn pause(&self, tpl: &TopicPartitionList) -> KafkaResult<()> {
        Consumer::pause(self, tpl)
    }

    fn resume(&self, tpl: &TopicPartitionList) -> KafkaResult<()> {
        Consumer::resume(self, tpl)
    }

    fn incremental_unassign(&self, tpl: &TopicPartitionList) -> KafkaResult<()> {
        Consumer::incremental_unassign(self, tpl)
    }

    fn committed_offsets(
        &self,
        tpl: TopicPartitionList,
        timeout: Duration,
    ) -> KafkaResult<TopicPartitionList> {
        Consumer::committed_offsets(self, tpl, timeout)
    }

    fn seek_partitions(
        &self,
        tpl: TopicPartitionList,
        timeout: Duration,
    ) -> KafkaResult<TopicPartitionList> {
        Consumer::seek_partitions(self, tpl, timeout)
    }

    async fn serve(&self) {
        if let Err(e) = self.recv().await {
            tracing::debug!(error = %e, "consumer error while stopping");
        }
    }
}

/// How a flush ended: the offsets it made durable but could not commit (the group refused
/// them), for the next flush to carry.
pub(crate) type Flushed = Result<Vec<(i32, i64)>, WorkerError>;

/// What the coordinator starts to run beside its loop. Called once per partition assignment,
/// flush or rewind, so a trait object.
pub(crate) trait Background: Send + Sync + 'static {
    /// The task of input partition `partition`; it restores the partition's state at once.
    fn partition(&self, partition: i32) -> Result<partition::Handle, WorkerError>;
    /// Make `epochs` durable and commit them, by the commit rule (`super::flush`), with the
    /// refused offsets `carry` of earlier flushes.
    fn flush(
        &self,
        epochs: Vec<Epoch>,
        carry: Vec<(i32, i64)>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, Flushed>;
    /// A rewind's first half: abort the open transaction (exactly_once), or, with `renew` or
    /// the producer found unusable, replace the producer. Retried until done; fails only when
    /// no retry can help (fenced).
    fn abort(&self, renew: bool) -> BoxFuture<'static, Result<(), WorkerError>>;
}
