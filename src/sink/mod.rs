//! ClickHouse sink: migrations and RowBinary batch inserts.
//!
//! Inserts are idempotent by construction: every row has a deterministic identity (the ORDER BY
//! of its ReplacingMergeTree) and a version (the source offset), so a batch that is inserted
//! again after a crash collapses onto the first copy.
pub mod rows;

use crate::config::ClickHouseConfig;
pub use rows::{RollupRow, StepRow};
pub(crate) use rows::{RunRow, SignalRow};

/// Why ClickHouse could not be reached, set up or written.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The server failed a request.
    #[error("ClickHouse at {url}: {source}")]
    ClickHouse {
        /// The server's URL.
        url: String,
        /// The client's error.
        #[source]
        source: clickhouse::error::Error,
    },
    /// Migrations are pending and eddy may not run them.
    #[error(
        "ClickHouse database `{db}` lacks migrations {pending:?} and migrate_on_start is off. To \
         fix: run `eddy migrate` with an account that may run DDL (or apply `eddy migrate \
         --print`), or set migrate_on_start = true"
    )]
    NotMigrated {
        /// The database.
        db: String,
        /// The migrations not yet applied.
        pending: Vec<String>,
    },
    /// A migration failed.
    #[error("migration {name} failed: {source}")]
    Migration {
        /// The migration.
        name: String,
        /// The client's error.
        #[source]
        source: clickhouse::error::Error,
    },
    /// The server rejected the credentials.
    #[error(
        "ClickHouse at {url} rejected user `{user}`: {source}. To fix: check clickhouse_user and \
         clickhouse_password (env EDDY_CLICKHOUSE_USER / EDDY_CLICKHOUSE_PASSWORD)"
    )]
    Auth {
        /// The server's URL.
        url: String,
        /// The user rejected.
        user: String,
        /// The client's error.
        #[source]
        source: clickhouse::error::Error,
    },
    /// The TLS handshake failed.
    #[error(
        "ClickHouse at {url}: TLS failed: {reason}. To fix: set clickhouse_ca_file (env \
         EDDY_CLICKHOUSE_CA_FILE) to the PEM of the CA that signed the server's certificate, \
         and use the host name the certificate was issued for"
    )]
    Tls {
        /// The server's URL.
        url: String,
        /// rustls's reason.
        reason: String,
    },
    /// `clickhouse_ca_file` could not be read or holds no certificate.
    #[error("clickhouse_ca_file {path}: {reason}")]
    CaFile {
        /// The file.
        path: String,
        /// Why it is unusable.
        reason: String,
    },
    /// No answer within the flush's deadline (a hung or overloaded server): retried.
    #[error("ClickHouse did not answer the insert within {waited_ms} ms (flush_timeout_ms)")]
    Timeout {
        /// How long the insert waited.
        waited_ms: u64,
    },
}

/// The whole `source()` chain of an error on one line: the crate's network error hides the TLS
/// reason two levels down.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let msg = s.to_string();
        if !out.contains(&msg) {
            out.push_str(": ");
            out.push_str(&msg);
        }
        cur = s.source();
    }
    out
}

