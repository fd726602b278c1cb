//! The SQL behind each page, and the row each query returns. Values enter only as literals
//! rendered by `query::literal` (typed, escaped). Only functions ClickHouse 18.16 has; `FINAL`
//! everywhere, so a redelivered batch never counts twice. Each row struct sits beside its SQL:
//! a column renamed on one side and not the other fails the decode (`deny_unknown_fields`).
use super::{decode, UiError};
use crate::query::{fetch_tsv, literal};
use serde::de::{DeserializeOwned, Deserializer};
use serde::Deserialize;

/// A time window `[from, to)` in epoch seconds, a chart bucket, and an optional project.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Window {
    pub(crate) from: i64,
    pub(crate) to: i64,
    pub(crate) bucket: u32,
    pub(crate) project: Option<String>,
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

/// Owns its SQL so that several can run at once (`try_join!`) without temporaries to outlive.
async fn fetch<T: DeserializeOwned>(
    client: &clickhouse::Client,
    sql: String,
) -> Result<Vec<T>, UiError> {
    let table = fetch_tsv(client, &sql).await?;
    Ok(decode::rows(&table)?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Latest {
    latest: u32,
}

fn latest_sql() -> &'static str {
    "SELECT toUInt32(max(bucket)) AS latest FROM rollup_minute"
}

/// The start of the newest rollup minute, 0 when there is none: where the default window ends.
pub(crate) async fn latest(client: &clickhouse::Client) -> Result<i64, UiError> {
    let rows: Vec<Latest> = fetch(client, latest_sql().into()).await?;
    Ok(rows.first().map_or(0, |l| i64::from(l.latest)))
}

/// One agent in one chart bucket.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SeriesRow {
    /// The bucket's start, epoch seconds.
    pub(crate) t: i64,
    pub(crate) agent: String,
    pub(crate) ended: u64,
    pub(crate) loops: u64,
    pub(crate) loop_cost: f64,
}

/// Runs count in the bucket they ended in, cost in the bucket it was spent in (see
/// 0002_rollups.sql).
fn series_sql(w: &Window) -> String {
    format!(
        "SELECT intDiv(toUInt32(bucket), {b}) * {b} AS t, agent_name AS agent, \
         sum(runs_ended) AS ended, sum(loop_runs) AS loops, \
         round(sum(loop_cost_usd), 6) AS loop_cost \
         FROM rollup_minute FINAL WHERE {f} GROUP BY t, agent ORDER BY t, agent",
        b = w.bucket,
        f = w.filter("bucket")
    )
}

/// One agent over the whole window: the table under the charts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentRow {
    pub(crate) agent: String,
    pub(crate) ended: u64,
    pub(crate) loops: u64,
    /// Loop runs over runs ended, 0 to 1.
    pub(crate) loop_rate: f64,
    pub(crate) loop_cost: f64,
    pub(crate) cost: f64,
}

