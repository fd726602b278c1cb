//! The Kafka section: how every client eddy creates reaches the brokers, and the topics it reads,
//! writes and creates. `source/` and `emit/` take this and nothing else; `worker/`, `ingest/`,
//! `fleet/`, `ui/` and `agent/` hand it down to them.
use super::ConfigError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How output events, state and offsets reach Kafka.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// Signals go out as soon as they are detected; offsets are committed after ClickHouse and
    /// the broker acknowledged what they cover. A crash may re-publish exact duplicates.
    #[default]
    AtLeastOnce,
    /// Output events, changelog records and offsets commit in one Kafka transaction (KIP-447).
    /// Readers with `isolation.level=read_committed` see every event exactly once.
    ExactlyOnce,
}

/// How long a client goes without any reachable broker before it starts over from
/// `bootstrap.servers`. librdkafka forgets a broker that a metadata answer leaves out (a KRaft
/// controller briefly fences a broker that froze or restarted), and with the only broker it knew
/// forgotten it waits `metadata.recovery.rebootstrap.trigger.ms`, five minutes by default,
/// before it looks again: five minutes in which a worker consumes nothing. Every client eddy
/// makes takes this unless its table sets the property.
pub(crate) const REBOOTSTRAP: (&str, &str) = ("metadata.recovery.rebootstrap.trigger.ms", "10000");

/// No `Debug`: it holds the SASL password (print [`super::Config::redacted`] instead).
#[derive(Clone, PartialEq)]
pub struct KafkaConfig {
    /// `kafka_brokers`.
    pub brokers: String,
    pub group_id: String,
    pub session_timeout_ms: u32,
    /// `kafka_consumer` / `kafka_producer`: raw librdkafka properties passed through to the
    /// consumer / producer.
    pub(crate) consumer: BTreeMap<String, String>,
    pub producer: BTreeMap<String, String>,
    /// `kafka_security_protocol`, `kafka_sasl_*`, `kafka_ssl_ca_location`: Kafka security for
    /// every client (consumer, producer, topic admin, changelog restore), as top-level keys so
    /// that the environment can set them (`EDDY_KAFKA_SASL_PASSWORD`...). Each is the librdkafka
    /// property of the same name (`security.protocol`, `sasl.mechanism`, `sasl.username`,
    /// `sasl.password`, `ssl.ca.location`) and, when set, overrides that property in
    /// `[kafka_consumer]` / `[kafka_producer]`.
    pub security_protocol: Option<String>,
    pub sasl_mechanism: Option<String>,
    pub sasl_username: Option<String>,
    /// A secret: masked in `redacted()` and never logged.
    pub sasl_password: Option<String>,
    pub ssl_ca_location: Option<String>,
    pub delivery: Delivery,
    /// Transactional id for `exactly_once`; must be unique per worker process and stable across
    /// its restarts (e.g. the pod name). Default: `<group_id>-<hostname>-<pid>`.
    pub(crate) transactional_id: Option<String>,
    pub(crate) transaction_timeout_ms: u32,
    /// A dead letter carries at most this many bytes of the original payload (and 1 KiB of its
    /// key); a longer one is cut and marked `eddy.truncated=true` with `eddy.original_size` and
    /// `eddy.original_sha256`. The default fits librdkafka's and the broker's 1 MB defaults;
    /// raise it together with the producer's `message.max.bytes` and the DLQ topic's
    /// `max.message.bytes` to keep every original whole.
    pub dlq_max_payload_bytes: usize,
    pub topics: TopicsConfig,
}

/// The worker's topics, and how eddy creates them.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicsConfig {
    /// `input_topic`, `output_topic`, `dlq_topic`.
    pub input: String,
    pub output: String,
    pub dlq: String,
    /// `changelog_topic`: compacted state changelog, co-partitioned with the input. Default:
    /// `<group_id>.changelog` (see [`KafkaConfig::changelog_topic`]).
    pub(crate) changelog: Option<String>,
    /// `create_topics`: create missing topics (input, output, dead-letter, changelog) with
    /// `topic_partitions` partitions.
    pub(crate) create: bool,
    pub partitions: i32,
    /// `topic_replication`: replication factor of the topics eddy creates. Unset: the broker's
    /// own `default.replication.factor` (Kafka >= 2.4), so a cluster's policy applies.
    pub(crate) replication: Option<i32>,
    /// `topic_max_message_bytes`: topic-level `max.message.bytes` for the input and dead-letter
    /// topics eddy creates (unset: the broker's default, about 1 MB). Existing topics are not
    /// altered.
    pub max_message_bytes: Option<u32>,
}

