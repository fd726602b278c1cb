//! Configuration: defaults → TOML file → `EDDY_*` environment → command-line flags.
//!
//! Top-level keys map one-to-one to env names (`kafka_brokers` ↔ `EDDY_KAFKA_BROKERS`); nested
//! sections use a double underscore (`EDDY_ENGINE__IDLE_TIMEOUT_MS`).
//!
//! librdkafka property names contain dots, which env names cannot carry, so the Kafka security
//! settings also exist as top-level keys (`kafka_sasl_password` ↔ `EDDY_KAFKA_SASL_PASSWORD`,
//! see [`Config::kafka_security_props`]); they reach every Kafka client eddy creates.
use crate::engine::EngineConfig;
use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error("cannot load configuration: {0}")]
    Load(#[from] Box<figment::Error>),
}

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

#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub delivery: Delivery,
    /// Transactional id for `exactly_once`; must be unique per worker process and stable across
    /// its restarts (e.g. the pod name). Default: `<group_id>-<hostname>-<pid>`.
    pub transactional_id: Option<String>,
    pub transaction_timeout_ms: u32,
    pub kafka_brokers: String,
    pub input_topic: String,
    pub output_topic: String,
    pub dlq_topic: String,
    /// Compacted state changelog, co-partitioned with the input. Default: `<group_id>.changelog`.
    pub changelog_topic: Option<String>,
    pub group_id: String,
    /// Create missing topics (input, output, dead-letter, changelog) with this many partitions.
    pub create_topics: bool,
    pub topic_partitions: i32,
    /// Replication factor of the topics eddy creates. Unset: the broker's own
    /// `default.replication.factor` (Kafka >= 2.4), so a cluster's policy applies.
    pub topic_replication: Option<i32>,
    /// Apply pending ClickHouse migrations when `eddy run` starts. Turn it off when eddy's
    /// ClickHouse account may not run DDL: an administrator runs `eddy migrate` (or applies
    /// `eddy migrate --print`) instead, and the worker checks that the tables are there.
    pub migrate_on_start: bool,
    pub session_timeout_ms: u32,
    pub clickhouse_url: String,
    pub clickhouse_database: String,
    pub clickhouse_user: Option<String>,
    pub clickhouse_password: Option<String>,
    /// PEM file with the CA certificate(s) that sign the server's certificate, for an
    /// `https://` `clickhouse_url` behind a private CA. Unset: the public web roots
    /// (webpki-roots). When set, only these CAs are trusted.
    pub clickhouse_ca_file: Option<String>,
    /// Cluster name (from the servers' `remote_servers`): `eddy migrate` renders `ON CLUSTER`,
    /// Replicated*MergeTree `<table>_local` tables and Distributed `<table>`s sharded by run.
    pub clickhouse_cluster: Option<String>,
    /// Keep rows this many days (a TTL on event time, ClickHouse >= 20.3); 0 keeps everything.
    /// Applied when the tables are created.
    pub clickhouse_retention_days: u32,
    /// A flush (ClickHouse insert → output delivery → changelog → offset commit) happens when a
    /// batch holds this many input messages, or `flush_interval_ms` after its first message.
    /// One flush runs at a time beside processing; reading pauses while a full batch waits for
    /// it, so at most two batches are held in memory.
    pub batch_max_messages: usize,
    pub flush_interval_ms: u64,
    /// Raw librdkafka properties passed through to the consumer / producer.
    pub kafka_consumer: BTreeMap<String, String>,
    pub kafka_producer: BTreeMap<String, String>,
    /// Kafka security for every client (consumer, producer, topic admin, changelog restore),
    /// as top-level keys so that the environment can set them (`EDDY_KAFKA_SASL_PASSWORD`...).
    /// Each is the librdkafka property of the same name (`security.protocol`, `sasl.mechanism`,
    /// `sasl.username`, `sasl.password`, `ssl.ca.location`) and, when set, overrides that
    /// property in `[kafka_consumer]` / `[kafka_producer]`.
    pub kafka_security_protocol: Option<String>,
    pub kafka_sasl_mechanism: Option<String>,
    pub kafka_sasl_username: Option<String>,
    /// A secret: masked in `redacted()` and never logged.
    pub kafka_sasl_password: Option<String>,
    pub kafka_ssl_ca_location: Option<String>,
    /// Admin HTTP server (/metrics, /livez, /readyz). Loopback by default; in a pod, 0.0.0.0.
    pub admin_addr: String,
    /// After SIGTERM/SIGINT the worker flushes, commits and exits; past this grace period it
    /// exits anyway (non-zero). A second signal exits at once. Keep it below the orchestrator's
    /// own grace period (Kubernetes: 30 s).
    pub shutdown_grace_ms: u64,
    /// When partitions are taken away in a rebalance, the worker first flushes and commits what
    /// it did for them (so the next owner starts exactly there), waiting at most this long; past
    /// it they are dropped uncommitted and the next owner redoes that batch. Keep it well below
    /// `max.poll.interval.ms` (librdkafka's rebalance timeout, 300 s by default).
    pub revoke_drain_ms: u64,
    /// Print a progress line every this many seconds (0 = never).
    pub progress_interval_s: u64,
    /// `eddy ingest-http` (keelwave-compatible ingest API) listens here.
    pub ingest_addr: String,
    /// `eddy ui` (the read-only loop explorer over ClickHouse) listens here.
    pub ui_addr: String,
    /// `eddy ingest-http` API keys (`kw_...`) → project id. The keys are secrets: never logged,
    /// masked in `redacted()`.
    pub ingest_api_keys: BTreeMap<String, String>,
    /// `eddy ingest-http`'s admin server (/metrics, /livez, /readyz); unset, none is started
    /// (`admin_addr` is the worker's, which may run on the same host).
    pub ingest_admin_addr: Option<String>,
    /// `eddy ingest-otlp` (OTLP/HTTP traces receiver, `POST /v1/traces`) listens here.
    pub otlp_addr: String,
    /// `eddy ingest-otlp`: the project of spans whose resource has no `eddy.project.id` (when
    /// `ingest_api_keys` is set, the key names the project instead).
    pub otlp_default_project: String,
    /// `eddy ingest-otlp`'s admin server (/metrics, /livez, /readyz); unset, none is started.
    pub otlp_admin_addr: Option<String>,
    /// `eddy ingest-http`'s verdict table (the `/verdict` and `/signals` routes): how far back
    /// it reads the signals topic at start, how many runs and for how long it remembers.
    pub verdicts: crate::verdict::VerdictConfig,
    /// Input messages larger than this are dead-lettered (`too_large`) without being parsed.
    pub max_message_bytes: usize,
    /// A dead letter carries at most this many bytes of the original payload (and 1 KiB of its
    /// key); a longer one is cut and marked `eddy.truncated=true` with `eddy.original_size` and
    /// `eddy.original_sha256`. The default fits librdkafka's and the broker's 1 MB defaults;
    /// raise it together with the producer's `message.max.bytes` and the DLQ topic's
    /// `max.message.bytes` to keep every original whole.
    pub dlq_max_payload_bytes: usize,
    /// Topic-level `max.message.bytes` for the input and dead-letter topics eddy creates
    /// (unset: the broker's default, about 1 MB). Existing topics are not altered.
    pub topic_max_message_bytes: Option<u32>,
    pub engine: EngineConfig,
    /// `eddy fleet-watch`: fleet regression alerts over the rollups (docs/fleet-alerts.md).
    pub fleet: crate::fleet::FleetConfig,
}

