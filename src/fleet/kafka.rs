//! The Kafka side of `eddy fleet-watch`: topics, the progress record, and the transaction that
//! publishes a window's alerts together with the progress past it.
use super::alert::{FleetAlert, FleetAlertResolved, OpenAlert};
use super::FleetConfig;
use super::FleetError;
use crate::config::KafkaConfig;
use crate::emit::{producer_config, set_transactional};
use crate::source::compacted::read_to_end;
use crate::source::topics;
use rdkafka::admin::NewTopic;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::Message;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);
/// A window's transaction (a few records) is open for well under this.
const TXN_TIMEOUT_MS: u32 = 60_000;

/// The state record: the project's windows are evaluated up to `evaluated_until` (exclusive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Progress {
    pub(crate) v: u32,
    pub(crate) project_id: String,
    pub(crate) window_seconds: u32,
    /// Epoch seconds: the end of the last window evaluated.
    pub(crate) evaluated_until: u32,
    /// That window's alerts, resolved by the next window (absent in records of releases
    /// before resolutions, read as none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) open: Vec<OpenAlert>,
}

fn state_key(project: &str, window_seconds: u32) -> String {
    serde_json::json!([project, window_seconds]).to_string()
}

/// The other record of the state topic: destination `destination` has dealt with (delivered
/// or dead-lettered) every record of `topic`/`partition` before `next_offset`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Notified {
    pub(crate) v: u32,
    pub(crate) kind: NotifiedKind,
    pub(crate) topic: String,
    pub(crate) destination: String,
    pub(crate) partition: i32,
    pub(crate) next_offset: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum NotifiedKind {
    Notified,
}

impl Notified {
    pub(crate) fn key(&self) -> String {
        serde_json::json!(["notified", self.topic, self.destination, self.partition]).to_string()
    }
}

/// What the state topic says: each project's progress, and each destination's.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) progress: BTreeMap<String, (u32, Vec<OpenAlert>)>,
    /// (destination, partition) → next offset, for the configured alert topic.
    pub(crate) notified: BTreeMap<(String, i32), i64>,
}

/// Create the alert topic and the (compacted, one partition) state topic if missing.
pub(crate) async fn ensure_topics(
    kafka: &KafkaConfig,
    fleet: &FleetConfig,
) -> Result<(), FleetError> {
    if !kafka.topics.create {
        return Ok(());
    }
    let admin = topics::admin(kafka)?;
    let repl = || topics::replication(kafka);
    let mut new = vec![
        NewTopic::new(&fleet.alert_topic, kafka.topics.partitions, repl()),
        NewTopic::new(&fleet.state_topic, 1, repl()).set("cleanup.policy", "compact"),
    ];
    if !fleet.notify.destinations.is_empty() {
        new.push(NewTopic::new(&fleet.notify.dlq_topic, 1, repl()));
    }
    Ok(topics::create(&admin, &new).await?)
}

/// A transactional producer: a window's alerts and its progress record commit together, so a
/// crash leaves either both or neither, and a restart neither repeats nor skips an alert.
pub(crate) struct Publisher {
    producer: FutureProducer,
    alert_topic: String,
    state_topic: String,
}

impl Publisher {
    /// Fences any earlier instance with the same transactional id (and aborts its open window).
    pub(crate) fn new(
        kafka: &KafkaConfig,
        fleet: &FleetConfig,
        database: &str,
    ) -> Result<Self, FleetError> {
        let mut cc = producer_config(kafka, &[]);
        set_transactional(&mut cc, &fleet.transactional_id(database), TXN_TIMEOUT_MS);
        let producer: FutureProducer = cc.create()?;
        producer.init_transactions(TIMEOUT)?;
        Ok(Self {
            producer,
            alert_topic: fleet.alert_topic.clone(),
            state_topic: fleet.state_topic.clone(),
        })
    }

    /// Alerts and resolutions of one window plus the progress past it, in one transaction,
    /// aborted on any error (the window is then evaluated again at the next pass, to the same
    /// bytes).
    pub(crate) async fn publish(
        &self,
        alerts: &[FleetAlert],
        resolved: &[FleetAlertResolved],
        progress: &Progress,
    ) -> Result<(), FleetError> {
        let p = &self.producer;
        tokio::task::block_in_place(|| p.begin_transaction())?;
        let res = match self.send_all(alerts, resolved, progress).await {
            Ok(()) => tokio::task::block_in_place(|| p.commit_transaction(TIMEOUT))
                .map_err(FleetError::from),
            Err(e) => Err(e),
        };
        if res.is_err() {
            // Fails too when the producer is fenced or broken; the first error says why.
            let _ = tokio::task::block_in_place(|| p.abort_transaction(TIMEOUT));
        }
        res
    }

