//! Configuration: defaults → TOML file → `EDDY_*` environment → command-line flags.
//!
//! Top-level keys map one-to-one to env names (`kafka_brokers` ↔ `EDDY_KAFKA_BROKERS`); nested
//! sections use a double underscore (`EDDY_ENGINE__IDLE_TIMEOUT_MS`).
//!
//! librdkafka property names contain dots, which env names cannot carry, so the Kafka security
//! settings also exist as top-level keys (`kafka_sasl_password` ↔ `EDDY_KAFKA_SASL_PASSWORD`,
//! see `KafkaConfig::security_props`); they reach every Kafka client eddy creates.
//!
//! Users write one flat table (`flat`); the code sees it split into one section per layer
//! ([`Config`]), and each layer is handed only the sections it uses.
mod clickhouse;
mod flat;
mod fleet;
mod ingest;
mod kafka;
pub(crate) mod notify;
pub(crate) mod secrets;
mod worker;

pub use clickhouse::ClickHouseConfig;
pub(crate) use ingest::{IngestConfig, UiConfig};
pub use kafka::Delivery;
pub(crate) use kafka::{KafkaConfig, TopicsConfig};
pub(crate) use worker::WorkerConfig;

use crate::engine::EngineConfig;
use crate::verdict::VerdictConfig;
use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
pub(crate) use fleet::FleetConfig;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Why the configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Loaded, but a value is out of range or settings contradict each other.
    #[error("invalid configuration: {0}")]
    Invalid(String),
    /// The file or the environment could not be read or parsed.
    #[error("cannot load configuration: {0}")]
    Load(#[from] Box<figment::Error>),
}

/// Everything eddy can be configured with, by the layer that uses it. Read and printed as the
/// flat table users write (see `flat`).
#[derive(Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(from = "flat::Flat", into = "flat::Flat")]
pub struct Config {
    /// `source/`, `emit/`: brokers, clients, delivery and topics.
    pub kafka: KafkaConfig,
    /// `sink/`.
    pub clickhouse: ClickHouseConfig,
    /// `worker/` (`eddy run`).
    pub worker: WorkerConfig,
    /// `ingest/` (`eddy ingest-http`, `eddy ingest-otlp`).
    pub ingest: IngestConfig,
    /// `ui/` (`eddy ui`).
    pub ui: UiConfig,
    /// The verdict table of `ingest-http` and `ui` (`[verdicts]`): how far back it reads the
    /// signals topic at start, how many runs and for how long it remembers.
    pub verdicts: VerdictConfig,
    /// `engine/` (`[engine]`).
    pub engine: EngineConfig,
    /// `fleet/` (`eddy fleet-watch`, `[fleet]`; docs/fleet-alerts.md).
    pub fleet: FleetConfig,
}

