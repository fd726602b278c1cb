//! ClickHouse sink: migrations and RowBinary batch inserts.
//!
//! Inserts are idempotent by construction: every row has a deterministic identity (the ORDER BY
//! of its ReplacingMergeTree) and a version (the source offset), so a batch that is inserted
//! again after a crash collapses onto the first copy.
pub mod rows;

use crate::config::Config;
pub use rows::{RunRow, SignalRow, StepRow};

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("ClickHouse at {url}: {source}")]
    ClickHouse {
        url: String,
        #[source]
        source: clickhouse::error::Error,
    },
    #[error("migration {name} failed: {source}")]
    Migration {
        name: String,
        #[source]
        source: clickhouse::error::Error,
    },
}

struct Migration {
    version: u32,
    name: &'static str,
    sql: &'static str,
}

const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "0001_core_tables",
    sql: include_str!("../../schemas/clickhouse/0001_core_tables.sql"),
}];

#[derive(Clone)]
pub struct ClickHouseSink {
    client: clickhouse::Client,
    url: String,
    db: String,
}

#[derive(Debug, Default)]
pub struct Batch {
    pub steps: Vec<StepRow>,
    pub signals: Vec<SignalRow>,
    pub runs: Vec<RunRow>,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty() && self.signals.is_empty() && self.runs.is_empty()
    }
    pub fn len(&self) -> usize {
        self.steps.len() + self.signals.len() + self.runs.len()
    }
    pub fn clear(&mut self) {
        self.steps.clear();
        self.signals.clear();
        self.runs.clear();
    }
}

impl ClickHouseSink {
    pub async fn connect(cfg: &Config) -> Result<Self, SinkError> {
        let mut client = clickhouse::Client::default()
            .with_url(&cfg.clickhouse_url)
            // Old servers (Debian's 18.16) lack RowBinaryWithNamesAndTypes; rows are typed here.
            .with_validation(false);
        if let Some(u) = &cfg.clickhouse_user {
            client = client.with_user(u);
        }
        if let Some(p) = &cfg.clickhouse_password {
            client = client.with_password(p);
        }
        let sink = Self {
            client,
            url: cfg.clickhouse_url.clone(),
            db: cfg.clickhouse_database.clone(),
        };
        sink.version().await?;
        Ok(sink)
    }

    fn err(&self, source: clickhouse::error::Error) -> SinkError {
        SinkError::ClickHouse {
            url: self.url.clone(),
            source,
        }
    }

    pub fn database(&self) -> &str {
        &self.db
    }

    pub fn client(&self) -> &clickhouse::Client {
        &self.client
    }

    pub async fn version(&self) -> Result<String, SinkError> {
        self.client
            .query("SELECT version()")
            .fetch_one::<String>()
            .await
            .map_err(|e| self.err(e))
    }

    /// Apply pending migrations in order; returns the names applied now.
    pub async fn migrate(&self) -> Result<Vec<String>, SinkError> {
        let db = &self.db;
        self.client
            .query(&format!("CREATE DATABASE IF NOT EXISTS {db}"))
            .execute()
            .await
            .map_err(|e| self.err(e))?;
        self.client
            .query(&format!(
                "CREATE TABLE IF NOT EXISTS {db}.schema_migrations \
                 (version UInt32, name String, applied_at DateTime) \
                 ENGINE = ReplacingMergeTree ORDER BY version"
            ))
            .execute()
            .await
            .map_err(|e| self.err(e))?;
        let done: Vec<u32> = self
            .client
            .query(&format!("SELECT version FROM {db}.schema_migrations"))
            .fetch_all()
            .await
            .map_err(|e| self.err(e))?;
        let mut applied = Vec::new();
        for m in MIGRATIONS {
            if done.contains(&m.version) {
                continue;
            }
            for stmt in statements(m.sql) {
                let sql = stmt.replace("{db}", db);
                self.client
                    .query(&sql)
                    .execute()
                    .await
                    .map_err(|source| SinkError::Migration {
                        name: m.name.to_string(),
                        source,
                    })?;
            }
            self.client
                .query(&format!(
                    "INSERT INTO {db}.schema_migrations (version, name, applied_at) VALUES (?, ?, now())"
                ))
                .bind(m.version)
                .bind(m.name)
                .execute()
                .await
                .map_err(|e| self.err(e))?;
            applied.push(m.name.to_string());
        }
        Ok(applied)
    }

    /// Insert a batch: one INSERT per table. Returns only when ClickHouse acknowledged all.
    pub async fn insert(&self, batch: &Batch) -> Result<(), SinkError> {
        self.insert_rows("steps", &batch.steps).await?;
        self.insert_rows("signals", &batch.signals).await?;
        self.insert_rows("runs", &batch.runs).await?;
        Ok(())
    }

    async fn insert_rows<T>(&self, table: &str, rows: &[T]) -> Result<(), SinkError>
    where
        T: clickhouse::RowOwned + clickhouse::RowWrite,
    {
        if rows.is_empty() {
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
        for r in rows {
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
    #[test]
    fn migrations_split_into_statements() {
        let stmts = super::statements(super::MIGRATIONS[0].sql);
        assert_eq!(stmts.len(), 3);
        assert!(stmts
            .iter()
            .all(|s| s.starts_with("CREATE TABLE IF NOT EXISTS {db}.")));
    }
}