/// Debug output ends up in logs: it shows the redacted form only.
impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Config({})", self.redacted())
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            delivery: Delivery::AtLeastOnce,
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            kafka_brokers: "127.0.0.1:9092".into(),
            input_topic: "agent.steps".into(),
            output_topic: "agent.signals".into(),
            dlq_topic: "agent.steps.dlq".into(),
            changelog_topic: None,
            group_id: "eddy".into(),
            create_topics: true,
            topic_partitions: 12,
            topic_replication: None,
            migrate_on_start: true,
            session_timeout_ms: 45_000,
            clickhouse_url: "http://127.0.0.1:8123".into(),
            clickhouse_database: "eddy".into(),
            clickhouse_user: None,
            clickhouse_password: None,
            clickhouse_ca_file: None,
            clickhouse_cluster: None,
            clickhouse_retention_days: 0,
            batch_max_messages: 50_000,
            flush_interval_ms: 250,
            kafka_consumer: BTreeMap::new(),
            kafka_producer: BTreeMap::new(),
            kafka_security_protocol: None,
            kafka_sasl_mechanism: None,
            kafka_sasl_username: None,
            kafka_sasl_password: None,
            kafka_ssl_ca_location: None,
            admin_addr: "127.0.0.1:9464".into(),
            shutdown_grace_ms: 25_000,
            revoke_drain_ms: 15_000,
            progress_interval_s: 10,
            ingest_addr: "127.0.0.1:8080".into(),
            ui_addr: "127.0.0.1:8090".into(),
            ingest_api_keys: BTreeMap::new(),
            ingest_admin_addr: None,
            otlp_addr: "127.0.0.1:4318".into(),
            otlp_default_project: "default".into(),
            otlp_admin_addr: None,
            verdicts: crate::verdict::VerdictConfig::default(),
            max_message_bytes: 1024 * 1024,
            dlq_max_payload_bytes: 900_000,
            topic_max_message_bytes: None,
            engine: EngineConfig::default(),
            fleet: crate::fleet::FleetConfig::default(),
        }
    }
}