/// The default HTTP client trusts the public web roots; with `clickhouse_ca_file` set, a client
/// that trusts exactly the CAs in that PEM file (same pool and keep-alive settings as the
/// crate's own client).
fn http_client(cfg: &ClickHouseConfig) -> Result<clickhouse::Client, SinkError> {
    use hyper_util::client::legacy::{connect::HttpConnector, Client as HyperClient};
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    use std::time::Duration;

    let Some(path) = cfg.ca_file.as_ref().filter(|p| !p.is_empty()) else {
        return Ok(clickhouse::Client::default());
    };
    let ca_err = |reason: String| SinkError::CaFile {
        path: path.clone(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| ca_err(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ca_err(e.to_string()))?;
    if certs.is_empty() {
        return Err(ca_err("holds no PEM certificate".into()));
    }
    let mut roots = rustls::RootCertStore::empty();
    for c in certs {
        roots.add(c).map_err(|e| ca_err(e.to_string()))?;
    }
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ca_err(e.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.set_keepalive(Some(Duration::from_secs(60)));
    http.enforce_http(false);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .wrap_connector(http);
    let client = HyperClient::builder(hyper_util::rt::TokioExecutor::new())
        // Below ClickHouse's keep-alive timeout (3 s before 23.11), as the crate's default.
        .pool_idle_timeout(Duration::from_secs(2))
        .build(https);
    Ok(clickhouse::Client::with_http_client(client))
}

struct Migration {
    version: u32,
    name: &'static str,
    /// The documented form (ClickHouse >= 20.3): DateTime64, LowCardinality, TTL.
    modern: &'static str,
    /// The same tables for older servers (Debian's 18.16), taking the same RowBinary rows.
    legacy: &'static str,
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_core_tables",
        modern: include_str!("../../schemas/clickhouse/0001_core_tables.sql"),
        legacy: include_str!("../../schemas/clickhouse/0001_core_tables.legacy.sql"),
    },
    Migration {
        version: 2,
        name: "0002_rollups",
        modern: include_str!("../../schemas/clickhouse/0002_rollups.sql"),
        legacy: include_str!("../../schemas/clickhouse/0002_rollups.legacy.sql"),
    },
    Migration {
        version: 3,
        name: "0003_steering",
        modern: include_str!("../../schemas/clickhouse/0003_steering.sql"),
        legacy: include_str!("../../schemas/clickhouse/0003_steering.legacy.sql"),
    },
    Migration {
        version: 4,
        name: "0004_step_numbers",
        modern: include_str!("../../schemas/clickhouse/0004_step_numbers.sql"),
        legacy: include_str!("../../schemas/clickhouse/0004_step_numbers.legacy.sql"),
    },
];

/// The oldest server that gets the modern DDL: DateTime64 arrived in 20.1, TTL in 19.6 and
/// LowCardinality without an experimental flag in 19.x; 20.3 is the first LTS with all three.
pub(crate) const MODERN_SINCE: (u32, u32) = (20, 3);

/// Whether a `version()` string gets the modern DDL. Unparsable versions count as modern.
pub fn is_modern(server_version: &str) -> bool {
    let mut it = server_version
        .trim()
        .split('.')
        .map(|p| p.parse::<u32>().ok());
    match (it.next().flatten(), it.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= MODERN_SINCE,
        (Some(major), None) => major > MODERN_SINCE.0,
        _ => true,
    }
}

/// How the DDL is rendered: which form, on which cluster, with which retention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DdlOptions {
    /// The database the tables go in.
    pub db: String,
    /// Whether the server takes the modern DDL (see [`is_modern`]).
    pub modern: bool,
    /// `ON CLUSTER` name: tables become `<name>_local` (Replicated*MergeTree) plus a Distributed
    /// `<name>` sharded by run, so every version of a row lands on one shard and FINAL is exact.
    pub cluster: Option<String>,
    /// TTL in days on the event time (modern form only); 0 keeps everything.
    pub retention_days: u32,
}

impl DdlOptions {
    /// Options for `cfg` on a server reporting `server_version` (`None`: the modern form).
    pub fn new(cfg: &ClickHouseConfig, server_version: Option<&str>) -> Self {
        Self {
            db: cfg.database.clone(),
            modern: server_version.is_none_or(is_modern),
            cluster: cfg.cluster.clone(),
            retention_days: cfg.retention_days,
        }
    }

    fn on_cluster(&self) -> String {
        self.cluster
            .as_ref()
            .map(|c| format!(" ON CLUSTER '{c}'"))
            .unwrap_or_default()
    }

    /// Statements that precede the migrations: the database and the migration ledger (on a
    /// cluster, replicated to every node). Every statement is idempotent, so re-applying them
    /// changes nothing.
    pub(crate) fn bootstrap(&self) -> Vec<String> {
        let db = &self.db;
        // On a cluster the ledger is one replicated table on every node (one path for all
        // shards, so the replica name carries the shard too): a worker pointed at any node sees
        // what `eddy migrate` applied through another. A node-local ledger made every other
        // node's worker re-run the `ON CLUSTER` DDL at start, which waits for every host and so
        // fails while a replica is down; with `migrate_on_start = false` it refused to start.
        let ledger_engine = if self.cluster.is_some() {
            format!(
                "ReplicatedReplacingMergeTree('/clickhouse/tables/{db}/schema_migrations', \
                 '{{shard}}-{{replica}}')"
            )
        } else {
            "ReplacingMergeTree".to_string()
        };
        vec![
            format!("CREATE DATABASE IF NOT EXISTS {db}{}", self.on_cluster()),
            format!(
                "CREATE TABLE IF NOT EXISTS {db}.schema_migrations{} \
                 (version UInt32, name String, applied_at DateTime) \
                 ENGINE = {ledger_engine} ORDER BY version",
                self.on_cluster()
            ),
        ]
    }

    /// Every migration's statements, rendered: (version, name, statements).
    pub fn migrations(&self) -> Vec<(u32, &'static str, Vec<String>)> {
        MIGRATIONS
            .iter()
            .map(|m| {
                let sql = if self.modern { m.modern } else { m.legacy };
                let stmts = statements(sql)
                    .iter()
                    .flat_map(|s| self.render(s))
                    .collect();
                (m.version, m.name, stmts)
            })
            .collect()
    }

    /// The whole script, as `eddy migrate --print` shows it.
    pub fn script(&self) -> String {
        let mut out = format!(
            "-- eddy DDL: {} form{}{}\n",
            if self.modern {
                "modern"
            } else {
                "legacy (ClickHouse < 20.3)"
            },
            self.cluster
                .as_ref()
                .map(|c| format!(", cluster {c}"))
                .unwrap_or_default(),
            match self.retention_days {
                0 => String::new(),
                d => format!(", retention {d} days"),
            }
        );
        for s in self.bootstrap() {
            out.push_str(&format!("\n{s};\n"));
        }
        for (version, name, stmts) in self.migrations() {
            out.push_str(&format!("\n-- migration {version}: {name}\n"));
            for s in stmts {
                out.push_str(&format!("\n{s};\n"));
            }
        }
        out
    }

    /// One template statement → the statements to run.
    fn render(&self, template: &str) -> Vec<String> {
        let days = self.retention_days.to_string();
        let stmt: String = template
            .lines()
            // A TTL line goes when there is no retention, and on servers without TTL.
            .filter(|l| !l.contains("{retention_days}") || (self.retention_days > 0 && self.modern))
            .map(|l| l.replace("{retention_days}", &days))
            .collect::<Vec<_>>()
            .join("\n")
            .replace("{db}", &self.db);
        let Some(cluster) = &self.cluster else {
            return vec![stmt];
        };
        let db = &self.db;
        if let Some(name) = altered_table(&stmt, db) {
            // A column goes onto every node's local table, then the Distributed table in front
            // of them is made again from it (it copied the local table's columns when it was
            // created). Not `ALTER` on the Distributed table: it is not replicated, and
            // ClickHouse refuses an `ALTER ... ON CLUSTER` of a non-replicated table on shards
            // with internal replication (code 371, "isn't replicated, but shard #2 is
            // replicated according to its cluster definition"); `DROP` and `CREATE` run on
            // every host. A Distributed table holds no rows (inserts are synchronous, see
            // `ClickHouseSink::connect`), and the `ALTER` of a replicated table returns once
            // every replica has the column, so each host's new table has it. An insert in
            // between fails and is retried like any refused insert.
            let local = stmt.replacen(
                &format!("ALTER TABLE {db}.{name}"),
                &format!("ALTER TABLE {db}.{name}_local{}", self.on_cluster()),
                1,
            );
            let drop = format!("DROP TABLE IF EXISTS {db}.{name}{}", self.on_cluster());
            return vec![local, drop, self.distributed(name, cluster)];
        }
        let Some(name) = created_table(&stmt, db) else {
            return vec![stmt];
        };
        let local = stmt
            .replacen(
                &format!("{db}.{name}"),
                &format!("{db}.{name}_local{}", self.on_cluster()),
                1,
            )
            .replacen(
                "ENGINE = ReplacingMergeTree(",
                &format!(
                    "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{{shard}}/{db}/{name}_local', '{{replica}}', "
                ),
                1,
            );
        vec![local, self.distributed(name, cluster)]
    }

    /// The Distributed table `name` in front of every node's `<name>_local`, on every host.
    fn distributed(&self, name: &str, cluster: &str) -> String {
        let db = &self.db;
        format!(
            "CREATE TABLE IF NOT EXISTS {db}.{name}{} AS {db}.{name}_local\n\
             ENGINE = Distributed('{cluster}', '{db}', '{name}_local', cityHash64(project_id, run_id))",
            self.on_cluster()
        )
    }
}

/// The table an `ALTER TABLE <db>.<name>` statement changes.
fn altered_table<'a>(stmt: &'a str, db: &str) -> Option<&'a str> {
    let rest = stmt.strip_prefix(&format!("ALTER TABLE {db}."))?;
    rest.split(char::is_whitespace).next()
}

