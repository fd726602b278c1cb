//! The worker's writes to Kafka (output events, dead letters and the state changelog, in one
//! transaction in `exactly_once`), and the producer set-up every writer of eddy starts from
//! (`producer_config`; fleet-watch's alert and state records, the ingest bridges' events).
//!
//! Sends are fire-and-collect: a record is handed to librdkafka at once (signals go out as soon
//! as they are detected) and its delivery future is kept; a flush awaits them all before the
//! offsets that produced them may be committed.
use crate::config::{Delivery, KafkaConfig};
use crate::contract::OutputEvent;
use futures::future::join_all;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::Producer as _;
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use std::time::Duration;

/// Why output could not be produced to Kafka.
#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    /// The producer could not be created (bad settings).
    #[error("cannot create Kafka producer: {0}")]
    Create(#[source] KafkaError),
    /// A record was not delivered.
    #[error("delivery to {topic} failed: {source}")]
    Delivery {
        /// The topic it was for.
        topic: String,
        /// The broker's or client's reason.
        #[source]
        source: KafkaError,
    },
    /// The delivery was cancelled before an answer came (the topic named).
    #[error("delivery to {0} was cancelled (producer dropped)")]
    Cancelled(String),
    /// An event could not be serialised.
    #[error("cannot serialise output event: {0}")]
    Serialise(#[from] serde_json::Error),
    /// The transaction must be aborted and processing rewound to the last commit.
    #[error("transaction aborted, rewinding to the last commit: {0}")]
    Abortable(#[source] KafkaError),
    /// Fenced by a newer instance, or the producer is unusable: the worker must exit.
    #[error("fatal transactional producer error (fenced or unusable), exiting: {0}")]
    Fatal(#[source] KafkaError),
    /// The broker did not acknowledge everything sent within the flush's deadline.
    #[error("{pending} record(s) not acknowledged by the broker within {waited_ms} ms (flush_timeout_ms)")]
    Timeout {
        /// Records still unacknowledged.
        pending: usize,
        /// How long the flush waited.
        waited_ms: u64,
    },
}

impl EmitError {
    /// Whether going back to the last commit and doing the batch again can succeed: the broker
    /// was slow or away (a timeout, a transport failure, a leader moving), or the transaction
    /// must be aborted. Not a record the broker refuses for what it is (too large, not
    /// authorised), which would fail the same way forever.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            EmitError::Abortable(_) | EmitError::Timeout { .. } => true,
            EmitError::Delivery { source, .. } => source
                .rdkafka_error_code()
                .is_some_and(transient_delivery_error),
            _ => false,
        }
    }

    /// Another process took over this worker's transactional id (or may not use it): this one
    /// must stop, not retry.
    pub(crate) fn is_fenced(&self) -> bool {
        use RDKafkaErrorCode as C;
        let code = match self {
            EmitError::Fatal(e) | EmitError::Abortable(e) => match e {
                KafkaError::Transaction(t) => Some(t.code()),
                other => other.rdkafka_error_code(),
            },
            _ => None,
        };
        matches!(
            code,
            Some(
                C::ProducerFenced | C::InvalidProducerEpoch | C::TransactionalIdAuthorizationFailed
            )
        )
    }

    /// The producer is unusable (librdkafka raised a fatal error: after a broker lost the
    /// transaction's state, say) but nobody fenced it: a new producer with the same
    /// transactional id takes over, aborting whatever the old one left open.
    pub(crate) fn needs_new_producer(&self) -> bool {
        match self {
            EmitError::Fatal(_) => !self.is_fenced(),
            EmitError::Delivery { source, .. } => {
                source.rdkafka_error_code() == Some(RDKafkaErrorCode::Fatal)
            }
            _ => false,
        }
    }

    fn from_txn(e: KafkaError) -> Self {
        match &e {
            KafkaError::Transaction(t) if t.txn_requires_abort() => EmitError::Abortable(e),
            KafkaError::Transaction(t) if !t.is_fatal() && t.is_retriable() => {
                EmitError::Abortable(e)
            }
            _ => EmitError::Fatal(e),
        }
    }
}

/// Delivery failures that another attempt can get past.
fn transient_delivery_error(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::MessageTimedOut
            | C::RequestTimedOut
            | C::OperationTimedOut
            | C::BrokerTransportFailure
            | C::AllBrokersDown
            | C::NetworkException
            | C::LeaderNotAvailable
            | C::NotLeaderForPartition
            | C::NotEnoughReplicas
            | C::NotEnoughReplicasAfterAppend
            | C::NotCoordinator
            | C::CoordinatorNotAvailable
            | C::CoordinatorLoadInProgress
            | C::UnknownTopicOrPartition
            | C::PurgeQueue
            | C::PurgeInflight
            | C::OutOfOrderSequenceNumber
            | C::UnknownProducerId
            | C::KafkaStorageError
    )
}

