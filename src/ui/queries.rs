//! The SQL behind each page. Values enter only as literals rendered by `query::literal` (typed,
//! escaped). Only functions ClickHouse 18.16 has; `FINAL` everywhere, so a redelivered batch
//! never counts twice.
use crate::query::{fetch_tsv, literal, QueryError, Table};

/// A time window `[from, to)` in epoch seconds, a chart bucket, and an optional project.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub from: i64,
    pub to: i64,
    pub bucket: u32,
    pub project: Option<String>,
}

fn s(v: &str) -> String {
    literal("", "String", v).unwrap_or_else(|_| "''".into())
}

fn dt(secs: i64) -> String {
    format!("toDateTime({secs}, 'UTC')")
}

impl Window {
    /// `AND col >= from AND col < to [AND project_id = ...]`
    fn filter(&self, col: &str) -> String {
        let mut f = format!("{col} >= {} AND {col} < {}", dt(self.from), dt(self.to));
        if let Some(p) = &self.project {
            f.push_str(&format!(" AND project_id = {}", s(p)));
        }
        f
    }
}

/// The newest rollup minute (0 when empty): where the default window ends.
pub fn latest_sql() -> &'static str {
    "SELECT toUInt32(max(bucket)) AS latest FROM rollup_minute"
}

/// Per bucket and agent: runs ended, loop runs, cost inside loops. Runs count in the bucket they
/// ended in, cost in the bucket it was spent in (see 0002_rollups.sql).
pub fn series_sql(w: &Window) -> String {
    format!(
        "SELECT intDiv(toUInt32(bucket), {b}) * {b} AS t, agent_name AS agent, \
         sum(runs_ended) AS ended, sum(loop_runs) AS loops, \
         round(sum(loop_cost_usd), 6) AS loop_cost \
         FROM rollup_minute FINAL WHERE {f} GROUP BY t, agent ORDER BY t, agent",
        b = w.bucket,
        f = w.filter("bucket")
    )
}

/// Per agent over the whole window: the table under the charts.
pub fn agents_sql(w: &Window) -> String {
    format!(
        "SELECT agent_name AS agent, sum(runs_ended) AS ended, sum(loop_runs) AS loops, \
         round(sum(loop_runs) / greatest(sum(runs_ended), 1), 4) AS loop_rate, \
         round(sum(loop_cost_usd), 6) AS loop_cost, round(sum(cost_usd), 6) AS cost \
         FROM rollup_minute FINAL WHERE {f} GROUP BY agent \
         ORDER BY loop_cost DESC, loops DESC, agent LIMIT 50",
        f = w.filter("bucket")
    )
}

pub fn terminations_sql(w: &Window) -> String {
    format!(
        "SELECT termination_reason AS reason, count() AS runs FROM runs FINAL WHERE {f} \
         GROUP BY reason ORDER BY runs DESC, reason",
        f = w.filter("ended_at")
    )
}

pub fn detectors_sql(w: &Window) -> String {
    format!(
        "SELECT detector, count() AS signals, uniqExact(project_id, run_id) AS runs \
         FROM signals FINAL WHERE {f} GROUP BY detector ORDER BY signals DESC, detector LIMIT 20",
        f = w.filter("ts")
    )
}

/// Signals grouped by detector and pattern, with up to three example runs (project and run id
/// joined by a newline, which neither may contain). Grouped by run first: 18.16's
/// `groupUniqArray` takes no size limit, `groupArray(3)` does.
pub fn patterns_sql(w: &Window) -> String {
    format!(
        "SELECT detector, pattern, sum(n) AS signals, count() AS runs, \
         arrayStringConcat(groupArray(3)(concat(project_id, '\\n', run_id)), '\\t') AS examples \
         FROM (SELECT detector, pattern, project_id, run_id, count() AS n FROM signals FINAL \
         WHERE {f} GROUP BY detector, pattern, project_id, run_id) \
         GROUP BY detector, pattern ORDER BY runs DESC, signals DESC, detector, pattern LIMIT 20",
        f = w.filter("ts")
    )
}

fn run_filter(project: &str, run: &str) -> String {
    format!("project_id = {} AND run_id = {}", s(project), s(run))
}

pub fn run_sql(project: &str, run: &str) -> String {
    format!(
        "SELECT agent_name, status, termination_reason, loop_detected, has_loop_step_index, \
         loop_step_index, loop_caught_step_index, signals, steps, tokens, round(cost_usd, 6) AS cost, \
         toString(started_at) AS started, toString(ended_at) AS ended \
         FROM runs FINAL WHERE {} LIMIT 1",
        run_filter(project, run)
    )
}

/// At most this many steps are drawn (a runaway run can have many more).
pub const MAX_STEPS: u32 = 2000;

pub fn steps_sql(project: &str, run: &str) -> String {
    format!(
        "SELECT step_index, ts_ms, step_type, agent, tool_name, \
         lower(hex(canonical_input_fp)) AS input_fp, lower(hex(canonical_output_fp)) AS output_fp, \
         tool_success, tool_latency_ms, tokens, round(cost_usd, 6) AS cost \
         FROM steps FINAL WHERE {} ORDER BY step_index LIMIT {MAX_STEPS}",
        run_filter(project, run)
    )
}

pub fn signals_sql(project: &str, run: &str) -> String {
    format!(
        "SELECT event_id, kind, detector, severity, pattern, step_index, first_step_index, hits, \
         arrayStringConcat(arrayMap(x -> toString(x), step_indices), ',') AS indices, \
         evidence FROM signals FINAL WHERE {} ORDER BY step_index, event_id",
        run_filter(project, run)
    )
}

/// Search criteria; empty ones do not filter.
#[derive(Debug, Default, Clone)]
pub struct Search {
    pub run_id: String,
    pub agent: String,
    pub from: Option<i64>,
    pub to: Option<i64>,
}

pub const SEARCH_LIMIT: u32 = 100;

pub fn search_sql(q: &Search) -> String {
    let mut conds = vec!["1".to_string()];
    if !q.run_id.is_empty() {
        conds.push(format!("position(run_id, {}) > 0", s(&q.run_id)));
    }
    if !q.agent.is_empty() {
        conds.push(format!("agent_name = {}", s(&q.agent)));
    }
    if let Some(f) = q.from {
        conds.push(format!("ended_at >= {}", dt(f)));
    }
    if let Some(t) = q.to {
        conds.push(format!("ended_at < {}", dt(t)));
    }
    format!(
        "SELECT project_id, run_id, agent_name, toString(ended_at) AS ended, termination_reason, \
         loop_detected, steps, round(cost_usd, 6) AS cost FROM runs FINAL WHERE {} \
         ORDER BY ended DESC, project_id, run_id LIMIT {SEARCH_LIMIT}",
        conds.join(" AND ")
    )
}

pub async fn fetch(client: &clickhouse::Client, sql: &str) -> Result<Table, QueryError> {
    fetch_tsv(client, sql).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_literals_never_pasted() {
        let sql = search_sql(&Search {
            run_id: "x') OR 1=1 --".into(),
            agent: "a\\'".into(),
            ..Default::default()
        });
        assert!(sql.contains(r"position(run_id, 'x\') OR 1=1 --')"), "{sql}");
        assert!(sql.contains(r"agent_name = 'a\\\''"), "{sql}");
        let w = Window {
            from: 10,
            to: 20,
            bucket: 60,
            project: Some("p'".into()),
        };
        assert!(series_sql(&w).contains(r"project_id = 'p\''"));
        assert!(series_sql(&w).contains("bucket >= toDateTime(10, 'UTC')"));
    }
}
