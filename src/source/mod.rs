//! Kafka input: the group consumer, rebalance bookkeeping, topic set-up and changelog restore.
pub mod compacted;
pub(crate) mod group;
pub mod restore;
pub(crate) mod topics;

use crate::config::KafkaConfig;
use rdkafka::admin::NewTopic;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol, StreamConsumer,
};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::ClientContext;
use rdkafka::TopicPartitionList;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Why the input side (topics, consumer, changelog restore) failed.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The Kafka client failed.
    #[error("Kafka client error: {0}")]
    Kafka(#[from] KafkaError),
    /// A topic could not be created.
    #[error("cannot create topic {topic}: {source}")]
    CreateTopic {
        /// The topic.
        topic: String,
        /// The broker's reason.
        #[source]
        source: RDKafkaErrorCode,
    },
    /// A topic eddy needs does not exist and may not be created.
    #[error("topic {0} does not exist (set create_topics = true or create it)")]
    MissingTopic(String),
    /// The changelog and the input topic have different partition counts.
    #[error(
        "changelog topic {changelog} has {changelog_partitions} partitions but input topic {input} has {input_partitions}: they must be co-partitioned (delete the changelog or set changelog_topic to a new name)"
    )]
    NotCoPartitioned {
        /// The input topic.
        input: String,
        /// Its partitions.
        input_partitions: usize,
        /// The changelog topic.
        changelog: String,
        /// Its partitions.
        changelog_partitions: usize,
    },
    /// Reading a compacted topic back did not finish.
    #[error(transparent)]
    Stalled(#[from] compacted::Stalled),
    /// A changelog record could not be read.
    #[error("changelog record at {partition}/{offset} is unreadable: {why}")]
    Changelog {
        /// Its partition.
        partition: i32,
        /// Its offset.
        offset: i64,
        /// What is wrong with it.
        why: String,
    },
    /// The brokers refused the connection in a way no retry fixes (rejected credentials, a
    /// certificate that does not verify). `reason` is librdkafka's, `fix` names the settings.
    #[error("Kafka at {brokers} refused the connection: {reason}. To fix: {fix}")]
    Security {
        /// The brokers tried.
        brokers: String,
        /// librdkafka's reason.
        reason: String,
        /// The settings to check.
        fix: String,
    },
}

/// A lock that a thread panicked while holding: what it guards may be half updated, so it is
/// not read any more, and whoever needs it fails.
#[derive(Debug, thiserror::Error)]
#[error("{0} was poisoned (a thread panicked while holding its lock)")]
pub struct Poisoned(pub &'static str);

/// The assignment bookkeeping, or `Poisoned`: never a default standing in for it (an empty
/// assignment, no revoke), which would drop partitions or rebalances without a word.
pub(crate) fn lock_assignment(
    state: &Mutex<Assignment>,
) -> Result<MutexGuard<'_, Assignment>, Poisoned> {
    state
        .lock()
        .map_err(|_| Poisoned("the partition assignment bookkeeping"))
}

/// Assignment changes seen by librdkafka's rebalance callback, drained by the worker loop.
#[derive(Default)]
pub(crate) struct Assignment {
    pub(crate) assigned: HashSet<i32>,
    /// Partitions gone without a chance to drain (lost, eager protocol, or while closing):
    /// their uncommitted work is dropped.
    pub(crate) revoked: Vec<i32>,
    /// A cooperative revoke waiting for the worker: it flushes and commits the partitions, then
    /// hands them back with `incremental_unassign`. The rebalance waits for that call.
    pub(crate) draining: Option<TopicPartitionList>,
    /// While false, revokes are completed in the callback (shutdown: nothing would drain them).
    pub(crate) defer_revokes: bool,
    /// Wakes the worker loop when a revoke waits for it (it may be idle, waiting for a message).
    pub(crate) wake: Arc<tokio::sync::Notify>,
    /// The worker holds back input (a full batch waits for its flush, or a rewind is under
    /// way): partitions assigned meanwhile are paused as soon as they are assigned, so no fetch
    /// starts before the worker can take it. The worker resumes them with the rest.
    pub(crate) paused: bool,
    /// A member of the group: set by every assignment (an empty one included), cleared when the
    /// assignment is lost. A worker not yet (or no longer) a member is not ready.
    pub(crate) member: bool,
}

impl Assignment {
    /// Partitions assigned. Under cooperative-sticky these are increments, not the whole
    /// assignment.
    pub(crate) fn on_assign(&mut self, parts: &[i32]) {
        self.assigned.extend(parts.iter().copied());
        self.member = true;
    }