/// A column the statement adds is there already: 18.16 has no `ADD COLUMN IF NOT EXISTS`, so
/// a legacy migration cut short between one of its statements and the ledger's row meets its
/// own column when it runs again (code 44, "column with this name already exists").
fn column_was_there(sql: &str, e: &clickhouse::error::Error) -> bool {
    sql.starts_with("ALTER TABLE ")
        && sql.contains(" ADD COLUMN ")
        && matches!(e, clickhouse::error::Error::BadResponse(body)
            if body.contains("Code: 44") && body.contains("already exists"))
}

/// The table a `CREATE TABLE IF NOT EXISTS <db>.<name>` statement creates.
fn created_table<'a>(stmt: &'a str, db: &str) -> Option<&'a str> {
    let rest = stmt.strip_prefix(&format!("CREATE TABLE IF NOT EXISTS {db}."))?;
    rest.split(|c: char| c.is_whitespace() || c == '(').next()
}

/// The ClickHouse writer: migrations and the batched inserts of steps, signals, runs and rollups.
#[derive(Clone)]
pub struct ClickHouseSink {
    client: clickhouse::Client,
    url: String,
    db: String,
    cluster: Option<String>,
    retention_days: u32,
}

/// Rows waiting for one insert, one vector per table.
#[derive(Debug, Default)]
pub struct Batch {
    /// For `steps`.
    pub steps: Vec<StepRow>,
    /// For `signals`.
    pub signals: Vec<SignalRow>,
    /// For `runs`.
    pub runs: Vec<RunRow>,
    /// For `rollups_minute`.
    pub rollups: Vec<RollupRow>,
}