impl Default for KafkaConfig {
    fn default() -> Self {
        Self {
            brokers: "127.0.0.1:9092".into(),
            group_id: "eddy".into(),
            session_timeout_ms: 45_000,
            consumer: BTreeMap::new(),
            producer: BTreeMap::new(),
            security_protocol: None,
            sasl_mechanism: None,
            sasl_username: None,
            sasl_password: None,
            ssl_ca_location: None,
            delivery: Delivery::AtLeastOnce,
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            dlq_max_payload_bytes: 900_000,
            topics: TopicsConfig::default(),
        }
    }
}

impl Default for TopicsConfig {
    fn default() -> Self {
        Self {
            input: "agent.steps".into(),
            output: "agent.signals".into(),
            dlq: "agent.steps.dlq".into(),
            changelog: None,
            create: true,
            partitions: 12,
            replication: None,
            max_message_bytes: None,
        }
    }
}

impl KafkaConfig {
    pub(crate) fn transactional_id(&self) -> String {
        self.transactional_id.clone().unwrap_or_else(|| {
            let host = std::fs::read_to_string("/etc/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "host".into());
            format!("{}-{}-{}", self.group_id, host, std::process::id())
        })
    }

    /// Connection and security properties (`bootstrap.servers`, `security.*`, `sasl.*`,
    /// `ssl.*`) for eddy's other Kafka clients (topic admin, changelog restore), taken from
    /// `[kafka_consumer]` and the `kafka_security_*` / `kafka_sasl_*` / `kafka_ssl_*` keys so
    /// SASL/TLS set there reaches every client.
    pub fn client_props(&self) -> Vec<(String, String)> {
        let mut m = BTreeMap::new();
        m.insert("bootstrap.servers".to_string(), self.brokers.clone());
        let (k, v) = REBOOTSTRAP;
        m.insert(
            k.to_string(),
            self.consumer
                .get(k)
                .cloned()
                .unwrap_or_else(|| v.to_string()),
        );
        for (k, val) in &self.consumer {
            if is_security_property(k) {
                m.insert(k.clone(), val.clone());
            }
        }
        for (k, val) in self.security_props() {
            m.insert(k.to_string(), val);
        }
        m.into_iter().collect()
    }

    /// The librdkafka properties set by the top-level Kafka security keys; every client applies
    /// them after its own table, so they win over `[kafka_consumer]` / `[kafka_producer]`.
    pub(crate) fn security_props(&self) -> Vec<(&'static str, String)> {
        [
            ("security.protocol", &self.security_protocol),
            ("sasl.mechanism", &self.sasl_mechanism),
            ("sasl.username", &self.sasl_username),
            ("sasl.password", &self.sasl_password),
            ("ssl.ca.location", &self.ssl_ca_location),
        ]
        .into_iter()
        // An empty value (`EDDY_KAFKA_SSL_CA_LOCATION=`) means unset.
        .filter_map(|(k, v)| v.as_ref().filter(|v| !v.is_empty()).map(|v| (k, v.clone())))
        .collect()
    }

    /// The properties the consumer (`[kafka_consumer]`) or producer (`[kafka_producer]`) gets
    /// on top of eddy's own settings: its table, then the top-level security keys.
    pub(crate) fn props_for(&self, table: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut m = table.clone();
        let (k, v) = REBOOTSTRAP;
        m.entry(k.to_string()).or_insert_with(|| v.to_string());
        for (k, v) in self.security_props() {
            m.insert(k.to_string(), v);
        }
        m
    }

    pub fn changelog_topic(&self) -> String {
        self.topics
            .changelog
            .clone()
            .unwrap_or_else(|| format!("{}.changelog", self.group_id))
    }

    /// The brokers and the worker's topic names.
    pub(super) fn validate_topics(&self) -> Result<(), ConfigError> {
        if self.brokers.trim().is_empty() {
            return bad("kafka_brokers (EDDY_KAFKA_BROKERS) is empty".into());
        }
        let topics = [
            ("input_topic", &self.topics.input),
            ("output_topic", &self.topics.output),
            ("dlq_topic", &self.topics.dlq),
        ];
        for (name, t) in topics {
            if t.is_empty() || !is_topic_name(t) {
                return bad(format!("{name} `{t}` is not a valid Kafka topic name"));
            }
        }
        Ok(())
    }

    /// `[kafka_consumer]` / `[kafka_producer]` against eddy's own properties, and SASL
    /// credentials that come in halves.
    pub(super) fn validate_clients(&self) -> Result<(), ConfigError> {
        for (name, table, reserved) in [
            ("kafka_consumer", &self.consumer, RESERVED_CONSUMER),
            ("kafka_producer", &self.producer, RESERVED_PRODUCER),
        ] {
            if let Some((k, why)) = reserved
                .iter()
                .find(|(k, _)| table.keys().any(|t| t.eq_ignore_ascii_case(k)))
            {
                return bad(format!("[{name}] must not set `{k}`: {why}"));
            }
            let props = self.props_for(table);
            let has = |k: &str| props.get(k).is_some_and(|v| !v.is_empty());
            // `sasl.mechanisms` is librdkafka's older spelling of `sasl.mechanism`.
            let mechanism = props
                .get("sasl.mechanism")
                .or_else(|| props.get("sasl.mechanisms"))
                .map(|m| m.to_ascii_uppercase());
            let user_password =
                matches!(mechanism.as_deref(), Some(m) if m == "PLAIN" || m.starts_with("SCRAM-"));
            if user_password && has("sasl.username") != has("sasl.password") {
                let missing = if has("sasl.username") {
                    "sasl.password (kafka_sasl_password, EDDY_KAFKA_SASL_PASSWORD)"
                } else {
                    "sasl.username (kafka_sasl_username, EDDY_KAFKA_SASL_USERNAME)"
                };
                return bad(format!(
                    "{name}: SASL {} needs a username and a password; {missing} is not set",
                    mechanism.unwrap_or_default()
                ));
            }
        }
        Ok(())
    }

    /// How topics are created.
    pub(super) fn validate_creation(&self) -> Result<(), ConfigError> {
        if self.topics.partitions < 1 {
            return bad("topic_partitions must be >= 1".into());
        }
        if let Some(r) = self.topics.replication.filter(|r| *r < 1) {
            return bad(format!(
                "topic_replication must be >= 1 (or unset for the broker's default), not {r}"
            ));
        }
        Ok(())
    }
}

fn bad(m: String) -> Result<(), ConfigError> {
    Err(ConfigError::Invalid(m))
}

/// Characters Kafka accepts in a topic name.
pub(super) fn is_topic_name(t: &str) -> bool {
    t.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// librdkafka consumer properties eddy sets itself because its guarantees rest on them: an entry
/// in `[kafka_consumer]` would silently win over eddy's value.
const RESERVED_CONSUMER: &[(&str, &str)] = &[
    ("group.id", "set group_id (EDDY_GROUP_ID) instead"),
    (
        "bootstrap.servers",
        "set kafka_brokers (EDDY_KAFKA_BROKERS) instead",
    ),
    (
        "enable.auto.commit",
        "eddy commits an offset only after ClickHouse and the output topic hold what it covers",
    ),
    (
        "enable.auto.offset.store",
        "eddy stores an offset only after ClickHouse and the output topic hold what it covers",
    ),
    (
        "isolation.level",
        "eddy reads read_committed so that aborted transactions never reach the detectors",
    ),
];

/// librdkafka producer properties eddy sets itself for its delivery modes.
const RESERVED_PRODUCER: &[(&str, &str)] = &[
    (
        "bootstrap.servers",
        "set kafka_brokers (EDDY_KAFKA_BROKERS) instead",
    ),
    (
        "enable.idempotence",
        "eddy's outputs need it on: retries must never duplicate or reorder a signal",
    ),
    (
        "acks",
        "offsets are committed only after every in-sync replica has the output (acks=all)",
    ),
    (
        "transactional.id",
        "set transactional_id (EDDY_TRANSACTIONAL_ID) with delivery = \"exactly_once\"",
    ),
    (
        "transaction.timeout.ms",
        "set transaction_timeout_ms (EDDY_TRANSACTION_TIMEOUT_MS) instead",
    ),
    (
        "partitioner",
        "outputs and the changelog are partitioned like Kafka's Java clients (murmur2)",
    ),
];

/// Properties that say how to reach and authenticate to the brokers, which every client needs.
fn is_security_property(k: &str) -> bool {
    ["security.", "sasl.", "ssl."]
        .iter()
        .any(|p| k.starts_with(p))
}
