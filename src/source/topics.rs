//! Topic set-up, for every command that owns topics: the worker's input, output, dead letters
//! and changelog (`super::ensure_topics`), fleet-watch's alerts, state and notification dead
//! letters (`fleet::kafka::ensure_topics`). Created only when missing, with the brokers'
//! `default.replication.factor` unless `topic_replication` is set.
use super::SourceError;
use crate::config::KafkaConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::RDKafkaErrorCode;
use std::time::Duration;

pub(crate) type Admin = AdminClient<DefaultClientContext>;

/// An admin client with the configured connection and security properties.
pub(crate) fn admin(kafka: &KafkaConfig) -> Result<Admin, SourceError> {
    let mut cc = ClientConfig::new();
    for (k, v) in kafka.client_props() {
        cc.set(k, v);
    }
    Ok(cc.create()?)
}

/// The replication of a topic eddy creates: -1 asks the broker for its
/// `default.replication.factor` (CreateTopics v4, KIP-464).
pub(crate) fn replication(kafka: &KafkaConfig) -> TopicReplication<'static> {
    TopicReplication::Fixed(kafka.topics.replication.unwrap_or(-1))
}

/// Create `topics`; one that exists already is left as it is.
pub(crate) async fn create(admin: &Admin, topics: &[NewTopic<'_>]) -> Result<(), SourceError> {
    let results = admin
        .create_topics(
            topics,
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => {
                return Err(SourceError::CreateTopic {
                    topic,
                    source: code,
                })
            }
        }
    }
    Ok(())
}