/// A checked client for the readers (`eddy ui`, `eddy query`, fleet-watch), with eddy's
/// database selected: the same connection as the sink's (credentials, TLS, cluster settings,
/// the first request's diagnosis), through which they write nothing.
pub async fn reader(cfg: &ClickHouseConfig) -> Result<clickhouse::Client, SinkError> {
    let sink = ClickHouseSink::connect(cfg).await?;
    Ok(sink.client.with_database(&cfg.database))
}

impl ClickHouseSink {
    /// The sink of `eddy run` and `eddy migrate`: connected, and its first request answered.
    pub async fn connect(cfg: &ClickHouseConfig) -> Result<Self, SinkError> {
        let mut client = http_client(cfg)?
            .with_url(&cfg.url)
            // Old servers (Debian's 18.16) lack RowBinaryWithNamesAndTypes; rows are typed here.
            .with_validation(false);
        if let Some(u) = &cfg.user {
            client = client.with_user(u);
        }
        if let Some(p) = &cfg.password {
            client = client.with_password(p);
        }
        let sink = Self::from_client(client, cfg);
        // The first request tells configuration mistakes apart, with what to change.
        if let Err(e) = sink
            .client
            .query("SELECT version()")
            .fetch_one::<String>()
            .await
        {
            return Err(sink.connect_error(cfg, e));
        }
        Ok(sink)
    }