    async fn send_all(
        &self,
        alerts: &[FleetAlert],
        resolved: &[FleetAlertResolved],
        progress: &Progress,
    ) -> Result<(), FleetError> {
        // Encoded first: the sends borrow keys and payloads until they are acknowledged.
        let mut records: Vec<(&str, String, Vec<u8>)> =
            Vec::with_capacity(resolved.len() + alerts.len() + 1);
        // Resolutions first: an alert superseded by one of this window is resolved before its
        // successor fires (same key, same partition, so readers see that order).
        for r in resolved {
            let payload = serde_json::to_vec(r).map_err(FleetError::Encode)?;
            records.push((&self.alert_topic, r.key().to_string(), payload));
        }
        for a in alerts {
            let payload = serde_json::to_vec(a).map_err(FleetError::Encode)?;
            records.push((&self.alert_topic, a.key().to_string(), payload));
        }
        let payload = serde_json::to_vec(progress).map_err(FleetError::Encode)?;
        records.push((
            &self.state_topic,
            state_key(&progress.project_id, progress.window_seconds),
            payload,
        ));
        let sends = records.iter().map(|(topic, key, payload)| {
            self.producer
                .send(FutureRecord::to(topic).key(key).payload(payload), TIMEOUT)
        });
        for r in futures::future::join_all(sends).await {
            r.map_err(|(e, _)| FleetError::Kafka(e))?;
        }
        Ok(())
    }
}

/// Every project's progress for windows of `window_seconds`, and every destination's for the
/// alert topic, from the committed state records. Read after [`Publisher::new`], which has
/// aborted a crashed predecessor's open transaction.
pub(crate) fn read_state(kafka: &KafkaConfig, fleet: &FleetConfig) -> Result<State, FleetError> {
    let mut out = State::default();
    let props = kafka.client_props();
    // A topic created a moment ago may not be in the metadata yet: its errors are retried.
    read_to_end::<FleetError>(&props, &fleet.state_topic, 0, TIMEOUT, |msg| {
        let Some(p) = msg.payload() else {
            return Ok(());
        };
        let bad = |e: serde_json::Error| FleetError::State {
            offset: msg.offset(),
            why: e.to_string(),
        };
        // Progress records have no `kind` (they predate the others).
        let v: serde_json::Value = serde_json::from_slice(p).map_err(bad)?;
        if v.get("kind").is_some() {
            let n: Notified = serde_json::from_value(v).map_err(bad)?;
            if n.topic == fleet.alert_topic {
                out.notified
                    .insert((n.destination, n.partition), n.next_offset);
            }
        } else {
            let rec: Progress = serde_json::from_value(v).map_err(bad)?;
            if rec.window_seconds == fleet.window_seconds {
                out.progress
                    .insert(rec.project_id, (rec.evaluated_until, rec.open));
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// A transactional producer for the notifier: each delivery's progress record, with its dead
/// letter when there is one, commits alone, so a restart neither repeats a delivered alert
/// nor dead-letters one twice.
pub(crate) struct NotifyLog {
    producer: FutureProducer,
    state_topic: String,
    dlq_topic: String,
    /// One transaction at a time; destinations take turns.
    lock: tokio::sync::Mutex<()>,
}

impl NotifyLog {
    pub(crate) fn new(
        kafka: &KafkaConfig,
        fleet: &FleetConfig,
        database: &str,
    ) -> Result<Self, FleetError> {
        let mut cc = producer_config(kafka, &[]);
        set_transactional(
            &mut cc,
            &fleet.notify_transactional_id(database),
            TXN_TIMEOUT_MS,
        );
        let producer: FutureProducer = cc.create()?;
        producer.init_transactions(TIMEOUT)?;
        Ok(Self {
            producer,
            state_topic: fleet.state_topic.clone(),
            dlq_topic: fleet.notify.dlq_topic.clone(),
            lock: tokio::sync::Mutex::new(()),
        })
    }

    /// Record `progress`, with `dead_letter` (key, payload) if any, in one transaction.
    pub(crate) async fn record(
        &self,
        progress: &Notified,
        dead_letter: Option<(&str, Vec<u8>)>,
    ) -> Result<(), FleetError> {
        let _turn = self.lock.lock().await;
        let p = &self.producer;
        let payload = serde_json::to_vec(progress).map_err(FleetError::Encode)?;
        let key = progress.key();
        let dlq_key = dead_letter.as_ref().map(|(k, _)| k.to_string());
        tokio::task::block_in_place(|| p.begin_transaction())?;
        let mut sends = vec![p.send(
            FutureRecord::to(&self.state_topic)
                .key(&key)
                .payload(&payload),
            TIMEOUT,
        )];
        if let (Some((_, body)), Some(k)) = (&dead_letter, &dlq_key) {
            sends.push(p.send(
                FutureRecord::to(&self.dlq_topic).key(k).payload(body),
                TIMEOUT,
            ));
        }
        let mut res = Ok(());
        for r in futures::future::join_all(sends).await {
            if let Err((e, _)) = r {
                res = Err(FleetError::Kafka(e));
            }
        }
        let res = match res {
            Ok(()) => tokio::task::block_in_place(|| p.commit_transaction(TIMEOUT))
                .map_err(FleetError::from),
            Err(e) => Err(e),
        };
        if res.is_err() {
            let _ = tokio::task::block_in_place(|| p.abort_transaction(TIMEOUT));
        }
        res
    }
}
