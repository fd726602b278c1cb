//! What `eddy fleet-watch` reads from ClickHouse: each project's newest rollup minute, and the
//! minutes of a span of windows. `FINAL`, so a redelivered batch never counts twice.
use super::eval::MinuteRow;
use super::FleetError;
use clickhouse::Row;
use serde::Deserialize;

#[derive(Debug, Row, Deserialize)]
struct Latest {
    project_id: String,
    latest: u32,
}

#[derive(Debug, Row, Deserialize)]
struct Minute {
    bucket: u32,
    agent_name: String,
    run_id: String,
    runs_ended: u8,
    loop_runs: u8,
    loop_cost_usd: f64,
}

pub(crate) struct Store {
    client: clickhouse::Client,
    db: String,
}

impl Store {
    pub(crate) fn new(client: clickhouse::Client, db: &str) -> Self {
        Self {
            client,
            db: db.to_string(),
        }
    }

    /// Each project's event-time watermark: the end of its newest rollup minute.
    pub(crate) async fn watermarks(&self) -> Result<Vec<(String, u32)>, FleetError> {
        let sql = format!(
            "SELECT project_id, toUInt32(toUInt32(max(bucket)) + 60) AS latest FROM {}.rollup_minute \
             GROUP BY project_id ORDER BY project_id",
            self.db
        );
        let rows: Vec<Latest> = self.client.query(&sql).fetch_all().await?;
        Ok(rows.into_iter().map(|l| (l.project_id, l.latest)).collect())
    }

    /// The project's minutes in `[from, to)`, ordered by minute then run (the order the
    /// evaluation sums in, so the same rows always give the same values).
    pub(crate) async fn minutes(
        &self,
        project: &str,
        from: u32,
        to: u32,
    ) -> Result<Vec<MinuteRow>, FleetError> {
        let sql = format!(
            "SELECT bucket, agent_name, run_id, runs_ended, loop_runs, loop_cost_usd \
             FROM {}.rollup_minute FINAL \
             WHERE project_id = ? AND bucket >= toDateTime(?) AND bucket < toDateTime(?) \
             ORDER BY bucket, run_id",
            self.db
        );
        let rows: Vec<Minute> = self
            .client
            .query(&sql)
            .bind(project)
            .bind(from)
            .bind(to)
            .fetch_all()
            .await?;
        Ok(rows
            .into_iter()
            .map(|m| MinuteRow {
                bucket: m.bucket,
                agent_name: m.agent_name,
                run_id: m.run_id,
                runs_ended: m.runs_ended,
                loop_runs: m.loop_runs,
                loop_cost_usd: m.loop_cost_usd,
            })
            .collect())
    }
}
