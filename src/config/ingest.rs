//! The sections of the HTTP front-ends: `ingest/` (`eddy ingest-http`, `eddy ingest-otlp`) and
//! `ui/` (`eddy ui`). Each takes its own, with the Kafka section it publishes or reads through.
use std::collections::BTreeMap;

/// No `Debug`: it holds the API keys (print [`super::Config::redacted`] instead).
#[derive(Clone, PartialEq)]
pub struct IngestConfig {
    /// `ingest_addr`: `eddy ingest-http` (keelwave-compatible ingest API) listens here.
    pub(crate) addr: String,
    /// `ingest_api_keys`: API keys (`kw_...`) → project id, for `ingest-http` and
    /// `ingest-otlp`. The keys are secrets: never logged, masked in `redacted()`.
    pub(crate) api_keys: BTreeMap<String, String>,
    /// `ingest_admin_addr`: `eddy ingest-http`'s admin server (/metrics, /livez, /readyz);
    /// unset, none is started (`admin_addr` is the worker's, which may run on the same host).
    pub(crate) admin_addr: Option<String>,
    /// `eddy ingest-otlp`'s OTLP/HTTP traces receiver (`POST /v1/traces`) listens here; empty:
    /// no OTLP/HTTP.
    pub(crate) otlp_addr: String,
    /// `eddy ingest-otlp`'s OTLP/gRPC traces receiver (`TraceService/Export`) listens here;
    /// empty: no OTLP/gRPC.
    pub(crate) otlp_grpc_addr: String,
    /// `eddy ingest-otlp`: the project of spans whose resource has no `eddy.project.id` (when
    /// `ingest_api_keys` is set, the key names the project instead).
    pub(crate) otlp_default_project: String,
    /// `eddy ingest-otlp`'s admin server (/metrics, /livez, /readyz); unset, none is started.
    pub(crate) otlp_admin_addr: Option<String>,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            addr: "127.0.0.1:8080".into(),
            api_keys: BTreeMap::new(),
            admin_addr: None,
            otlp_addr: "127.0.0.1:4318".into(),
            otlp_grpc_addr: "127.0.0.1:4317".into(),
            otlp_default_project: "default".into(),
            otlp_admin_addr: None,
        }
    }
}

/// No `Debug`: it holds the UI's tokens (print [`super::Config::redacted`] instead).
#[derive(Clone, PartialEq)]
pub struct UiConfig {
    /// `ui_addr`: `eddy ui` (the read-only loop explorer over ClickHouse) listens here.
    pub(crate) addr: String,
    /// `ui_tokens`: bearer tokens → user name. A request carrying one (`Authorization: Bearer`,
    /// or as the password of HTTP Basic, which is how a browser asks) is let in. Secrets:
    /// never logged, masked in `redacted()`; written like `ingest_api_keys` (see `secrets`).
    pub(crate) tokens: BTreeMap<String, String>,
    /// `ui_trusted_proxies`: addresses or CIDR blocks of an authenticating reverse proxy
    /// (oauth2-proxy, an ingress with auth). Only a request whose TCP peer is one of them may
    /// name its user in `ui_proxy_user_header`.
    pub(crate) trusted_proxies: Vec<String>,
    /// `ui_proxy_user_header`: the header such a proxy puts the signed-in user in.
    pub(crate) proxy_user_header: String,
    /// `ui_insecure_open`: serve every page to anyone who can reach `ui_addr`. Off unless set:
    /// without tokens or a trusted proxy, `eddy ui` refuses to start.
    pub insecure_open: bool,
    /// `ui_admin_addr`: `eddy ui`'s admin server (/metrics, /livez, /readyz), never behind
    /// the UI's authentication; unset, none is started.
    pub(crate) admin_addr: Option<String>,
}

impl Default for UiConfig {
    fn default() -> Self {
        Self {
            addr: "127.0.0.1:8090".into(),
            tokens: BTreeMap::new(),
            trusted_proxies: Vec::new(),
            proxy_user_header: "X-Forwarded-User".into(),
            insecure_open: false,
            admin_addr: None,
        }
    }
}

/// The shortest token accepted: 16 characters, e.g. 96 random bits in base64.
pub(crate) const MIN_UI_TOKEN_CHARS: usize = 16;

impl UiConfig {
    /// The trusted proxies as networks (a plain address is a /32 or /128).
    pub(crate) fn proxy_networks(&self) -> Result<Vec<ipnet::IpNet>, String> {
        self.trusted_proxies
            .iter()
            .map(|p| {
                p.parse::<ipnet::IpNet>()
                    .or_else(|_| p.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map(|n| n.trunc())
                    .map_err(|_| {
                        format!(
                            "ui_trusted_proxies: `{p}` is not an IP address or CIDR block \
                             (e.g. 10.0.0.7 or 10.0.0.0/16)"
                        )
                    })
            })
            .collect()
    }

    /// True when some way of authenticating requests is configured.
    pub(crate) fn has_auth(&self) -> bool {
        !self.tokens.is_empty() || !self.trusted_proxies.is_empty()
    }

    pub(super) fn validate(&self) -> Result<(), String> {
        for (n, (token, name)) in self.tokens.iter().enumerate() {
            // Never echo a token: name it by position only.
            let n = n + 1;
            if token.chars().count() < MIN_UI_TOKEN_CHARS {
                return Err(format!(
                    "ui_tokens: token #{n} is shorter than {MIN_UI_TOKEN_CHARS} characters \
                     (make one with `openssl rand -hex 32`)"
                ));
            }
            // What an Authorization header can carry unchanged.
            if !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(format!(
                    "ui_tokens: token #{n} has a character other than printable ASCII \
                     (no spaces)"
                ));
            }
            if name.trim().is_empty() || name.chars().any(char::is_control) {
                return Err(format!(
                    "ui_tokens: token #{n} has an empty or unprintable name"
                ));
            }
        }
        self.proxy_networks()?;
        if axum::http::HeaderName::from_bytes(self.proxy_user_header.as_bytes()).is_err() {
            return Err(format!(
                "ui_proxy_user_header `{}` is not an HTTP header name",
                self.proxy_user_header
            ));
        }
        if self.insecure_open && self.has_auth() {
            return Err(
                "ui_insecure_open = true serves every page without authentication, \
                 yet ui_tokens or ui_trusted_proxies is set: choose one (remove \
                 ui_insecure_open to require them)"
                    .into(),
            );
        }
        Ok(())
    }
}