/// Run a call that may block the thread for a while (librdkafka's transaction calls, waiting
/// for room in the producer queue) without stalling the other tasks of the runtime's thread.
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// eddy's Kafka producer: signals, dead letters and changelog records, transactional or not.
pub struct Producer {
    producer: FutureProducer,
    pending: Vec<(String, DeliveryFuture)>,
    /// A fork in exactly_once mode: records wait here until the coordinator sends them inside
    /// its transaction (`absorb`), because the open transaction must carry only what the
    /// offsets it commits cover.
    defer: bool,
    deferred: Vec<Deferred>,
    transactional: bool,
    in_txn: bool,
    txn_timeout: Duration,
    /// Most payload bytes a dead letter carries (`dlq_max_payload_bytes`).
    dlq_cap: usize,
}

/// A record held back by a deferring fork.
struct Deferred {
    topic: String,
    partition: Option<i32>,
    key: Option<Vec<u8>>,
    payload: Option<Vec<u8>>,
    headers: Option<OwnedHeaders>,
}

/// What a fork sent (or held back) since it was last emptied: handed to the emitter that flushes
/// and commits.
#[derive(Default)]
pub(crate) struct Outbox {
    pending: Vec<(String, DeliveryFuture)>,
    deferred: Vec<Deferred>,
}

/// Most key bytes a dead letter carries.
pub(crate) const DLQ_MAX_KEY_BYTES: usize = 1024;

/// Dead-letter record headers: the reason is machine-readable, the rest says where it came from.
pub(crate) struct DeadLetter<'a> {
    pub(crate) payload: Option<&'a [u8]>,
    pub(crate) key: Option<&'a [u8]>,
    pub(crate) reason: &'a str,
    pub(crate) detail: &'a str,
    pub(crate) topic: &'a str,
    pub(crate) partition: i32,
    pub(crate) offset: i64,
}