    /// Partitions revoked (`tpl` lists them for librdkafka). They wait for the worker to drain
    /// them when the revoke allows it (cooperative and not lost) and the worker is running:
    /// then true, and the worker hands them back itself. Otherwise they count as gone at once.
    pub(crate) fn on_revoke(
        &mut self,
        parts: &[i32],
        tpl: &TopicPartitionList,
        drainable: bool,
    ) -> bool {
        for p in parts {
            self.assigned.remove(p);
        }
        if !(drainable && self.defer_revokes) {
            self.revoked.extend(parts.iter().copied());
            return false;
        }
        match &mut self.draining {
            Some(pending) => {
                for e in tpl.elements() {
                    pending.add_partition(e.topic(), e.partition());
                }
            }
            None => self.draining = Some(tpl.clone()),
        }
        self.wake.notify_one();
        true
    }
}

pub(crate) struct RebalanceContext {
    topic: String,
    pub(crate) state: Arc<Mutex<Assignment>>,
    /// The group membership as librdkafka last reported it.
    pub(crate) group: Arc<group::GroupView>,
}

impl ClientContext for RebalanceContext {
    /// librdkafka statistics (every `statistics.interval.ms`): per-partition consumer lag and
    /// the consumer group's state.
    fn stats(&self, stats: rdkafka::Statistics) {
        if let Some(cg) = &stats.cgrp {
            self.group.observe(cg);
        }
        if let Some(t) = stats.topics.get(&self.topic) {
            for (p, part) in &t.partitions {
                // -1 = unknown (not yet fetched / not assigned here).
                if *p >= 0 && part.consumer_lag >= 0 {
                    metrics::gauge!("eddy_consumer_lag_messages", "partition" => p.to_string())
                        .set(part.consumer_lag as f64);
                }
            }
        }
    }
}

impl ConsumerContext for RebalanceContext {
    /// Replaces rdkafka's default so a cooperative revoke can wait for the worker to drain:
    /// librdkafka lets the application call `incremental_unassign` after the callback returns
    /// (the group waits in its wait-unassign state, bounded by the rebalance timeout).
    fn rebalance(&self, c: &BaseConsumer<Self>, err: RDKafkaRespErr, tpl: &mut TopicPartitionList) {
        let cooperative = matches!(c.rebalance_protocol(), RebalanceProtocol::Cooperative);
        let parts: Vec<i32> = tpl
            .elements_for_topic(&self.topic)
            .iter()
            .map(|e| e.partition())
            .collect();
        let revoke = err == RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS;
        // The bookkeeping stays locked until librdkafka has the answer: the worker pauses and
        // resumes the assignment under the same lock, so a partition assigned meanwhile cannot
        // miss a pause.
        let (answer, _held) = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                self.answer(Rebalance::Assign, &parts, tpl)
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                let kind = Rebalance::Revoke {
                    cooperative,
                    lost: c.assignment_lost(),
                };
                self.answer(kind, &parts, tpl)
            }
            other => {
                let code: RDKafkaErrorCode = other.into();
                tracing::warn!(error = %code, "rebalance error");
                (Answer::Release, None)
            }
        };
        let res = match answer {
            Answer::Assign { paused } => {
                let assigned = if cooperative {
                    c.incremental_assign(tpl)
                } else {
                    c.assign(tpl)
                };
                // Held back input stays held back, new partitions included. And the other way
                // round: librdkafka keeps an application's pause on a partition across its
                // unassignment, so a partition paused, lost and assigned again would stay paused
                // for good unless it is resumed here.
                match assigned {
                    Ok(()) if paused => c.pause(tpl),
                    Ok(()) => c.resume(tpl),
                    Err(e) => Err(e),
                }
            }
            Answer::Release if revoke && cooperative => c.incremental_unassign(tpl),
            Answer::Release => c.unassign(),
            Answer::Defer => Ok(()),
        };
        if let Err(e) = res {
            tracing::warn!(error = %e, "applying the rebalance failed");
        }
    }
}

/// A rebalance event, as the bookkeeping needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rebalance {
    Assign,
    /// `lost`: the session timed out and the group already gave the partitions away.
    Revoke {
        cooperative: bool,
        lost: bool,
    },
}

/// What librdkafka is told about a rebalance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// Take the partitions; `paused` holds them back at once.
    Assign { paused: bool },
    /// Let the partitions go now.
    Release,
    /// The worker drains the revoked partitions first and hands them back itself.
    Defer,
}

