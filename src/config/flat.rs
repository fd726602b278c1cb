//! The configuration as users write it: one flat table of top-level keys (plus the `[engine]`,
//! `[fleet]` and `[verdicts]` tables), the same in the TOML file, as `EDDY_*` variables and as
//! flags. [`super::Config`] is read and printed through this form, so the keys, their order in
//! error messages and figment's errors (which name the key and where it came from) stay those
//! of the file; each key's meaning is documented on the section field it becomes.
//!
//! Not `#[serde(flatten)]` sections: flatten buffers values before the sections see them, which
//! loses figment's key paths in errors and `deny_unknown_fields`.
use super::{ClickHouseConfig, Config, IngestConfig, KafkaConfig, TopicsConfig};
use super::{Delivery, UiConfig, WorkerConfig};
use crate::engine::EngineConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct Flat {
    delivery: Delivery,
    transactional_id: Option<String>,
    transaction_timeout_ms: u32,
    kafka_brokers: String,
    input_topic: String,
    output_topic: String,
    dlq_topic: String,
    changelog_topic: Option<String>,
    group_id: String,
    create_topics: bool,
    topic_partitions: i32,
    topic_replication: Option<i32>,
    migrate_on_start: bool,
    session_timeout_ms: u32,
    clickhouse_url: String,
    clickhouse_database: String,
    clickhouse_user: Option<String>,
    clickhouse_password: Option<String>,
    clickhouse_ca_file: Option<String>,
    clickhouse_cluster: Option<String>,
    clickhouse_retention_days: u32,
    batch_max_messages: usize,
    flush_interval_ms: u64,
    kafka_consumer: BTreeMap<String, String>,
    kafka_producer: BTreeMap<String, String>,
    kafka_security_protocol: Option<String>,
    kafka_sasl_mechanism: Option<String>,
    kafka_sasl_username: Option<String>,
    kafka_sasl_password: Option<String>,
    kafka_ssl_ca_location: Option<String>,
    admin_addr: String,
    shutdown_grace_ms: u64,
    revoke_drain_ms: u64,
    flush_timeout_ms: u64,
    watchdog_timeout_ms: u64,
    progress_interval_s: u64,
    ingest_addr: String,
    ui_addr: String,
    #[serde(deserialize_with = "super::secrets::table")]
    ui_tokens: BTreeMap<String, String>,
    #[serde(deserialize_with = "super::secrets::list")]
    ui_trusted_proxies: Vec<String>,
    ui_proxy_user_header: String,
    ui_insecure_open: bool,
    ui_admin_addr: Option<String>,
    #[serde(deserialize_with = "super::secrets::table")]
    ingest_api_keys: BTreeMap<String, String>,
    ingest_admin_addr: Option<String>,
    otlp_addr: String,
    otlp_grpc_addr: String,
    otlp_default_project: String,
    otlp_admin_addr: Option<String>,
    verdicts: crate::verdict::VerdictConfig,
    max_message_bytes: usize,
    dlq_max_payload_bytes: usize,
    topic_max_message_bytes: Option<u32>,
    engine: EngineConfig,
    fleet: super::FleetConfig,
}

impl Default for Flat {
    fn default() -> Self {
        Config::default().into()
    }
}