/// Debug output ends up in logs: it shows the redacted form only.
impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Config({})", self.redacted())
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
        // The same for destinations' text fields (secrets among them).
        for (k, v) in std::env::vars() {
            if let Some(path) = destination_text_key(&k) {
                fig = fig.merge((path, v));
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
        // Secret tables hold their secrets as keys: mask those, keep the names visible. Taken
        // out first, as `ui_tokens` would otherwise be masked whole for its name.
        let tables: Vec<(&str, serde_json::Value)> = SECRET_TABLES
            .iter()
            .filter_map(|k| Some((*k, v.as_object_mut()?.remove(*k)?)))
            .collect();
        redact(&mut v);
        if let Some(m) = v.as_object_mut() {
            for (k, t) in tables {
                m.insert(k.to_string(), secrets::masked(t));
            }
        }
        // A destination's secret may be a URL (Slack's) or a field named like no other secret
        // (`routing_key`): its own redaction knows which.
        if let Some(f) = v.get_mut("fleet").and_then(|f| f.as_object_mut()) {
            f.insert("notify".into(), self.fleet.notify.redacted());
        }
        v
    }

    /// Each section's own checks, and those across sections, in one fixed order (the first
    /// problem found is the one reported).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        let (kafka, topics) = (&self.kafka, &self.kafka.topics);
        kafka.validate_topics()?;
        if let Some(why) = self.fleet.problem() {
            return bad(why);
        }
        for (name, t) in [
            ("fleet.alert_topic", &self.fleet.alert_topic),
            ("fleet.state_topic", &self.fleet.state_topic),
            ("fleet.notify.dlq_topic", &self.fleet.notify.dlq_topic),
        ] {
            if !kafka::is_topic_name(t) {
                return bad(format!("{name} `{t}` is not a valid Kafka topic name"));
            }
            if *t == topics.input || *t == topics.output || *t == topics.dlq {
                return bad(format!("{name} `{t}` must differ from the worker's topics"));
            }
        }
        let dlq = &self.fleet.notify.dlq_topic;
        if *dlq == self.fleet.alert_topic || *dlq == self.fleet.state_topic {
            return bad(format!(
                "fleet.notify.dlq_topic `{dlq}` must differ from fleet.alert_topic and fleet.state_topic"
            ));
        }
        if topics.input == topics.output || topics.input == topics.dlq {
            return bad("input_topic must differ from output_topic and dlq_topic".into());
        }
        self.clickhouse.validate_names()?;
        kafka.validate_clients()?;
        self.clickhouse.validate_tls()?;
        if let Err(e) = self.engine.detectors.validate() {
            return bad(format!("engine.detectors: {e}"));
        }
        kafka.validate_creation()?;
        let worker = &self.worker;
        if kafka.delivery == Delivery::ExactlyOnce
            && u64::from(kafka.transaction_timeout_ms) <= worker.flush_interval_ms.saturating_mul(4)
        {
            return bad(format!(
                "transaction_timeout_ms ({}) must be well above flush_interval_ms ({})",
                kafka.transaction_timeout_ms, worker.flush_interval_ms
            ));
        }
        if worker.max_message_bytes == 0 || kafka.dlq_max_payload_bytes == 0 {
            return bad("max_message_bytes and dlq_max_payload_bytes must be >= 1".into());
        }
        worker.validate()?;
        self.ui.validate().map_err(ConfigError::Invalid)?;
        if worker.flush_interval_ms.saturating_mul(2) >= u64::from(kafka.session_timeout_ms) {
            return bad(format!(
                "flush_interval_ms ({}) must be well below session_timeout_ms ({})",
                worker.flush_interval_ms, kafka.session_timeout_ms
            ));
        }
        Ok(())
    }
}

/// Settings that map secrets to names (written as described in [`secrets`]).
const SECRET_TABLES: &[&str] = &["ingest_api_keys", "ui_tokens"];

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
        "ui_admin_addr",
        // Secret tables and address lists: their text form is parsed by eddy, not by figment
        // (which would read `[x]`, `{x}` or a number its own way).
        "ingest_api_keys",
        "ui_tokens",
        "ui_trusted_proxies",
    ];
    let mut keys: Vec<String> = optional.iter().map(|k| k.to_string()).collect();
    if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(Config::default()) {
        keys.extend(m.into_iter().filter(|(_, v)| v.is_string()).map(|(k, _)| k));
    }
    keys
}

/// `EDDY_FLEET__NOTIFY__DESTINATIONS__ONCALL__ROUTING_KEY` →
/// `fleet.notify.destinations.oncall.routing_key`, for the text fields of a destination.
fn destination_text_key(var: &str) -> Option<String> {
    let rest = var.strip_prefix("EDDY_FLEET__NOTIFY__DESTINATIONS__")?;
    let (name, field) = rest.split_once("__")?;
    let field = field.to_ascii_lowercase();
    // A name with a dot would address another key; validation then names the problem.
    if name.is_empty() || name.contains('.') || !notify::text_fields().contains(&field.as_str()) {
        return None;
    }
    Some(format!(
        "fleet.notify.destinations.{}.{field}",
        name.to_ascii_lowercase()
    ))
}

fn known_keys() -> Vec<String> {
    match serde_json::to_value(Config::default()) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