/// The properties every producer of eddy starts from (the worker's, the ingest bridges', the
/// simulator's, fleet-watch's two): idempotent, acknowledged by every in-sync replica, keys
/// partitioned as Kafka's Java clients do (murmur2, so they land where replay expects), then
/// `own` (the caller's tuning), then the operator's `[kafka.producer]` properties.
pub(crate) fn producer_config(kafka: &KafkaConfig, own: &[(&str, &str)]) -> ClientConfig {
    let mut cc = ClientConfig::new();
    cc.set("bootstrap.servers", &kafka.brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("partitioner", "murmur2_random");
    for (k, v) in own {
        cc.set(*k, *v);
    }
    for (k, v) in kafka.props_for(&kafka.producer) {
        cc.set(k, v);
    }
    cc
}

/// Make `cc` transactional under `id`: a transaction open longer than `timeout_ms` is aborted
/// by the broker, and a record not delivered a second before that fails in the producer first.
pub(crate) fn set_transactional(cc: &mut ClientConfig, id: &str, timeout_ms: u32) {
    cc.set("transactional.id", id)
        .set("transaction.timeout.ms", timeout_ms.to_string())
        .set(
            "message.timeout.ms",
            timeout_ms.saturating_sub(1000).to_string(),
        );
}

impl Producer {
    pub(crate) fn new(cfg: &KafkaConfig) -> Result<Self, EmitError> {
        let mut cc = producer_config(
            cfg,
            &[
                ("linger.ms", "5"),
                ("compression.type", "lz4"),
                ("message.timeout.ms", "120000"),
            ],
        );
        let txn_timeout = Duration::from_millis(u64::from(cfg.transaction_timeout_ms));
        let transactional = cfg.delivery == Delivery::ExactlyOnce;
        if transactional {
            set_transactional(&mut cc, &cfg.transactional_id(), cfg.transaction_timeout_ms);
        }
        let producer: FutureProducer = cc.create().map_err(EmitError::Create)?;
        if transactional {
            // Fences any earlier instance with the same transactional id.
            producer
                .init_transactions(txn_timeout)
                .map_err(EmitError::Fatal)?;
        }
        Ok(Self {
            producer,
            pending: Vec::new(),
            defer: false,
            deferred: Vec::new(),
            transactional,
            in_txn: false,
            txn_timeout,
            dlq_cap: cfg.dlq_max_payload_bytes.max(1),
        })
    }

    /// Non-transactional producer (simulator, tests), whatever the delivery mode says.
    pub fn plain(cfg: &KafkaConfig) -> Result<Self, EmitError> {
        let mut c = cfg.clone();
        c.delivery = Delivery::AtLeastOnce;
        Self::new(&c)
    }

    /// An emitter for a partition task, on the same producer. In at_least_once it sends at once
    /// (signals go out as soon as they are detected) and keeps its own delivery futures; in
    /// exactly_once it holds records back for the coordinator's transaction.
    pub(crate) fn fork(&self) -> Producer {
        Producer {
            producer: self.producer.clone(),
            pending: Vec::new(),
            defer: self.defer || self.transactional,
            deferred: Vec::new(),
            transactional: false,
            in_txn: false,
            txn_timeout: self.txn_timeout,
            dlq_cap: self.dlq_cap,
        }
    }

    /// Everything sent or held back since the last call.
    pub(crate) fn take_outbox(&mut self) -> Outbox {
        Outbox {
            pending: std::mem::take(&mut self.pending),
            deferred: std::mem::take(&mut self.deferred),
        }
    }

    /// Take over a fork's outbox: its deliveries are awaited by this emitter's `flush`, its held
    /// back records are sent now (inside the open transaction in exactly_once).
    pub(crate) fn absorb(&mut self, outbox: Outbox) -> Result<(), EmitError> {
        self.pending.extend(outbox.pending);
        for d in outbox.deferred {
            self.send(
                &d.topic,
                d.partition,
                d.key.as_deref(),
                d.payload.as_deref(),
                d.headers,
            )?;
        }
        Ok(())
    }

    pub(crate) fn is_transactional(&self) -> bool {
        self.transactional
    }

    fn ensure_txn(&mut self) -> Result<(), EmitError> {
        if self.transactional && !self.in_txn {
            self.producer
                .begin_transaction()
                .map_err(EmitError::from_txn)?;
            self.in_txn = true;
        }
        Ok(())
    }

    /// Commit the open transaction together with the consumer offsets in `offsets`, waiting
    /// at most `timeout` for each of the two calls (a timeout is abortable: the caller aborts
    /// and redoes the batch).
    pub(crate) fn commit_transaction<
        C: rdkafka::consumer::Consumer<X>,
        X: rdkafka::consumer::ConsumerContext,
    >(
        &mut self,
        offsets: &rdkafka::TopicPartitionList,
        consumer: &C,
        timeout: Duration,
    ) -> Result<(), EmitError> {
        self.ensure_txn()?;
        let meta = consumer
            .group_metadata()
            .ok_or_else(|| EmitError::Abortable(KafkaError::NoMessageReceived))?;
        let timeout = timeout.min(self.txn_timeout);
        if offsets.count() > 0 {
            self.producer
                .send_offsets_to_transaction(offsets, &meta, timeout)
                .map_err(EmitError::from_txn)?;
        }
        self.producer
            .commit_transaction(timeout)
            .map_err(EmitError::from_txn)?;
        self.in_txn = false;
        // Commit flushed everything; the delivery futures are resolved now.
        self.pending.clear();
        Ok(())
    }

    /// Abort the open transaction (after an abortable error), waiting at most `timeout`. A
    /// timed-out abort is retriable (call again); any other failure is fatal.
    pub(crate) fn abort_transaction(&mut self, timeout: Duration) -> Result<(), EmitError> {
        self.pending.clear();
        self.deferred.clear();
        if self.transactional && self.in_txn {
            self.producer
                .abort_transaction(timeout.min(self.txn_timeout))
                .map_err(|e| match &e {
                    KafkaError::Transaction(t) if t.is_retriable() && !t.is_fatal() => {
                        EmitError::Abortable(e)
                    }
                    _ => EmitError::Fatal(e),
                })?;
        }
        self.in_txn = false;
        Ok(())
    }

    /// The underlying producer, for callers that send what this type has no method for.
    pub fn producer(&self) -> &FutureProducer {
        &self.producer
    }

    fn send(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
        headers: Option<OwnedHeaders>,
    ) -> Result<(), EmitError> {
        if self.defer {
            self.deferred.push(Deferred {
                topic: topic.to_string(),
                partition,
                key: key.map(<[u8]>::to_vec),
                payload: payload.map(<[u8]>::to_vec),
                headers,
            });
            return Ok(());
        }
        self.ensure_txn()?;
        let mut rec: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic);
        if let Some(k) = key {
            rec = rec.key(k);
        }
        if let Some(p) = payload {
            rec = rec.payload(p);
        }
        if let Some(p) = partition {
            rec = rec.partition(p);
        }
        if let Some(h) = headers {
            rec = rec.headers(h);
        }
        loop {
            match self.producer.send_result(rec) {
                Ok(fut) => {
                    self.pending.push((topic.to_string(), fut));
                    return Ok(());
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    // Back-pressure: let librdkafka drain its queue, then retry the same record.
                    // Records that cannot be delivered expire after message.timeout.ms, so
                    // this ends even with the brokers away.
                    let producer = &self.producer;
                    blocking(|| producer.poll(Duration::from_millis(10)));
                    rec = r;
                }
                Err((e, _)) => {
                    return Err(EmitError::Delivery {
                        topic: topic.to_string(),
                        source: e,
                    })
                }
            }
        }
    }

    pub(crate) fn send_output(&mut self, topic: &str, o: &OutputEvent) -> Result<(), EmitError> {
        let payload = serde_json::to_vec(o)?;
        self.send(
            topic,
            None,
            Some(o.run_id().as_bytes()),
            Some(&payload),
            None,
        )
    }

    pub(crate) fn send_dead_letter(
        &mut self,
        dlq_topic: &str,
        d: &DeadLetter<'_>,
    ) -> Result<(), EmitError> {
        let partition = d.partition.to_string();
        let offset = d.offset.to_string();
        let payload_len = d.payload.map_or(0, <[u8]>::len);
        let key_len = d.key.map_or(0, <[u8]>::len);
        let cut_payload = payload_len > self.dlq_cap;
        let cut_key = key_len > DLQ_MAX_KEY_BYTES;
        let payload = d.payload.map(|p| &p[..p.len().min(self.dlq_cap)]);
        let key = d.key.map(|k| &k[..k.len().min(DLQ_MAX_KEY_BYTES)]);
        let mut headers = OwnedHeaders::new()
            .insert(Header {
                key: "eddy.reason",
                value: Some(d.reason),
            })
            .insert(Header {
                key: "eddy.detail",
                value: Some(d.detail),
            })
            .insert(Header {
                key: "eddy.source.topic",
                value: Some(d.topic),
            })
            .insert(Header {
                key: "eddy.source.partition",
                value: Some(&partition),
            })
            .insert(Header {
                key: "eddy.source.offset",
                value: Some(&offset),
            });
        if cut_payload || cut_key {
            use sha2::Digest;
            let size = payload_len.to_string();
            let key_size = key_len.to_string();
            let sha = hex::encode(sha2::Sha256::digest(d.payload.unwrap_or_default()));
            headers = headers
                .insert(Header {
                    key: "eddy.truncated",
                    value: Some("true"),
                })
                .insert(Header {
                    key: "eddy.original_size",
                    value: Some(&size),
                })
                .insert(Header {
                    key: "eddy.original_key_size",
                    value: Some(&key_size),
                })
                .insert(Header {
                    key: "eddy.original_sha256",
                    value: Some(&sha),
                });
        }
        self.send(dlq_topic, None, key, payload, Some(headers))
    }

    /// A changelog record goes to the partition matching its input partition (co-partitioning).
    pub fn send_changelog(
        &mut self,
        topic: &str,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), EmitError> {
        self.send(topic, Some(partition), Some(key), value, None)
    }

    /// Wait until every record sent so far is acknowledged by the broker (each record is
    /// bounded by the producer's `message.timeout.ms`).
    pub async fn flush(&mut self) -> Result<usize, EmitError> {
        self.wait_acks(None).await
    }

    /// Wait until every record sent so far is acknowledged by the broker, for at most
    /// `deadline`. Past it the records are left to librdkafka (they may still be delivered)
    /// and the caller redoes the batch from its last commit.
    pub(crate) async fn acknowledged(&mut self, deadline: Duration) -> Result<usize, EmitError> {
        self.wait_acks(Some(deadline)).await
    }

    async fn wait_acks(&mut self, deadline: Option<Duration>) -> Result<usize, EmitError> {
        let pending = std::mem::take(&mut self.pending);
        let n = pending.len();
        let (topics, futs): (Vec<String>, Vec<DeliveryFuture>) = pending.into_iter().unzip();
        let results = match deadline {
            None => join_all(futs).await,
            Some(d) => match tokio::time::timeout(d, join_all(futs)).await {
                Ok(r) => r,
                Err(_) => {
                    return Err(EmitError::Timeout {
                        pending: n,
                        waited_ms: d.as_millis() as u64,
                    })
                }
            },
        };
        for (topic, res) in topics.into_iter().zip(results) {
            match res {
                Ok(Ok(_)) => {}
                Ok(Err((e, _))) => return Err(EmitError::Delivery { topic, source: e }),
                Err(_) => return Err(EmitError::Cancelled(topic)),
            }
        }
        Ok(n)
    }
}