    fn connect_error(&self, cfg: &ClickHouseConfig, source: clickhouse::error::Error) -> SinkError {
        let url = self.url.clone();
        match &source {
            // 192 UNKNOWN_USER, 193 WRONG_PASSWORD, 194 REQUIRED_PASSWORD, 516
            // AUTHENTICATION_FAILED (newer servers, which no longer say which part was wrong)
            clickhouse::error::Error::BadResponse(body)
                if ["Code: 193", "Code: 192", "Code: 516", "Code: 194"]
                    .iter()
                    .any(|c| body.contains(c)) =>
            {
                SinkError::Auth {
                    url,
                    user: cfg.user.clone().unwrap_or_else(|| "default".into()),
                    source,
                }
            }
            clickhouse::error::Error::Network(_) => {
                let reason = chain(&source);
                let lower = reason.to_ascii_lowercase();
                if ["certificate", "tls", "handshake", "unknownissuer"]
                    .iter()
                    .any(|w| lower.contains(w))
                {
                    SinkError::Tls { url, reason }
                } else {
                    self.err(source)
                }
            }
            _ => self.err(source),
        }
    }

    /// A sink on a client built by the caller (tests: compression off, a recording server).
    /// Database, cluster and retention come from `cfg`; `clickhouse_url` only names the server
    /// in errors.
    pub fn from_client(mut client: clickhouse::Client, cfg: &ClickHouseConfig) -> Self {
        if cfg.cluster.is_some() {
            // Inserts go through Distributed tables: acknowledge only once every shard has its
            // rows, so the commit rule still means "in ClickHouse". (24.x+ also calls it
            // distributed_foreground_insert.)
            client = client.with_setting("insert_distributed_sync", "1");
            // The query pack filters steps by `IN (SELECT ... FROM runs)` and joins the two:
            // both Distributed, which ClickHouse refuses by default ("double-distributed
            // subqueries"). Every table is sharded by (project_id, run_id), so a run's rows
            // share a shard and each shard can answer with its own local tables.
            client = client.with_setting("distributed_product_mode", "local");
        }
        Self {
            client,
            url: cfg.url.clone(),
            db: cfg.database.clone(),
            cluster: cfg.cluster.clone(),
            retention_days: cfg.retention_days,
        }
    }

    fn err(&self, source: clickhouse::error::Error) -> SinkError {
        SinkError::ClickHouse {
            url: self.url.clone(),
            source,
        }
    }

    /// The checked client, for the readers' own queries.
    pub fn client(&self) -> &clickhouse::Client {
        &self.client
    }

    /// The server's version string (which DDL it takes).
    pub async fn version(&self) -> Result<String, SinkError> {
        self.client
            .query("SELECT version()")
            .fetch_one::<String>()
            .await
            .map_err(|e| self.err(e))
    }

    /// The DDL this server gets: probes `version()` for the modern or legacy form.
    pub(crate) async fn ddl(&self) -> Result<DdlOptions, SinkError> {
        let version = self.version().await?;
        Ok(DdlOptions {
            db: self.db.clone(),
            modern: is_modern(&version),
            cluster: self.cluster.clone(),
            retention_days: self.retention_days,
        })
    }

    /// For a worker that must not run DDL: fails, naming what is missing, unless every
    /// migration has been applied (by `eddy migrate` or an administrator).
    pub(crate) async fn check_migrated(&self) -> Result<(), SinkError> {
        let db = &self.db;
        let ddl = self.ddl().await?;
        // A missing database or ledger reads as "nothing applied", which the error then says.
        let done: Vec<u32> = if self.ledger_exists().await? {
            self.applied_versions().await?
        } else {
            Vec::new()
        };
        let pending: Vec<String> = ddl
            .migrations()
            .into_iter()
            .filter(|(v, _, _)| !done.contains(v))
            .map(|(_, name, _)| name.to_string())
            .collect();
        if pending.is_empty() {
            Ok(())
        } else {
            Err(SinkError::NotMigrated {
                db: db.clone(),
                pending,
            })
        }
    }