impl From<Flat> for Config {
    fn from(f: Flat) -> Self {
        Config {
            kafka: KafkaConfig {
                brokers: f.kafka_brokers,
                group_id: f.group_id,
                session_timeout_ms: f.session_timeout_ms,
                consumer: f.kafka_consumer,
                producer: f.kafka_producer,
                security_protocol: f.kafka_security_protocol,
                sasl_mechanism: f.kafka_sasl_mechanism,
                sasl_username: f.kafka_sasl_username,
                sasl_password: f.kafka_sasl_password,
                ssl_ca_location: f.kafka_ssl_ca_location,
                delivery: f.delivery,
                transactional_id: f.transactional_id,
                transaction_timeout_ms: f.transaction_timeout_ms,
                dlq_max_payload_bytes: f.dlq_max_payload_bytes,
                topics: TopicsConfig {
                    input: f.input_topic,
                    output: f.output_topic,
                    dlq: f.dlq_topic,
                    changelog: f.changelog_topic,
                    create: f.create_topics,
                    partitions: f.topic_partitions,
                    replication: f.topic_replication,
                    max_message_bytes: f.topic_max_message_bytes,
                },
            },
            clickhouse: ClickHouseConfig {
                url: f.clickhouse_url,
                database: f.clickhouse_database,
                user: f.clickhouse_user,
                password: f.clickhouse_password,
                ca_file: f.clickhouse_ca_file,
                cluster: f.clickhouse_cluster,
                retention_days: f.clickhouse_retention_days,
            },
            worker: WorkerConfig {
                admin_addr: f.admin_addr,
                migrate_on_start: f.migrate_on_start,
                batch_max_messages: f.batch_max_messages,
                flush_interval_ms: f.flush_interval_ms,
                shutdown_grace_ms: f.shutdown_grace_ms,
                revoke_drain_ms: f.revoke_drain_ms,
                flush_timeout_ms: f.flush_timeout_ms,
                watchdog_timeout_ms: f.watchdog_timeout_ms,
                progress_interval_s: f.progress_interval_s,
                max_message_bytes: f.max_message_bytes,
            },
            ingest: IngestConfig {
                addr: f.ingest_addr,
                api_keys: f.ingest_api_keys,
                admin_addr: f.ingest_admin_addr,
                otlp_addr: f.otlp_addr,
                otlp_grpc_addr: f.otlp_grpc_addr,
                otlp_default_project: f.otlp_default_project,
                otlp_admin_addr: f.otlp_admin_addr,
            },
            ui: UiConfig {
                addr: f.ui_addr,
                tokens: f.ui_tokens,
                trusted_proxies: f.ui_trusted_proxies,
                proxy_user_header: f.ui_proxy_user_header,
                insecure_open: f.ui_insecure_open,
                admin_addr: f.ui_admin_addr,
            },
            verdicts: f.verdicts,
            engine: f.engine,
            fleet: f.fleet,
        }
    }
}

impl From<Config> for Flat {
    fn from(c: Config) -> Self {
        let Config {
            kafka: k,
            clickhouse: ch,
            worker: w,
            ingest: i,
            ui,
            verdicts,
            engine,
            fleet,
        } = c;
        let t = k.topics;
        Flat {
            delivery: k.delivery,
            transactional_id: k.transactional_id,
            transaction_timeout_ms: k.transaction_timeout_ms,
            kafka_brokers: k.brokers,
            input_topic: t.input,
            output_topic: t.output,
            dlq_topic: t.dlq,
            changelog_topic: t.changelog,
            group_id: k.group_id,
            create_topics: t.create,
            topic_partitions: t.partitions,
            topic_replication: t.replication,
            migrate_on_start: w.migrate_on_start,
            session_timeout_ms: k.session_timeout_ms,
            clickhouse_url: ch.url,
            clickhouse_database: ch.database,
            clickhouse_user: ch.user,
            clickhouse_password: ch.password,
            clickhouse_ca_file: ch.ca_file,
            clickhouse_cluster: ch.cluster,
            clickhouse_retention_days: ch.retention_days,
            batch_max_messages: w.batch_max_messages,
            flush_interval_ms: w.flush_interval_ms,
            kafka_consumer: k.consumer,
            kafka_producer: k.producer,
            kafka_security_protocol: k.security_protocol,
            kafka_sasl_mechanism: k.sasl_mechanism,
            kafka_sasl_username: k.sasl_username,
            kafka_sasl_password: k.sasl_password,
            kafka_ssl_ca_location: k.ssl_ca_location,
            admin_addr: w.admin_addr,
            shutdown_grace_ms: w.shutdown_grace_ms,
            revoke_drain_ms: w.revoke_drain_ms,
            flush_timeout_ms: w.flush_timeout_ms,
            watchdog_timeout_ms: w.watchdog_timeout_ms,
            progress_interval_s: w.progress_interval_s,
            ingest_addr: i.addr,
            ui_addr: ui.addr,
            ui_tokens: ui.tokens,
            ui_trusted_proxies: ui.trusted_proxies,
            ui_proxy_user_header: ui.proxy_user_header,
            ui_insecure_open: ui.insecure_open,
            ui_admin_addr: ui.admin_addr,
            ingest_api_keys: i.api_keys,
            ingest_admin_addr: i.admin_addr,
            otlp_addr: i.otlp_addr,
            otlp_grpc_addr: i.otlp_grpc_addr,
            otlp_default_project: i.otlp_default_project,
            otlp_admin_addr: i.otlp_admin_addr,
            verdicts,
            max_message_bytes: w.max_message_bytes,
            dlq_max_payload_bytes: k.dlq_max_payload_bytes,
            topic_max_message_bytes: t.max_message_bytes,
            engine,
            fleet,
        }
    }
}