/// Ordered by cost inside loops: the charts draw the first few.
fn agents_sql(w: &Window) -> String {
    format!(
        "SELECT agent_name AS agent, sum(runs_ended) AS ended, sum(loop_runs) AS loops, \
         round(sum(loop_runs) / greatest(sum(runs_ended), 1), 4) AS loop_rate, \
         round(sum(loop_cost_usd), 6) AS loop_cost, round(sum(cost_usd), 6) AS cost \
         FROM rollup_minute FINAL WHERE {f} GROUP BY agent \
         ORDER BY loop_cost DESC, loops DESC, agent LIMIT 50",
        f = w.filter("bucket")
    )
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TerminationRow {
    /// Empty when the run's end named none.
    pub(crate) reason: String,
    pub(crate) runs: u64,
}

fn terminations_sql(w: &Window) -> String {
    format!(
        "SELECT termination_reason AS reason, count() AS runs FROM runs FINAL WHERE {f} \
         GROUP BY reason ORDER BY runs DESC, reason",
        f = w.filter("ended_at")
    )
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DetectorRow {
    pub detector: String,
    pub(crate) signals: u64,
    pub(crate) runs: u64,
}

fn detectors_sql(w: &Window) -> String {
    format!(
        "SELECT detector, count() AS signals, uniqExact(project_id, run_id) AS runs \
         FROM signals FINAL WHERE {f} GROUP BY detector ORDER BY signals DESC, detector LIMIT 20",
        f = w.filter("ts")
    )
}

/// A run named by its project and id.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunRef {
    pub(crate) project: String,
    pub(crate) run: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PatternRow {
    pub(crate) detector: String,
    pub(crate) pattern: String,
    pub(crate) signals: u64,
    pub(crate) runs: u64,
    #[serde(deserialize_with = "run_refs")]
    pub(crate) examples: Vec<RunRef>,
}

/// The examples column of [`patterns_sql`]: runs separated by tabs, each `project\nrun`.
fn run_refs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<RunRef>, D::Error> {
    let joined = String::deserialize(d)?;
    Ok(joined
        .split('\t')
        .filter_map(|e| e.split_once('\n'))
        .map(|(project, run)| RunRef {
            project: project.to_string(),
            run: run.to_string(),
        })
        .collect())
}

/// Signals grouped by detector and pattern, with up to three example runs (project and run id
/// joined by a newline, which neither may contain). Grouped by run first: 18.16's
/// `groupUniqArray` takes no size limit, `groupArray(3)` does.
fn patterns_sql(w: &Window) -> String {
    format!(
        "SELECT detector, pattern, sum(n) AS signals, count() AS runs, \
         arrayStringConcat(groupArray(3)(concat(project_id, '\\n', run_id)), '\\t') AS examples \
         FROM (SELECT detector, pattern, project_id, run_id, count() AS n FROM signals FINAL \
         WHERE {f} GROUP BY detector, pattern, project_id, run_id) \
         GROUP BY detector, pattern ORDER BY runs DESC, signals DESC, detector, pattern LIMIT 20",
        f = w.filter("ts")
    )
}

/// Everything the fleet page shows over one window.
pub(crate) struct Fleet {
    pub(crate) series: Vec<SeriesRow>,
    pub(crate) agents: Vec<AgentRow>,
    pub(crate) terminations: Vec<TerminationRow>,
    pub(crate) detectors: Vec<DetectorRow>,
    pub(crate) patterns: Vec<PatternRow>,
}

/// The fleet page's five queries, concurrently.
pub(crate) async fn fleet(client: &clickhouse::Client, w: &Window) -> Result<Fleet, UiError> {
    let (series, agents, terminations, detectors, patterns) = futures::try_join!(
        fetch(client, series_sql(w)),
        fetch(client, agents_sql(w)),
        fetch(client, terminations_sql(w)),
        fetch(client, detectors_sql(w)),
        fetch(client, patterns_sql(w)),
    )?;
    Ok(Fleet {
        series,
        agents,
        terminations,
        detectors,
        patterns,
    })
}

fn run_filter(project: &str, run: &str) -> String {
    format!("project_id = {} AND run_id = {}", s(project), s(run))
}

/// A run's row in `runs`, written when it ended.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunRow {
    pub(crate) agent_name: String,
    pub(crate) status: String,
    pub(crate) termination_reason: String,
    pub(crate) loop_detected: bool,
    /// Whether `loop_step_index` means anything (a loop can be caught without an onset).
    pub(crate) has_loop_step_index: bool,
    pub(crate) loop_step_index: u64,
    pub(crate) loop_caught_step_index: u64,
    pub(crate) signals: u32,
    pub(crate) steps: u64,
    pub(crate) tokens: u64,
    pub(crate) cost: f64,
    pub(crate) started: String,
    pub(crate) ended: String,
}

fn run_sql(project: &str, run: &str) -> String {
    format!(
        "SELECT agent_name, status, termination_reason, loop_detected, has_loop_step_index, \
         loop_step_index, loop_caught_step_index, signals, steps, tokens, round(cost_usd, 6) AS cost, \
         toString(started_at) AS started, toString(ended_at) AS ended \
         FROM runs FINAL WHERE {} LIMIT 1",
        run_filter(project, run)
    )
}

/// At most this many steps are drawn (a runaway run can have many more).
pub(crate) const MAX_STEPS: u32 = 2000;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StepRow {
    pub(crate) step_index: u64,
    pub(crate) ts_ms: i64,
    pub(crate) step_type: String,
    pub(crate) tool_name: String,
    /// Lower-case hex; all zeros when the step has no tool input.
    pub(crate) input_fp: String,
    /// 1 succeeded, 0 failed, anything else: not a tool call.
    pub(crate) tool_success: i8,
    pub(crate) tool_latency_ms: f64,
    pub(crate) tokens: u64,
    pub(crate) cost: f64,
}

fn steps_sql(project: &str, run: &str) -> String {
    format!(
        "SELECT step_index, ts_ms, step_type, tool_name, \
         lower(hex(canonical_input_fp)) AS input_fp, \
         tool_success, tool_latency_ms, tokens, round(cost_usd, 6) AS cost \
         FROM steps FINAL WHERE {} ORDER BY step_index LIMIT {MAX_STEPS}",
        run_filter(project, run)
    )
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SignalRow {
    pub(crate) kind: String,
    pub(crate) detector: String,
    pub(crate) severity: String,
    pub(crate) pattern: String,
    pub(crate) step_index: u64,
    pub(crate) first_step_index: u64,
    pub(crate) hits: u32,
    /// The steps the signal saw, comma-separated.
    pub(crate) indices: String,
    /// JSON, as the detector wrote it.
    pub(crate) evidence: String,
}

fn signals_sql(project: &str, run: &str) -> String {
    format!(
        "SELECT kind, detector, severity, pattern, step_index, first_step_index, hits, \
         arrayStringConcat(arrayMap(x -> toString(x), step_indices), ',') AS indices, \
         evidence FROM signals FINAL WHERE {} ORDER BY step_index, event_id",
        run_filter(project, run)
    )
}

/// Everything the run page shows; `summary` is None until the run has ended.
pub(crate) struct Run {
    pub(crate) summary: Option<RunRow>,
    pub(crate) steps: Vec<StepRow>,
    pub(crate) signals: Vec<SignalRow>,
}

/// The run page's three queries, concurrently.
pub(crate) async fn run(
    client: &clickhouse::Client,
    project: &str,
    run: &str,
) -> Result<Run, UiError> {
    let (summary, steps, signals) = futures::try_join!(
        fetch::<RunRow>(client, run_sql(project, run)),
        fetch(client, steps_sql(project, run)),
        fetch(client, signals_sql(project, run)),
    )?;
    Ok(Run {
        summary: summary.into_iter().next(),
        steps,
        signals,
    })
}

/// Search criteria; empty ones do not filter.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Search {
    pub(crate) run_id: String,
    pub(crate) agent: String,
    pub(crate) from: Option<i64>,
    pub(crate) to: Option<i64>,
}

pub(crate) const SEARCH_LIMIT: u32 = 100;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchRow {
    pub(crate) project_id: String,
    pub(crate) run_id: String,
    pub(crate) agent_name: String,
    pub(crate) ended: String,
    pub(crate) termination_reason: String,
    pub(crate) loop_detected: bool,
    pub(crate) steps: u64,
    pub(crate) cost: f64,
}

fn search_sql(q: &Search) -> String {
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

/// The runs matching `q`, newest first, at most [`SEARCH_LIMIT`].
pub(crate) async fn search(
    client: &clickhouse::Client,
    q: &Search,
) -> Result<Vec<SearchRow>, UiError> {
    fetch(client, search_sql(q)).await
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

    #[test]
    fn example_runs_are_split_into_project_and_run() {
        let t = crate::query::parse_tsv(
            "detector\tpattern\tsignals\truns\texamples\n\
             d\tp\t3\t2\tp1\\nr1\\tp2\\nr\\\\2\n",
        );
        let rows: Vec<PatternRow> = decode::rows(&t).unwrap();
        assert_eq!(
            rows[0].examples,
            vec![
                RunRef {
                    project: "p1".into(),
                    run: "r1".into()
                },
                RunRef {
                    project: "p2".into(),
                    run: "r\\2".into()
                },
            ]
        );
    }
}
