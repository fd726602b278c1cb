//! Configuration: defaults → TOML file → `EDDY_*` environment → command-line flags.
//!
//! Top-level keys map one-to-one to env names (`kafka_brokers` ↔ `EDDY_KAFKA_BROKERS`); nested
//! sections use a double underscore (`EDDY_ENGINE__IDLE_TIMEOUT_MS`).
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
    pub topic_replication: i32,
    pub session_timeout_ms: u32,
    pub clickhouse_url: String,
    pub clickhouse_database: String,
    pub clickhouse_user: Option<String>,
    pub clickhouse_password: Option<String>,
    /// Cluster name (from the servers' `remote_servers`): `eddy migrate` renders `ON CLUSTER`,
    /// Replicated*MergeTree `<table>_local` tables and Distributed `<table>`s sharded by run.
    pub clickhouse_cluster: Option<String>,
    /// Keep rows this many days (a TTL on event time, ClickHouse >= 20.3); 0 keeps everything.
    /// Applied when the tables are created.
    pub clickhouse_retention_days: u32,
    /// A flush (ClickHouse insert → output delivery → changelog → offset commit) happens when a
    /// batch holds this many input messages, or `flush_interval_ms` after its first message.
    pub batch_max_messages: usize,
    pub flush_interval_ms: u64,
    /// Raw librdkafka properties passed through to the consumer / producer.
    pub kafka_consumer: BTreeMap<String, String>,
    pub kafka_producer: BTreeMap<String, String>,
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
    /// `eddy ingest-http` API keys (`kw_...`) → project id. The keys are secrets: never logged,
    /// masked in `redacted()`.
    pub ingest_api_keys: BTreeMap<String, String>,
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
            topic_replication: 1,
            session_timeout_ms: 45_000,
            clickhouse_url: "http://127.0.0.1:8123".into(),
            clickhouse_database: "eddy".into(),
            clickhouse_user: None,
            clickhouse_password: None,
            clickhouse_cluster: None,
            clickhouse_retention_days: 0,
            batch_max_messages: 20_000,
            flush_interval_ms: 250,
            kafka_consumer: BTreeMap::new(),
            kafka_producer: BTreeMap::new(),
            admin_addr: "127.0.0.1:9464".into(),
            shutdown_grace_ms: 25_000,
            revoke_drain_ms: 15_000,
            progress_interval_s: 10,
            ingest_addr: "127.0.0.1:8080".into(),
            ingest_api_keys: BTreeMap::new(),
            max_message_bytes: 1024 * 1024,
            dlq_max_payload_bytes: 900_000,
            topic_max_message_bytes: None,
            engine: EngineConfig::default(),
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
    /// `[kafka_consumer]` so SASL/TLS set there reaches every client.
    pub fn kafka_client_props(&self) -> Vec<(String, String)> {
        let mut v = vec![("bootstrap.servers".to_string(), self.kafka_brokers.clone())];
        for (k, val) in &self.kafka_consumer {
            if ["security.", "sasl.", "ssl."]
                .iter()
                .any(|p| k.starts_with(p))
            {
                v.push((k.clone(), val.clone()));
            }
        }
        v
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
        if let Err(e) = self.engine.detectors.validate() {
            return bad(format!("engine.detectors: {e}"));
        }
        if self.topic_partitions < 1 {
            return bad("topic_partitions must be >= 1".into());
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
    fn example_file_documents_exactly_the_defaults() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/eddy.example.toml");
        let from_file: Config = Figment::from(Toml::file(path))
            .extract()
            .expect("eddy.example.toml parses");
        assert_eq!(from_file, Config::default());
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
}