impl Config {
    /// Layer defaults, an optional TOML file, the environment and explicit overrides.
    pub fn load(file: Option<&Path>, overrides: &[(&str, String)]) -> Result<Self, ConfigError> {
        let mut fig = Figment::from(Serialized::defaults(Config::default()));
        if let Some(f) = file {
            if !f.exists() {
                return Err(ConfigError::Invalid(format!(
                    "config file {} does not exist",
                    f.display()
                )));
            }
            fig = fig.merge(Toml::file(f));
        }
        // Only EDDY_* variables that name a setting are read: orchestrators inject their own
        // (Kubernetes adds EDDY_SERVICE_HOST, EDDY_PORT... for a Service named eddy) and tools
        // use EDDY_* knobs of their own; none of them may stop the worker from starting.
        let known = known_keys();
        let env = Env::prefixed("EDDY_")
            .filter(move |k| {
                let top = k.as_str().split("__").next().unwrap_or_default();
                known.iter().any(|n| n.eq_ignore_ascii_case(top))
            })
            .split("__");
        fig = fig.merge(env);
        // figment reads env values as TOML-like literals, so a password `123456`, `true` or
        // `[x]` would arrive as a number, bool or array and fail to load. Text settings take
        // the variable verbatim instead.
        for key in text_keys() {
            if let Ok(v) = std::env::var(format!("EDDY_{}", key.to_ascii_uppercase())) {
                fig = fig.merge((key, v));
            }
        }
        for (k, v) in overrides {
            fig = fig.merge((*k, v.clone()));
        }
        let cfg: Config = fig.extract().map_err(Box::new)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The effective configuration as JSON with secrets masked, for `eddy config check`.
    pub fn redacted(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        // Ingest API keys are map keys, not values: mask them, keep the projects visible.
        if let Some(serde_json::Value::Object(keys)) = v.get_mut("ingest_api_keys") {
            let masked = std::mem::take(keys)
                .into_iter()
                .enumerate()
                .map(|(i, (_, project))| (format!("kw_***{}", i + 1), project))
                .collect();
            *keys = masked;
        }
        redact(&mut v);
        v
    }

    pub fn transactional_id(&self) -> String {
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
    pub fn kafka_client_props(&self) -> Vec<(String, String)> {
        let mut m = BTreeMap::new();
        m.insert("bootstrap.servers".to_string(), self.kafka_brokers.clone());
        for (k, val) in &self.kafka_consumer {
            if is_security_property(k) {
                m.insert(k.clone(), val.clone());
            }
        }
        for (k, val) in self.kafka_security_props() {
            m.insert(k.to_string(), val);
        }
        m.into_iter().collect()
    }

    /// The librdkafka properties set by the top-level Kafka security keys; every client applies
    /// them after its own table, so they win over `[kafka_consumer]` / `[kafka_producer]`.
    pub fn kafka_security_props(&self) -> Vec<(&'static str, String)> {
        [
            ("security.protocol", &self.kafka_security_protocol),
            ("sasl.mechanism", &self.kafka_sasl_mechanism),
            ("sasl.username", &self.kafka_sasl_username),
            ("sasl.password", &self.kafka_sasl_password),
            ("ssl.ca.location", &self.kafka_ssl_ca_location),
        ]
        .into_iter()
        // An empty value (`EDDY_KAFKA_SSL_CA_LOCATION=`) means unset.
        .filter_map(|(k, v)| v.as_ref().filter(|v| !v.is_empty()).map(|v| (k, v.clone())))
        .collect()
    }

    /// The properties the consumer (`[kafka_consumer]`) or producer (`[kafka_producer]`) gets
    /// on top of eddy's own settings: its table, then the top-level security keys.
    pub fn kafka_props_for(&self, table: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut m = table.clone();
        for (k, v) in self.kafka_security_props() {
            m.insert(k.to_string(), v);
        }
        m
    }

    pub fn changelog_topic(&self) -> String {
        self.changelog_topic
            .clone()
            .unwrap_or_else(|| format!("{}.changelog", self.group_id))
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        if self.kafka_brokers.trim().is_empty() {
            return bad("kafka_brokers (EDDY_KAFKA_BROKERS) is empty".into());
        }
        let topics = [
            ("input_topic", &self.input_topic),
            ("output_topic", &self.output_topic),
            ("dlq_topic", &self.dlq_topic),
        ];
        for (name, t) in topics {
            if t.is_empty()
                || !t
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            {
                return bad(format!("{name} `{t}` is not a valid Kafka topic name"));
            }
        }
        if let Some(why) = self.fleet.problem() {
            return bad(why);
        }
        for (name, t) in [
            ("fleet.alert_topic", &self.fleet.alert_topic),
            ("fleet.state_topic", &self.fleet.state_topic),
        ] {
            if !t
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            {
                return bad(format!("{name} `{t}` is not a valid Kafka topic name"));
            }
            if *t == self.input_topic || *t == self.output_topic || *t == self.dlq_topic {
                return bad(format!("{name} `{t}` must differ from the worker's topics"));
            }
        }
        if self.input_topic == self.output_topic || self.input_topic == self.dlq_topic {
            return bad("input_topic must differ from output_topic and dlq_topic".into());
        }
        if !self
            .clickhouse_database
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
            || self.clickhouse_database.is_empty()
        {
            return bad(format!(
                "clickhouse_database `{}` must be [A-Za-z0-9_]+",
                self.clickhouse_database
            ));
        }
        if let Some(c) = &self.clickhouse_cluster {
            if c.is_empty()
                || !c
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            {
                return bad(format!("clickhouse_cluster `{c}` must be [A-Za-z0-9_.-]+"));
            }
        }
        for (name, table, reserved) in [
            ("kafka_consumer", &self.kafka_consumer, RESERVED_CONSUMER),
            ("kafka_producer", &self.kafka_producer, RESERVED_PRODUCER),
        ] {
            if let Some((k, why)) = reserved
                .iter()
                .find(|(k, _)| table.keys().any(|t| t.eq_ignore_ascii_case(k)))
            {
                return bad(format!("[{name}] must not set `{k}`: {why}"));
            }
            let props = self.kafka_props_for(table);
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
        if let Some(ca) = self.clickhouse_ca_file.as_ref().filter(|c| !c.is_empty()) {
            if !self
                .clickhouse_url
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("https://")
            {
                return bad(format!(
                    "clickhouse_ca_file `{ca}` is set but clickhouse_url is not https://"
                ));
            }
        }
        if let Err(e) = self.engine.detectors.validate() {
            return bad(format!("engine.detectors: {e}"));
        }
        if self.topic_partitions < 1 {
            return bad("topic_partitions must be >= 1".into());
        }
        if let Some(r) = self.topic_replication.filter(|r| *r < 1) {
            return bad(format!(
                "topic_replication must be >= 1 (or unset for the broker's default), not {r}"
            ));
        }
        if self.delivery == Delivery::ExactlyOnce
            && u64::from(self.transaction_timeout_ms) <= self.flush_interval_ms.saturating_mul(4)
        {
            return bad(format!(
                "transaction_timeout_ms ({}) must be well above flush_interval_ms ({})",
                self.transaction_timeout_ms, self.flush_interval_ms
            ));
        }
        if self.max_message_bytes == 0 || self.dlq_max_payload_bytes == 0 {
            return bad("max_message_bytes and dlq_max_payload_bytes must be >= 1".into());
        }
        if self.batch_max_messages == 0 {
            return bad("batch_max_messages must be >= 1".into());
        }
        if self.flush_interval_ms.saturating_mul(2) >= u64::from(self.session_timeout_ms) {
            return bad(format!(
                "flush_interval_ms ({}) must be well below session_timeout_ms ({})",
                self.flush_interval_ms, self.session_timeout_ms
            ));
        }
        Ok(())
    }
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

/// A key names a secret when it mentions a password, secret, token or credential (this covers
/// librdkafka's `sasl.password`, `ssl.key.password`, `sasl.oauthbearer.client.secret`, ...).
fn is_secret_key(k: &str) -> bool {
    let k = k.to_ascii_lowercase();
    [
        "password",
        "secret",
        "token",
        "credential",
        "sasl.jaas",
        "ssl.key.pem",
    ]
    .iter()
    .any(|w| k.contains(w))
}

fn redact(v: &mut serde_json::Value) {
    if let serde_json::Value::Object(m) = v {
        for (k, val) in m.iter_mut() {
            if is_secret_key(k) && !val.is_null() {
                *val = serde_json::Value::String("***".into());
            } else {
                redact(val);
            }
        }
    }
}

/// Top-level settings whose value is text: the string-valued defaults plus the optional ones.
fn text_keys() -> Vec<String> {
    let optional = [
        "transactional_id",
        "changelog_topic",
        "clickhouse_user",
        "clickhouse_password",
        "clickhouse_ca_file",
        "clickhouse_cluster",
        "ingest_admin_addr",
        "otlp_admin_addr",
        "kafka_security_protocol",
        "kafka_sasl_mechanism",
        "kafka_sasl_username",
        "kafka_sasl_password",
        "kafka_ssl_ca_location",
    ];
    let mut keys: Vec<String> = optional.iter().map(|k| k.to_string()).collect();
    if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(Config::default()) {
        keys.extend(m.into_iter().filter(|(_, v)| v.is_string()).map(|(k, _)| k));
    }
    keys
}

fn known_keys() -> Vec<String> {
    match serde_json::to_value(Config::default()) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's own error type
    fn flags_beat_env_and_env_beats_defaults() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("EDDY_INPUT_TOPIC", "from.env");
            jail.set_env("EDDY_GROUP_ID", "g-env");
            jail.set_env("EDDY_ENGINE__IDLE_TIMEOUT_MS", "1234");
            // Not settings: injected by Kubernetes or used by scripts. Must not break start-up.
            jail.set_env("EDDY_SERVICE_HOST", "10.0.0.1");
            jail.set_env("EDDY_PORT", "tcp://10.0.0.1:9464");
            jail.set_env("EDDY_STACK_DIR", "/tmp/x");
            let cfg = Config::load(None, &[("group_id", "g-flag".into())]).unwrap();
            assert_eq!(cfg.input_topic, "from.env");
            assert_eq!(cfg.group_id, "g-flag");
            assert_eq!(cfg.engine.idle_timeout_ms, 1234);
            assert_eq!(cfg.output_topic, "agent.signals");
            Ok(())
        });
    }

    #[test]
    fn secrets_are_masked_in_the_printed_config() {
        let mut cfg = Config {
            clickhouse_password: Some("hunter2".into()),
            ..Config::default()
        };
        cfg.kafka_consumer
            .insert("sasl.password".into(), "s3cret-kafka".into());
        cfg.kafka_producer
            .insert("sasl.username".into(), "svc-eddy".into());
        let shown = cfg.redacted().to_string();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("s3cret-kafka"), "{shown}");
        assert!(
            shown.contains("svc-eddy"),
            "non-secrets stay visible: {shown}"
        );
        // Debug output goes to logs: it must not carry them either.
        let debug = format!("{cfg:?}");
        assert!(
            !debug.contains("hunter2") && !debug.contains("s3cret-kafka"),
            "{debug}"
        );
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's own error type
    fn kafka_security_comes_from_env_and_reaches_every_client() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "eddy.toml",
                r#"
                    kafka_security_protocol = "SASL_SSL"
                    kafka_sasl_mechanism = "SCRAM-SHA-512"
                    [kafka_consumer]
                    "sasl.username" = "from-file"
                    "sasl.password" = "file-secret"
                    "fetch.min.bytes" = "1"
                    [kafka_producer]
                    "linger.ms" = "7"
                "#,
            )?;
            jail.set_env("EDDY_KAFKA_SASL_USERNAME", "svc-eddy");
            jail.set_env("EDDY_KAFKA_SASL_PASSWORD", "env-s3cret");
            jail.set_env("EDDY_KAFKA_SSL_CA_LOCATION", "/etc/eddy/ca.pem");
            jail.set_env("EDDY_CLICKHOUSE_URL", "https://ch.example:8443");
            jail.set_env("EDDY_CLICKHOUSE_CA_FILE", "/etc/eddy/ch-ca.pem");
            jail.set_env("EDDY_CLICKHOUSE_PASSWORD", "ch-s3cret");
            let cfg = Config::load(Some(Path::new("eddy.toml")), &[]).unwrap();
            assert_eq!(
                cfg.clickhouse_ca_file.as_deref(),
                Some("/etc/eddy/ch-ca.pem")
            );
            assert_eq!(cfg.clickhouse_password.as_deref(), Some("ch-s3cret"));
            let want = [
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "svc-eddy"),
                ("sasl.password", "env-s3cret"),
                ("ssl.ca.location", "/etc/eddy/ca.pem"),
            ];
            let consumer = cfg.kafka_props_for(&cfg.kafka_consumer);
            let producer = cfg.kafka_props_for(&cfg.kafka_producer);
            let others: BTreeMap<_, _> = cfg.kafka_client_props().into_iter().collect();
            for (k, v) in want {
                // The env beats the file's table entry (sasl.username / sasl.password).
                assert_eq!(consumer.get(k).map(String::as_str), Some(v), "consumer {k}");
                assert_eq!(producer.get(k).map(String::as_str), Some(v), "producer {k}");
                assert_eq!(others.get(k).map(String::as_str), Some(v), "admin {k}");
            }
            assert_eq!(
                consumer.get("fetch.min.bytes").map(String::as_str),
                Some("1")
            );
            assert_eq!(producer.get("linger.ms").map(String::as_str), Some("7"));
            assert!(!others.contains_key("fetch.min.bytes"), "{others:?}");
            let shown = format!("{} {cfg:?}", cfg.redacted());
            for secret in ["env-s3cret", "file-secret", "ch-s3cret"] {
                assert!(!shown.contains(secret), "{secret} shown: {shown}");
            }
            assert!(shown.contains("svc-eddy"), "{shown}");
            Ok(())
        });
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's own error type
    fn secrets_from_env_are_taken_verbatim() {
        for pw in [
            "123456", "true", "[abc]", "{x = 1}", " spaced ", "a\"b\\c", "1e5",
        ] {
            figment::Jail::expect_with(|jail| {
                jail.set_env("EDDY_KAFKA_SASL_PASSWORD", pw);
                jail.set_env("EDDY_CLICKHOUSE_PASSWORD", pw);
                jail.set_env("EDDY_KAFKA_SASL_USERNAME", "4242");
                jail.set_env("EDDY_GROUP_ID", "12345");
                jail.set_env("EDDY_DELIVERY", "exactly_once");
                let cfg = Config::load(None, &[]).unwrap_or_else(|e| panic!("{pw:?}: {e}"));
                assert_eq!(cfg.kafka_sasl_password.as_deref(), Some(pw));
                assert_eq!(cfg.clickhouse_password.as_deref(), Some(pw));
                assert_eq!(cfg.kafka_sasl_username.as_deref(), Some("4242"));
                assert_eq!(cfg.group_id, "12345");
                assert_eq!(cfg.delivery, Delivery::ExactlyOnce);
                Ok(())
            });
        }
    }

    #[test]
    fn half_sasl_credentials_and_a_ca_for_plain_http_are_rejected() {
        let cfg = Config {
            kafka_sasl_mechanism: Some("SCRAM-SHA-512".into()),
            kafka_sasl_username: Some("svc".into()),
            ..Config::default()
        };
        let err = cfg.validate().unwrap_err().to_string();
        assert!(err.contains("EDDY_KAFKA_SASL_PASSWORD"), "{err}");
        let cfg = Config {
            clickhouse_ca_file: Some("/ca.pem".into()),
            ..Config::default()
        };
        let err = cfg.validate().unwrap_err().to_string();
        assert!(err.contains("clickhouse_ca_file"), "{err}");
        // GSSAPI or OAUTHBEARER need no password: not our business.
        let mut cfg = Config::default();
        cfg.kafka_consumer
            .insert("sasl.mechanism".into(), "GSSAPI".into());
        cfg.validate().unwrap();
    }

    #[test]
    fn example_file_documents_exactly_the_defaults() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/eddy.example.toml");
        let from_file: Config = Figment::from(Toml::file(path))
            .extract()
            .expect("eddy.example.toml parses");
        assert_eq!(from_file, Config::default());
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's own error type
    fn fleet_settings_are_checked_by_name() {
        let bad = |f: crate::fleet::FleetConfig| {
            Config {
                fleet: f,
                ..Config::default()
            }
            .validate()
            .unwrap_err()
            .to_string()
        };
        let d = crate::fleet::FleetConfig::default;
        let e = bad(crate::fleet::FleetConfig {
            window_seconds: 90,
            ..d()
        });
        assert!(e.contains("fleet.window_seconds"), "{e}");
        let e = bad(crate::fleet::FleetConfig { ratio: 0.5, ..d() });
        assert!(e.contains("fleet.ratio"), "{e}");
        let e = bad(crate::fleet::FleetConfig {
            alert_topic: "agent.signals".into(),
            ..d()
        });
        assert!(e.contains("fleet.alert_topic"), "{e}");
        let e = bad(crate::fleet::FleetConfig { min_runs: 0, ..d() });
        assert!(e.contains("fleet.min_runs"), "{e}");
        figment::Jail::expect_with(|jail| {
            jail.set_env("EDDY_FLEET__WINDOW_SECONDS", "600");
            jail.set_env("EDDY_FLEET__ALERT_TOPIC", "x.alerts");
            let cfg = Config::load(None, &[]).unwrap();
            assert_eq!(cfg.fleet.window_seconds, 600);
            assert_eq!(cfg.fleet.alert_topic, "x.alerts");
            Ok(())
        });
    }

    #[test]
    fn rejects_bad_values_with_the_setting_name() {
        let cfg = Config {
            clickhouse_database: "eddy; DROP".into(),
            ..Config::default()
        };
        let err = cfg.validate().unwrap_err().to_string();
        assert!(err.contains("clickhouse_database"), "{err}");
    }

    #[test]
    fn refuses_kafka_properties_that_would_break_the_commit_rule() {
        for (table, key) in [
            ("kafka_consumer", "enable.auto.commit"),
            ("kafka_consumer", "ENABLE.AUTO.OFFSET.STORE"),
            ("kafka_consumer", "isolation.level"),
            ("kafka_consumer", "group.id"),
            ("kafka_producer", "enable.idempotence"),
            ("kafka_producer", "transactional.id"),
            ("kafka_producer", "acks"),
        ] {
            let mut cfg = Config::default();
            let t = if table == "kafka_consumer" {
                &mut cfg.kafka_consumer
            } else {
                &mut cfg.kafka_producer
            };
            t.insert(key.into(), "x".into());
            let err = cfg.validate().unwrap_err().to_string();
            assert!(
                err.contains(table) && err.contains(&key.to_ascii_lowercase()),
                "{table} {key}: {err}"
            );
        }
        // Tuning properties still pass through.
        let mut cfg = Config::default();
        cfg.kafka_consumer
            .insert("fetch.max.bytes".into(), "52428800".into());
        cfg.kafka_producer
            .insert("compression.type".into(), "zstd".into());
        cfg.validate().unwrap();
    }

    #[test]
    fn topic_replication_defaults_to_the_brokers_and_refuses_zero() {
        assert_eq!(Config::default().topic_replication, None);
        let cfg = Config {
            topic_replication: Some(0),
            ..Config::default()
        };
        let err = cfg.validate().unwrap_err().to_string();
        assert!(err.contains("topic_replication"), "{err}");
    }
}
