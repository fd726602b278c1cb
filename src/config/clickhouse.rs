//! The ClickHouse section: the server, the account and the shape of the tables. `sink/` takes
//! this and nothing else.
use super::ConfigError;

/// No `Debug`: it holds the password (print [`super::Config::redacted`] instead).
#[derive(Clone, PartialEq)]
pub struct ClickHouseConfig {
    /// `clickhouse_url`.
    pub url: String,
    /// The database eddy's tables live in.
    pub database: String,
    /// The user to authenticate as (the server's default user when unset).
    pub user: Option<String>,
    /// A secret: masked in `redacted()` and never logged.
    pub password: Option<String>,
    /// `clickhouse_ca_file`: PEM file with the CA certificate(s) that sign the server's
    /// certificate, for an `https://` `clickhouse_url` behind a private CA. Unset: the public
    /// web roots (webpki-roots). When set, only these CAs are trusted.
    pub ca_file: Option<String>,
    /// `clickhouse_cluster`: cluster name (from the servers' `remote_servers`): `eddy migrate`
    /// renders `ON CLUSTER`, Replicated*MergeTree `<table>_local` tables and Distributed
    /// `<table>`s sharded by run.
    pub cluster: Option<String>,
    /// `clickhouse_retention_days`: keep rows this many days (a TTL on event time, ClickHouse
    /// >= 20.3); 0 keeps everything. Applied when the tables are created.
    pub retention_days: u32,
}

impl Default for ClickHouseConfig {
    fn default() -> Self {
        Self {
            url: "http://127.0.0.1:8123".into(),
            database: "eddy".into(),
            user: None,
            password: None,
            ca_file: None,
            cluster: None,
            retention_days: 0,
        }
    }
}

impl ClickHouseConfig {
    /// Names that end up in DDL.
    pub(super) fn validate_names(&self) -> Result<(), ConfigError> {
        if !self
            .database
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
            || self.database.is_empty()
        {
            return bad(format!(
                "clickhouse_database `{}` must be [A-Za-z0-9_]+",
                self.database
            ));
        }
        if let Some(c) = &self.cluster {
            if c.is_empty()
                || !c
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            {
                return bad(format!("clickhouse_cluster `{c}` must be [A-Za-z0-9_.-]+"));
            }
        }
        Ok(())
    }

    /// A private CA only means something over TLS.
    pub(super) fn validate_tls(&self) -> Result<(), ConfigError> {
        if let Some(ca) = self.ca_file.as_ref().filter(|c| !c.is_empty()) {
            if !self
                .url
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("https://")
            {
                return bad(format!(
                    "clickhouse_ca_file `{ca}` is set but clickhouse_url is not https://"
                ));
            }
        }
        Ok(())
    }
}

fn bad(m: String) -> Result<(), ConfigError> {
    Err(ConfigError::Invalid(m))
}
