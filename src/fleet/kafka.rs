//! The Kafka side of `eddy fleet-watch`: topics, the progress record, and the transaction that
//! publishes a window's alerts together with the progress past it.
use super::alert::FleetAlert;
use super::FleetConfig;
use super::FleetError;
use crate::config::KafkaConfig;
use crate::source::compacted::read_to_end;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientConfig, Message};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

/// The state record: the project's windows are evaluated up to `evaluated_until` (exclusive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub v: u32,
    pub project_id: String,
    pub window_seconds: u32,
    /// Epoch seconds: the end of the last window evaluated.
    pub evaluated_until: u32,
}

fn state_key(project: &str, window_seconds: u32) -> String {
    serde_json::json!([project, window_seconds]).to_string()
}

/// Create the alert topic and the (compacted, one partition) state topic if missing.
pub async fn ensure_topics(kafka: &KafkaConfig, fleet: &FleetConfig) -> Result<(), FleetError> {
    if !kafka.topics.create {
        return Ok(());
    }
    let mut cc = ClientConfig::new();
    for (k, v) in kafka.client_props() {
        cc.set(k, v);
    }
    let admin: AdminClient<DefaultClientContext> = cc.create()?;
    // -1 asks the broker for its `default.replication.factor`.
    let repl = || TopicReplication::Fixed(kafka.topics.replication.unwrap_or(-1));
    let topics = [
        NewTopic::new(&fleet.alert_topic, kafka.topics.partitions, repl()),
        NewTopic::new(&fleet.state_topic, 1, repl()).set("cleanup.policy", "compact"),
    ];
    let results = admin
        .create_topics(
            &topics,
            &AdminOptions::new().operation_timeout(Some(TIMEOUT)),
        )
        .await?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => return Err(FleetError::CreateTopic { topic, code }),
        }
    }
    Ok(())
}

/// A transactional producer: a window's alerts and its progress record commit together, so a
/// crash leaves either both or neither, and a restart neither repeats nor skips an alert.
pub struct Publisher {
    producer: FutureProducer,
    alert_topic: String,
    state_topic: String,
}

impl Publisher {
    /// Fences any earlier instance with the same transactional id (and aborts its open window).
    pub fn new(
        kafka: &KafkaConfig,
        fleet: &FleetConfig,
        database: &str,
    ) -> Result<Self, FleetError> {
        let mut cc = ClientConfig::new();
        cc.set("bootstrap.servers", &kafka.brokers)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("partitioner", "murmur2_random")
            .set("transactional.id", fleet.transactional_id(database))
            .set("transaction.timeout.ms", "60000")
            .set("message.timeout.ms", "55000");
        for (k, v) in kafka.props_for(&kafka.producer) {
            cc.set(k, v);
        }
        let producer: FutureProducer = cc.create()?;
        producer.init_transactions(TIMEOUT)?;
        Ok(Self {
            producer,
            alert_topic: fleet.alert_topic.clone(),
            state_topic: fleet.state_topic.clone(),
        })
    }

    /// Alerts of one window plus the progress past it, in one transaction, aborted on any
    /// error (the window is then evaluated again at the next pass, to the same bytes).
    pub async fn publish(
        &self,
        alerts: &[FleetAlert],
        progress: &Progress,
    ) -> Result<(), FleetError> {
        let p = &self.producer;
        tokio::task::block_in_place(|| p.begin_transaction())?;
        let res = match self.send_all(alerts, progress).await {
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

    async fn send_all(&self, alerts: &[FleetAlert], progress: &Progress) -> Result<(), FleetError> {
        // Encoded first: the sends borrow keys and payloads until they are acknowledged.
        let mut records: Vec<(&str, String, Vec<u8>)> = Vec::with_capacity(alerts.len() + 1);
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

/// Every project's progress for windows of `window_seconds`, from the committed state records.
/// Read after [`Publisher::new`], which has aborted a crashed predecessor's open transaction.
pub fn read_progress(
    kafka: &KafkaConfig,
    fleet: &FleetConfig,
) -> Result<BTreeMap<String, u32>, FleetError> {
    let mut out = BTreeMap::new();
    let props = kafka.client_props();
    // A topic created a moment ago may not be in the metadata yet: its errors are retried.
    read_to_end::<FleetError>(&props, &fleet.state_topic, 0, TIMEOUT, |msg| {
        if let Some(p) = msg.payload() {
            let rec: Progress = serde_json::from_slice(p).map_err(|e| FleetError::State {
                offset: msg.offset(),
                why: e.to_string(),
            })?;
            if rec.window_seconds == fleet.window_seconds {
                out.insert(rec.project_id, rec.evaluated_until);
            }
        }
        Ok(())
    })?;
    Ok(out)
}
