//! The sections of the HTTP front-ends: `ingest/` (`eddy ingest-http`, `eddy ingest-otlp`) and
//! `ui/` (`eddy ui`). Each takes its own, with the Kafka section it publishes or reads through.
use std::collections::BTreeMap;

/// No `Debug`: it holds the API keys (print [`super::Config::redacted`] instead).
#[derive(Clone, PartialEq)]
pub struct IngestConfig {
    /// `ingest_addr`: `eddy ingest-http` (keelwave-compatible ingest API) listens here.
    pub addr: String,
    /// `ingest_api_keys`: API keys (`kw_...`) → project id, for `ingest-http` and
    /// `ingest-otlp`. The keys are secrets: never logged, masked in `redacted()`.
    pub api_keys: BTreeMap<String, String>,
    /// `ingest_admin_addr`: `eddy ingest-http`'s admin server (/metrics, /livez, /readyz);
    /// unset, none is started (`admin_addr` is the worker's, which may run on the same host).
    pub admin_addr: Option<String>,
    /// `eddy ingest-otlp` (OTLP/HTTP traces receiver, `POST /v1/traces`) listens here.
    pub otlp_addr: String,
    /// `eddy ingest-otlp`: the project of spans whose resource has no `eddy.project.id` (when
    /// `ingest_api_keys` is set, the key names the project instead).
    pub otlp_default_project: String,
    /// `eddy ingest-otlp`'s admin server (/metrics, /livez, /readyz); unset, none is started.
    pub otlp_admin_addr: Option<String>,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            addr: "127.0.0.1:8080".into(),
            api_keys: BTreeMap::new(),
            admin_addr: None,
            otlp_addr: "127.0.0.1:4318".into(),
            otlp_default_project: "default".into(),
            otlp_admin_addr: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct UiConfig {
    /// `ui_addr`: `eddy ui` (the read-only loop explorer over ClickHouse) listens here.
    pub addr: String,
}

impl Default for UiConfig {
    fn default() -> Self {
        Self {
            addr: "127.0.0.1:8090".into(),
        }
    }
}