impl RebalanceContext {
    /// Record a rebalance in the assignment bookkeeping and say what librdkafka must be told.
    ///
    /// A poisoned bookkeeping is not read: librdkafka still gets its assign or unassign at
    /// once (a rebalance left unanswered holds up the whole group, and nobody would drain a
    /// deferred revoke), and the worker, woken, fails with `WorkerError::Poisoned` at its next
    /// look at the bookkeeping, whose poisoning stays. Assigned partitions are taken paused:
    /// nothing will process them.
    fn answer(
        &self,
        kind: Rebalance,
        parts: &[i32],
        tpl: &TopicPartitionList,
    ) -> (Answer, Option<MutexGuard<'_, Assignment>>) {
        let mut st = match self.state.lock() {
            Ok(st) => st,
            Err(poisoned) => {
                tracing::error!(
                    partitions = ?parts,
                    rebalance = ?kind,
                    "the partition assignment bookkeeping is poisoned (a thread panicked while \
                     holding it): answering the rebalance without it; the worker stops"
                );
                // Only the wake-up is touched: a `Notify` is whole whatever update was cut short.
                poisoned.get_ref().wake.notify_one();
                let answer = match kind {
                    Rebalance::Assign => Answer::Assign { paused: true },
                    Rebalance::Revoke { .. } => Answer::Release,
                };
                return (answer, None);
            }
        };
        let answer = match kind {
            Rebalance::Assign => {
                st.on_assign(parts);
                tracing::info!(partitions = ?parts, "partitions assigned");
                Answer::Assign { paused: st.paused }
            }
            Rebalance::Revoke { cooperative, lost } => {
                if lost {
                    st.member = false;
                }
                if st.on_revoke(parts, tpl, cooperative && !lost) {
                    tracing::info!(partitions = ?parts, "partitions revoked: draining them first");
                    Answer::Defer
                } else {
                    tracing::info!(partitions = ?parts, lost, "partitions revoked");
                    Answer::Release
                }
            }
        };
        (answer, Some(st))
    }
}

pub(crate) type Input = StreamConsumer<RebalanceContext>;

pub(crate) fn consumer(cfg: &KafkaConfig) -> Result<(Input, Arc<Mutex<Assignment>>), SourceError> {
    let state = Arc::new(Mutex::new(Assignment::default()));
    let ctx = RebalanceContext {
        topic: cfg.topics.input.clone(),
        state: state.clone(),
        group: Arc::default(),
    };
    let mut cc = ClientConfig::new();
    cc.set("bootstrap.servers", &cfg.brokers)
        .set("group.id", &cfg.group_id)
        // Offsets are committed only after ClickHouse and the output topic have what they cover.
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set("session.timeout.ms", cfg.session_timeout_ms.to_string())
        .set("isolation.level", "read_committed")
        .set("statistics.interval.ms", "5000");
    for (k, v) in cfg.props_for(&cfg.consumer) {
        cc.set(k, v);
    }
    let c: Input = cc.create_with_context(ctx)?;
    c.subscribe(&[&cfg.topics.input])?;
    Ok((c, state))
}

/// Connection failures that librdkafka reports as error events and keeps retrying forever,
/// though only a configuration change can fix them.
#[derive(Default)]
struct ConnectProbe {
    refused: Mutex<Option<(RDKafkaErrorCode, String)>>,
}

impl ClientContext for ConnectProbe {
    fn error(&self, error: KafkaError, reason: &str) {
        let code = error.rdkafka_error_code();
        if let (true, Some(code)) = (is_refusal(code, reason), code) {
            if let Ok(mut slot) = self.refused.lock() {
                slot.get_or_insert_with(|| (code, reason.to_string()));
            }
        }
        tracing::debug!(error = %error, reason, "Kafka connection probe");
    }
}

impl ConsumerContext for ConnectProbe {}

/// Whether a connection error is one no retry fixes. A TLS failure is final when the
/// certificate does not verify; a handshake cut short (a broker restarting) is retried like
/// any transport error.
fn is_refusal(code: Option<RDKafkaErrorCode>, reason: &str) -> bool {
    let lower = reason.to_ascii_lowercase();
    match code {
        Some(RDKafkaErrorCode::Authentication) => true,
        Some(RDKafkaErrorCode::SSL) => lower.contains("certificate") || lower.contains("verif"),
        _ => false,
    }
}

/// How long start-up waits for the brokers' metadata before letting topic creation report
/// whatever is wrong; a refusal (bad credentials or certificate) ends the wait at once.
const CONNECT_PROBE: Duration = Duration::from_secs(30);