    async fn ledger_exists(&self) -> Result<bool, SinkError> {
        let exists: u8 = self
            .client
            .query("SELECT count() > 0 FROM system.tables WHERE database = ? AND name = 'schema_migrations'")
            .bind(self.db.as_str())
            .fetch_one()
            .await
            .map_err(|e| self.err(e))?;
        Ok(exists == 1)
    }

    /// The versions in the ledger. On a cluster the ledger is replicated, and a row written
    /// through another node may not have arrived yet: the replica first catches up with its
    /// replication log (best effort: an account without SYSTEM rights reads what is there).
    async fn applied_versions(&self) -> Result<Vec<u32>, SinkError> {
        let db = &self.db;
        if self.cluster.is_some() {
            if let Err(e) = self
                .client
                .query(&format!("SYSTEM SYNC REPLICA {db}.schema_migrations"))
                .execute()
                .await
            {
                tracing::debug!(error = %e, "SYSTEM SYNC REPLICA on the migration ledger failed");
            }
        }
        self.client
            .query(&format!("SELECT version FROM {db}.schema_migrations"))
            .fetch_all()
            .await
            .map_err(|e| self.err(e))
    }

    /// Apply pending migrations in order; returns the names applied now.
    pub async fn migrate(&self) -> Result<Vec<String>, SinkError> {
        let db = &self.db;
        let ddl = self.ddl().await?;
        if !ddl.modern && ddl.retention_days > 0 {
            tracing::warn!(
                retention_days = ddl.retention_days,
                "this ClickHouse is older than 20.3: no TTL, clickhouse_retention_days is ignored \
                 (drop old monthly partitions with ALTER TABLE ... DROP PARTITION)"
            );
        }
        // On a cluster every `ON CLUSTER` statement waits for every host, so a worker starting
        // while one replica is down would hang in the bootstrap and fail: once this node has the
        // (replicated) ledger, the bootstrap has run cluster-wide and is skipped.
        if self.cluster.is_none() || !self.ledger_exists().await? {
            for sql in ddl.bootstrap() {
                self.client
                    .query(&sql)
                    .execute()
                    .await
                    .map_err(|e| self.err(e))?;
            }
        }
        let done = self.applied_versions().await?;
        let mut applied = Vec::new();
        for (version, name, stmts) in ddl.migrations() {
            if done.contains(&version) {
                continue;
            }
            for sql in stmts {
                match self.client.query(&sql).execute().await {
                    Ok(()) => {}
                    Err(e) if column_was_there(&sql, &e) => {
                        tracing::info!(migration = name, statement = %sql, "column already there");
                    }
                    Err(source) => {
                        return Err(SinkError::Migration {
                            name: name.to_string(),
                            source,
                        })
                    }
                }
            }
            self.client
                .query(&format!(
                    "INSERT INTO {db}.schema_migrations (version, name, applied_at) VALUES (?, ?, now())"
                ))
                .bind(version)
                .bind(name)
                .execute()
                .await
                .map_err(|e| self.err(e))?;
            applied.push(name.to_string());
        }
        Ok(applied)
    }

    /// Insert a batch: one INSERT per table. Returns only when ClickHouse acknowledged all.
    /// `runs` goes last: a run's row there means everything it caused is in the other tables.
    /// The other three go concurrently (the flush runs beside processing, so its length is
    /// throughput, not detection latency).
    pub async fn insert(&self, batch: &Batch) -> Result<(), SinkError> {
        self.insert_all(std::slice::from_ref(batch)).await
    }