impl Producer {
    /// A keyed record to any topic (the simulator and tests produce input this way).
    pub fn send_raw(&mut self, topic: &str, key: &[u8], payload: &[u8]) -> Result<(), EmitError> {
        self.send(topic, None, Some(key), Some(payload), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fatal(code: RDKafkaErrorCode) -> EmitError {
        EmitError::Fatal(KafkaError::Global(code))
    }

    #[test]
    fn a_fenced_producer_stops_and_an_unusable_one_is_replaced() {
        for code in [
            RDKafkaErrorCode::ProducerFenced,
            RDKafkaErrorCode::InvalidProducerEpoch,
            RDKafkaErrorCode::TransactionalIdAuthorizationFailed,
        ] {
            assert!(fatal(code).is_fenced(), "{code:?}");
            assert!(!fatal(code).needs_new_producer(), "{code:?}");
        }
        let lost_state = fatal(RDKafkaErrorCode::InvalidTransactionalState);
        assert!(!lost_state.is_fenced());
        assert!(lost_state.needs_new_producer());
        let idempotence_broken = EmitError::Delivery {
            topic: "t".into(),
            source: KafkaError::MessageProduction(RDKafkaErrorCode::Fatal),
        };
        assert!(idempotence_broken.needs_new_producer());
    }

    #[test]
    fn transient_delivery_failures_are_retried_and_refusals_are_not() {
        let failed = |code| EmitError::Delivery {
            topic: "t".into(),
            source: KafkaError::MessageProduction(code),
        };
        assert!(failed(RDKafkaErrorCode::MessageTimedOut).is_transient());
        assert!(failed(RDKafkaErrorCode::NotEnoughReplicas).is_transient());
        assert!(!failed(RDKafkaErrorCode::MessageSizeTooLarge).is_transient());
        assert!(!failed(RDKafkaErrorCode::TopicAuthorizationFailed).is_transient());
        assert!(EmitError::Timeout {
            pending: 1,
            waited_ms: 1
        }
        .is_transient());
    }
}