/// Wait until the brokers answer a metadata request, or fail with advice if they refuse the
/// credentials or the certificate. A consumer without a subscription does it: unlike the admin
/// client, polling it serves librdkafka's error events.
fn probe_connection(cfg: &KafkaConfig) -> Result<(), SourceError> {
    let mut cc = ClientConfig::new();
    for (k, v) in cfg.client_props() {
        cc.set(k, v);
    }
    cc.set("group.id", "eddy-connect-probe");
    let probe: BaseConsumer<ConnectProbe> = cc.create_with_context(ConnectProbe::default())?;
    let deadline = std::time::Instant::now() + CONNECT_PROBE;
    loop {
        // Returns as soon as an error event arrives (or after 200 ms without one).
        let _ = probe.poll(Duration::from_millis(200));
        let refused = probe.context().refused.lock().ok().and_then(|r| r.clone());
        if let Some((code, reason)) = refused {
            return Err(security_error(cfg, code, reason));
        }
        let answered = probe
            .fetch_metadata(None, Duration::from_millis(500))
            .is_ok();
        if answered || std::time::Instant::now() >= deadline {
            return Ok(());
        }
    }
}

fn security_error(cfg: &KafkaConfig, code: RDKafkaErrorCode, reason: String) -> SourceError {
    let props = cfg.client_props();
    let get = |k: &str| props.iter().find(|(p, _)| p == k).map(|(_, v)| v.as_str());
    let fix = if code == RDKafkaErrorCode::Authentication {
        format!(
            "check the SASL credentials for user `{}` with mechanism {} \
             (kafka_sasl_username / kafka_sasl_password, env EDDY_KAFKA_SASL_USERNAME / \
             EDDY_KAFKA_SASL_PASSWORD, or sasl.username / sasl.password in [kafka_consumer] \
             and [kafka_producer]) and kafka_sasl_mechanism (EDDY_KAFKA_SASL_MECHANISM)",
            get("sasl.username").unwrap_or("(none)"),
            get("sasl.mechanism")
                .or_else(|| get("sasl.mechanisms"))
                .unwrap_or("GSSAPI (librdkafka's default)"),
        )
    } else {
        format!(
            "check that security.protocol ({}) matches the listener and that the CA file in \
             kafka_ssl_ca_location (EDDY_KAFKA_SSL_CA_LOCATION, librdkafka ssl.ca.location; \
             now {}) signed the broker's certificate",
            get("security.protocol").unwrap_or("plaintext"),
            get("ssl.ca.location").unwrap_or("unset: the system's CAs"),
        )
    };
    SourceError::Security {
        brokers: cfg.brokers.clone(),
        reason,
        fix,
    }
}

/// Create missing topics and check that the changelog is co-partitioned with the input.
pub async fn ensure_topics(cfg: &KafkaConfig) -> Result<(), SourceError> {
    probe_connection(cfg)?;
    let admin = topics::admin(cfg)?;
    let changelog = cfg.changelog_topic();
    if cfg.topics.create {
        let repl = || topics::replication(cfg);
        let plain = [&cfg.topics.input, &cfg.topics.output, &cfg.topics.dlq];
        let max_bytes = cfg.topics.max_message_bytes.map(|n| n.to_string());
        let mut new: Vec<NewTopic<'_>> = plain
            .iter()
            .map(|t| {
                let nt = NewTopic::new(t, cfg.topics.partitions, repl());
                match &max_bytes {
                    Some(n) if *t != &cfg.topics.output => nt.set("max.message.bytes", n),
                    _ => nt,
                }
            })
            .collect();
        topics::create(&admin, &new).await?;
        // The changelog must match the input's *actual* partition count, which may predate us.
        let input_parts = partition_count(&admin, &cfg.topics.input)?;
        new = vec![NewTopic::new(&changelog, input_parts as i32, repl())
            .set("cleanup.policy", "compact")
            // Keep restore time bounded by live runs, not history: roll segments often and
            // let the cleaner run early so superseded snapshots and tombstones go away.
            .set("segment.ms", "600000")
            .set("min.cleanable.dirty.ratio", "0.1")
            .set("delete.retention.ms", "3600000")];
        topics::create(&admin, &new).await?;
    }
    let input_partitions = partition_count(&admin, &cfg.topics.input)?;
    let changelog_partitions = partition_count(&admin, &changelog)?;
    if input_partitions != changelog_partitions {
        return Err(SourceError::NotCoPartitioned {
            input: cfg.topics.input.clone(),
            input_partitions,
            changelog,
            changelog_partitions,
        });
    }
    Ok(())
}

fn partition_count(admin: &topics::Admin, topic: &str) -> Result<usize, SourceError> {
    // A topic just created may take a moment to appear in metadata: wait for it, bounded.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let md = admin
            .inner()
            .fetch_metadata(Some(topic), Duration::from_secs(15))?;
        match md.topics().first() {
            Some(t) if t.error().is_none() && !t.partitions().is_empty() => {
                return Ok(t.partitions().len())
            }
            _ if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100))
            }
            _ => return Err(SourceError::MissingTopic(topic.to_string())),
        }
    }
}

#[cfg(test)]
mod tests;