    /// The rows of several batches, one insert per table, in batch order: a flush writes its
    /// partitions' batches as they are instead of first copying them into one (megabytes of
    /// rows per flush, moved again at every doubling of the merged vectors).
    pub(crate) async fn insert_all(&self, batches: &[Batch]) -> Result<(), SinkError> {
        // Slices gathered before the first await: a closure held across it would make the
        // future `Send` only for some lifetimes, which `tokio::spawn` refuses.
        let steps: Vec<&[StepRow]> = batches.iter().map(|b| b.steps.as_slice()).collect();
        let signals: Vec<&[SignalRow]> = batches.iter().map(|b| b.signals.as_slice()).collect();
        let rollups: Vec<&[RollupRow]> = batches.iter().map(|b| b.rollups.as_slice()).collect();
        let runs: Vec<&[RunRow]> = batches.iter().map(|b| b.runs.as_slice()).collect();
        futures::try_join!(
            self.insert_rows("steps", &steps),
            self.insert_rows("signals", &signals),
            self.insert_rows("rollup_minute", &rollups),
        )?;
        self.insert_rows("runs", &runs).await?;
        Ok(())
    }

    async fn insert_rows<T>(&self, table: &str, parts: &[&[T]]) -> Result<(), SinkError>
    where
        T: clickhouse::RowOwned + clickhouse::RowWrite,
    {
        if parts.iter().all(|p| p.is_empty()) {
            return Ok(());
        }
        // `db` is validated as [A-Za-z0-9_]+ at config load and `table` is a constant, so the
        // qualified name needs no escaping (escaping would quote `db.table` as one identifier).
        let full = format!("{}.{}", self.db, table);
        let mut ins = self
            .client
            .insert_unescaped::<T>(&full)
            .await
            .map_err(|e| self.err(e))?;
        for r in parts.iter().flat_map(|p| p.iter()) {
            ins.write(r).await.map_err(|e| self.err(e))?;
        }
        ins.end().await.map_err(|e| self.err(e))
    }
}

/// Split a migration file into statements on `;` at line ends, dropping comment-only chunks.
fn statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in sql.lines() {
        let t = line.trim();
        if t.starts_with("--") {
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
        if t.ends_with(';') {
            let stmt = cur.trim().trim_end_matches(';').trim().to_string();
            if !stmt.is_empty() {
                out.push(stmt);
            }
            cur.clear();
        }
    }
    let rest = cur.trim();
    if !rest.is_empty() {
        out.push(rest.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(modern: bool, cluster: Option<&str>, retention_days: u32) -> DdlOptions {
        DdlOptions {
            db: "eddy".into(),
            modern,
            cluster: cluster.map(String::from),
            retention_days,
        }
    }

    #[test]
    fn migrations_split_into_statements() {
        for m in MIGRATIONS {
            for sql in [m.modern, m.legacy] {
                let stmts = statements(sql);
                assert!(!stmts.is_empty(), "{}", m.name);
                assert!(stmts
                    .iter()
                    .all(|s| s.starts_with("CREATE TABLE IF NOT EXISTS {db}.")
                        || s.starts_with("ALTER TABLE {db}.")));
            }
        }
    }

    #[test]
    fn server_versions_pick_the_form() {
        assert!(!is_modern("18.16.1"));
        assert!(!is_modern("20.1.2.4"));
        assert!(is_modern("20.3.1"));
        assert!(is_modern("24.8.4.13"));
        assert!(is_modern("26.9.2.1"));
        assert!(is_modern("weird"));
    }

    #[test]
    fn both_forms_declare_the_same_columns_in_the_same_order() {
        // RowBinary is positional and eddy names the columns: one row struct serves both forms.
        let cols = |sql: &str| -> Vec<Vec<String>> {
            statements(sql)
                .iter()
                .map(|s| match s.split_once(" ADD COLUMN ") {
                    // (table, column) of an ALTER, with or without IF NOT EXISTS
                    Some((head, col)) => vec![
                        head.to_string(),
                        col.trim_start_matches("IF NOT EXISTS ")
                            .split_whitespace()
                            .next()
                            .unwrap_or_default()
                            .to_string(),
                    ],
                    None => s
                        .lines()
                        .map(str::trim)
                        .skip_while(|l| *l != "(")
                        .skip(1)
                        .take_while(|l| *l != ")")
                        .filter_map(|l| l.split_whitespace().next().map(String::from))
                        .collect(),
                })
                .collect()
        };
        for m in MIGRATIONS {
            assert_eq!(cols(m.modern), cols(m.legacy), "{}", m.name);
        }
    }

    #[test]
    fn legacy_form_has_nothing_18_16_rejects() {
        let all = opts(false, None, 30).migrations();
        for s in all.iter().flat_map(|m| &m.2) {
            for word in [
                "DateTime64",
                "LowCardinality",
                "TTL",
                "{retention_days}",
                "ADD COLUMN IF NOT EXISTS",
            ] {
                assert!(!s.contains(word), "{word} in {s}");
            }
        }
    }

    #[test]
    fn retention_renders_a_ttl_only_when_set() {
        let none = opts(true, None, 0).script();
        assert!(!none.contains("TTL") && !none.contains("{retention_days}"));
        let some = opts(true, None, 90).script();
        assert_eq!(some.matches("INTERVAL 90 DAY").count(), 4, "{some}");
        assert!(some.contains("TTL ended_at + INTERVAL 90 DAY;"));
    }

    #[test]
    fn cluster_renders_replicated_locals_and_distributed_tables() {
        let m = opts(true, Some("prod"), 0).migrations();
        let stmts = &m[0].2;
        assert_eq!(stmts.len(), 6);
        for t in ["steps", "signals", "runs"] {
            let local = stmts
                .iter()
                .find(|s| {
                    s.starts_with(&format!(
                        "CREATE TABLE IF NOT EXISTS eddy.{t}_local ON CLUSTER 'prod'"
                    ))
                })
                .unwrap_or_else(|| panic!("{t}_local"));
            assert!(local.contains(&format!(
                "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{{shard}}/eddy/{t}_local', '{{replica}}', src_offset)"
            )));
            assert!(stmts.iter().any(|s| s.starts_with(&format!(
                "CREATE TABLE IF NOT EXISTS eddy.{t} ON CLUSTER 'prod' AS eddy.{t}_local"
            )) && s.contains(&format!(
                "Distributed('prod', 'eddy', '{t}_local', cityHash64(project_id, run_id))"
            ))));
        }
        let boot = opts(true, Some("prod"), 0).bootstrap();
        assert!(boot[0].ends_with("ON CLUSTER 'prod'"));
        assert!(
            boot[1].starts_with("CREATE TABLE IF NOT EXISTS eddy.schema_migrations ON CLUSTER 'prod'")
                && boot[1].contains(
                    "ReplicatedReplacingMergeTree('/clickhouse/tables/eddy/schema_migrations', '{shard}-{replica}')"
                ),
            "{}",
            boot[1]
        );
        let alters = &m[2].2;
        let steers = alters
            .iter()
            .position(|s| {
                s == "ALTER TABLE eddy.runs_local ON CLUSTER 'prod' ADD COLUMN IF NOT EXISTS steers UInt32"
            })
            .expect("the column on every node's local table");
        assert_eq!(
            alters[steers + 1..steers + 3],
            [
                "DROP TABLE IF EXISTS eddy.runs ON CLUSTER 'prod'".to_string(),
                "CREATE TABLE IF NOT EXISTS eddy.runs ON CLUSTER 'prod' AS eddy.runs_local\n\
                 ENGINE = Distributed('prod', 'eddy', 'runs_local', cityHash64(project_id, run_id))"
                    .to_string()
            ],
            "the Distributed table made again from the local one"
        );
        assert!(
            !alters
                .iter()
                .any(|s| s.starts_with("ALTER TABLE eddy.runs ON CLUSTER")),
            "never an ALTER of a Distributed table on the cluster: ClickHouse refuses it"
        );
        let single = opts(true, None, 0).bootstrap();
        assert!(!single.concat().contains("ON CLUSTER") && !single.concat().contains("Replicated"));
    }
}
