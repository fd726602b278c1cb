//! Routes and the pages they render.
use super::html::{esc, legend, link, page, query_part, run_href, table, Cell};
use super::queries::{self, Search, Window};
use super::svg::{self, Mark};
use super::{live, AppState, UiError};
use crate::query::{parse_datetime, Table};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

type Params = Query<BTreeMap<String, String>>;

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(fleet))
        .route("/runs/{project_id}/{run_id}", get(run))
        .route("/search", get(search))
        .route("/live", get(live::page_handler))
        .route("/live/events", get(live::events))
        .with_state(state)
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let status = match self {
            UiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            // Not eddy's fault, nor lasting once a worker ran against the database.
            UiError::Query(crate::query::QueryError::NoSchema(_)) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let body = format!("<p>{}</p>", esc(&self.to_string()));
        (status, Html(page("Error", &body))).into_response()
    }
}

/// Named ranges offered on the fleet page, in seconds.
const RANGES: &[(&str, i64)] = &[
    ("1h", 3600),
    ("6h", 6 * 3600),
    ("24h", 86400),
    ("7d", 7 * 86400),
    ("30d", 30 * 86400),
];
const BUCKETS: &[u32] = &[60, 300, 900, 3600, 6 * 3600, 86400];
/// Lines drawn per chart (the agents with the most cost inside loops).
const CHART_AGENTS: usize = 8;

fn cell_f(t: &Table, row: &[String], col: &str) -> f64 {
    t.column(col)
        .and_then(|i| row.get(i))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn cell<'a>(t: &Table, row: &'a [String], col: &str) -> &'a str {
    t.column(col)
        .and_then(|i| row.get(i))
        .map_or("", String::as_str)
}

fn now_secs() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

fn bad(what: &str, v: &str) -> UiError {
    UiError::BadRequest(format!("{what}: `{v}` is not valid"))
}

/// The window the fleet page shows: `range` back from `to` (default: the newest data).
async fn window(st: &AppState, p: &BTreeMap<String, String>) -> Result<Window, UiError> {
    let range_name = p.get("range").map_or("24h", String::as_str);
    let range = RANGES
        .iter()
        .find(|r| r.0 == range_name)
        .map(|r| r.1)
        .ok_or_else(|| bad("range", range_name))?;
    let to = match p.get("to").filter(|v| !v.is_empty()) {
        Some(v) => parse_datetime(v).ok_or_else(|| bad("to", v))?,
        None => {
            let t = queries::fetch(&st.client, queries::latest_sql()).await?;
            let latest: i64 = t
                .rows
                .first()
                .and_then(|r| r.first())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if latest > 0 {
                latest + 60
            } else {
                now_secs()
            }
        }
    };
    let bucket = match p.get("bucket").filter(|v| !v.is_empty()) {
        Some(v) => v
            .parse::<u32>()
            .ok()
            .filter(|b| BUCKETS.contains(b))
            .ok_or_else(|| bad("bucket", v))?,
        // About 60 points across the range.
        None => BUCKETS
            .iter()
            .copied()
            .find(|b| range / i64::from(*b) <= 60)
            .unwrap_or(86400),
    };
    let project = p.get("project").filter(|v| !v.is_empty()).cloned();
    Ok(Window {
        from: to - range,
        to,
        bucket,
        project,
    })
}

fn fleet_form(p: &BTreeMap<String, String>, w: &Window) -> String {
    let range = p.get("range").map_or("24h", String::as_str);
    let mut f = String::from(r#"<form method="get" action="/">range <select name="range">"#);
    for (name, _) in RANGES {
        let sel = if *name == range { " selected" } else { "" };
        f.push_str(&format!(r#"<option{sel}>{name}</option>"#));
    }
    f.push_str(r#"</select> bucket <select name="bucket">"#);
    for b in BUCKETS {
        let sel = if *b == w.bucket { " selected" } else { "" };
        f.push_str(&format!(r#"<option value="{b}"{sel}>{b} s</option>"#));
    }
    f.push_str(&format!(
        r#"</select> project <input name="project" value="{}" placeholder="all"> ending <input name="to" value="{}" placeholder="newest data" size="20"> <button>show</button></form>"#,
        esc(w.project.as_deref().unwrap_or("")),
        esc(p.get("to").map_or("", String::as_str)),
    ));
    f
}

fn fmt_time(secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|d| {
            d.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

async fn fleet(State(st): State<Arc<AppState>>, Query(p): Params) -> Result<Html<String>, UiError> {
    let w = window(&st, &p).await?;
    let c = &st.client;
    let (series_sql, agents_sql, term_sql, det_sql, pat_sql) = (
        queries::series_sql(&w),
        queries::agents_sql(&w),
        queries::terminations_sql(&w),
        queries::detectors_sql(&w),
        queries::patterns_sql(&w),
    );
    let (series, agents, terms, detectors, patterns) = futures::try_join!(
        queries::fetch(c, &series_sql),
        queries::fetch(c, &agents_sql),
        queries::fetch(c, &term_sql),
        queries::fetch(c, &det_sql),
        queries::fetch(c, &pat_sql),
    )?;

    let mut body = fleet_form(&p, &w);
    body.push_str(&format!(
        r#"<p class="muted" id="window">{} to {} (UTC), {} s buckets{}</p>"#,
        esc(&fmt_time(w.from)),
        esc(&fmt_time(w.to)),
        w.bucket,
        w.project
            .as_deref()
            .map(|p| format!(", project {}", esc(p)))
            .unwrap_or_default()
    ));

    // Charts: every bucket of the window on the x axis, a line per top agent.
    let b = i64::from(w.bucket);
    let first = w.from.div_euclid(b) * b;
    let xs: Vec<i64> = (0..)
        .map(|i| first + i * b)
        .take_while(|x| *x < w.to)
        .collect();
    let chart_agents: Vec<String> = agents
        .rows
        .iter()
        .take(CHART_AGENTS)
        .map(|r| cell(&agents, r, "agent").to_string())
        .collect();
    let mut by: HashMap<(&str, i64), (f64, f64, f64)> = HashMap::new();
    for r in &series.rows {
        let t = cell_f(&series, r, "t") as i64;
        by.insert(
            (cell(&series, r, "agent"), t),
            (
                cell_f(&series, r, "ended"),
                cell_f(&series, r, "loops"),
                cell_f(&series, r, "loop_cost"),
            ),
        );
    }
    let mut rate_series = Vec::new();
    let mut cost_series = Vec::new();
    for a in &chart_agents {
        let mut rate = Vec::with_capacity(xs.len());
        let mut cost = Vec::with_capacity(xs.len());
        for x in &xs {
            let (ended, loops, lc) = by.get(&(a.as_str(), *x)).copied().unwrap_or_default();
            rate.push(if ended > 0.0 { loops / ended } else { 0.0 });
            cost.push(lc);
        }
        rate_series.push((a.clone(), rate));
        cost_series.push((a.clone(), cost));
    }
    body.push_str(
        r#"<div class="grid"><div><h2>Loop rate per agent (loop runs / runs ended)</h2>"#,
    );
    body.push_str(&svg::line_chart(
        "chart-loop-rate",
        &xs,
        &rate_series,
        |v| format!("{:.0}%", v * 100.0),
    ));
    body.push_str(&legend(&chart_agents));
    body.push_str(r#"</div><div><h2>Cost inside loops per agent (USD)</h2>"#);
    body.push_str(&svg::line_chart(
        "chart-loop-cost",
        &xs,
        &cost_series,
        |v| format!("${v:.2}"),
    ));
    body.push_str(&legend(&chart_agents));
    body.push_str("</div></div>");

    body.push_str("<h2>Agents</h2>");
    let rows: Vec<(String, Vec<Cell>)> = agents
        .rows
        .iter()
        .map(|r| {
            let a = cell(&agents, r, "agent");
            (
                String::new(),
                vec![
                    Cell::Html(link(&format!("/search?agent={}", query_part(a)), a)),
                    Cell::Num(cell(&agents, r, "ended").into()),
                    Cell::Num(cell(&agents, r, "loops").into()),
                    Cell::Num(format!("{:.2}%", cell_f(&agents, r, "loop_rate") * 100.0)),
                    Cell::Num(cell(&agents, r, "loop_cost").into()),
                    Cell::Num(cell(&agents, r, "cost").into()),
                ],
            )
        })
        .collect();
    body.push_str(&table(
        "agents",
        &[
            "agent",
            "runs ended",
            "loop runs",
            "loop rate",
            "cost inside loops (USD)",
            "cost (USD)",
        ],
        &rows,
    ));

    body.push_str(r#"<div class="grid"><div><h2>Runs by termination reason</h2>"#);
    let bars: Vec<(String, f64)> = terms
        .rows
        .iter()
        .map(|r| {
            let reason = cell(&terms, r, "reason");
            (
                if reason.is_empty() { "(none)" } else { reason }.to_string(),
                cell_f(&terms, r, "runs"),
            )
        })
        .collect();
    body.push_str(&svg::bar_chart("chart-terminations", &bars));
    let rows: Vec<(String, Vec<Cell>)> = terms
        .rows
        .iter()
        .map(|r| {
            (
                String::new(),
                vec![
                    Cell::Text(cell(&terms, r, "reason").into()),
                    Cell::Num(cell(&terms, r, "runs").into()),
                ],
            )
        })
        .collect();
    body.push_str(&table("terminations", &["reason", "runs"], &rows));
    body.push_str("</div><div><h2>Detectors that fire most</h2>");
    let rows: Vec<(String, Vec<Cell>)> = detectors
        .rows
        .iter()
        .map(|r| {
            (
                String::new(),
                vec![
                    Cell::Text(cell(&detectors, r, "detector").into()),
                    Cell::Num(cell(&detectors, r, "signals").into()),
                    Cell::Num(cell(&detectors, r, "runs").into()),
                ],
            )
        })
        .collect();
    body.push_str(&table("detectors", &["detector", "signals", "runs"], &rows));
    body.push_str("</div></div>");

    body.push_str("<h2>Top loop patterns</h2>");
    let rows: Vec<(String, Vec<Cell>)> = patterns
        .rows
        .iter()
        .map(|r| {
            let examples: Vec<String> = cell(&patterns, r, "examples")
                .split('\t')
                .filter_map(|e| e.split_once('\n'))
                .map(|(p, run)| link(&run_href(p, run), run))
                .collect();
            (
                String::new(),
                vec![
                    Cell::Text(cell(&patterns, r, "detector").into()),
                    Cell::Text(cell(&patterns, r, "pattern").into()),
                    Cell::Num(cell(&patterns, r, "signals").into()),
                    Cell::Num(cell(&patterns, r, "runs").into()),
                    Cell::Html(examples.join(" ")),
                ],
            )
        })
        .collect();
    body.push_str(&table(
        "patterns",
        &["detector", "pattern", "signals", "runs", "example runs"],
        &rows,
    ));
    Ok(Html(page("Fleet", &body)))
}

fn ms_time(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map(|d| {
            format!(
                "{:02}:{:02}:{:02}.{:03}",
                d.hour(),
                d.minute(),
                d.second(),
                d.millisecond()
            )
        })
        .unwrap_or_default()
}

async fn run(
    State(st): State<Arc<AppState>>,
    Path((project, run_id)): Path<(String, String)>,
) -> Result<Html<String>, UiError> {
    let c = &st.client;
    let (run_sql, steps_sql, sig_sql) = (
        queries::run_sql(&project, &run_id),
        queries::steps_sql(&project, &run_id),
        queries::signals_sql(&project, &run_id),
    );
    let (runs, steps, signals) = futures::try_join!(
        queries::fetch(c, &run_sql),
        queries::fetch(c, &steps_sql),
        queries::fetch(c, &sig_sql),
    )?;
    let mut body = String::new();
    let summary = runs.rows.first();
    let (mut loop_start, mut caught) = (None, None);
    let mut kv: Vec<(String, Vec<Cell>)> = vec![
        (
            "".into(),
            vec![Cell::Text("project".into()), Cell::Text(project.clone())],
        ),
        (
            "".into(),
            vec![Cell::Text("run".into()), Cell::Text(run_id.clone())],
        ),
    ];
    match summary {
        Some(r) => {
            let g = |c: &str| cell(&runs, r, c).to_string();
            if g("has_loop_step_index") == "1" {
                loop_start = g("loop_step_index").parse::<u64>().ok();
            }
            if g("loop_detected") == "1" {
                caught = g("loop_caught_step_index").parse::<u64>().ok();
            }
            for (label, col) in [
                ("agent", "agent_name"),
                ("status", "status"),
                ("termination reason", "termination_reason"),
                ("loop detected", "loop_detected"),
                ("signals", "signals"),
                ("steps", "steps"),
                ("tokens", "tokens"),
                ("cost (USD)", "cost"),
                ("started", "started"),
                ("ended", "ended"),
            ] {
                kv.push((
                    "".into(),
                    vec![Cell::Text(label.into()), Cell::Text(g(col))],
                ));
            }
            kv.push((
                "".into(),
                vec![
                    Cell::Text("loop began at step".into()),
                    Cell::Text(loop_start.map_or("—".into(), |s| s.to_string())),
                ],
            ));
            kv.push((
                "".into(),
                vec![
                    Cell::Text("verdict at step".into()),
                    Cell::Text(caught.map_or("—".into(), |s| s.to_string())),
                ],
            ));
        }
        None => kv.push((
            "".into(),
            vec![
                Cell::Text("status".into()),
                Cell::Text("not ended yet (no row in runs)".into()),
            ],
        )),
    }
    body.push_str(r#"<div class="kv">"#);
    body.push_str(&table("run-summary", &["", ""], &kv));
    body.push_str("</div>");

    // A step repeats when its tool and canonical input were seen elsewhere in the run.
    let mut counts: HashMap<(&str, &str), usize> = HashMap::new();
    for r in &steps.rows {
        *counts
            .entry((cell(&steps, r, "tool_name"), cell(&steps, r, "input_fp")))
            .or_default() += 1;
    }
    let repeats = |r: &[String]| {
        let fp = cell(&steps, r, "input_fp");
        if fp.bytes().all(|b| b == b'0') {
            return 1;
        }
        counts
            .get(&(cell(&steps, r, "tool_name"), fp))
            .copied()
            .unwrap_or(1)
    };
    let marks: Vec<Mark> = steps
        .rows
        .iter()
        .map(|r| Mark {
            step_index: cell_f(&steps, r, "step_index") as u64,
            ok: cell(&steps, r, "tool_success") != "0",
            repeated: repeats(r) > 1,
        })
        .collect();
    body.push_str(&format!(
        "<h2>Timeline ({} steps{})</h2>",
        steps.rows.len(),
        if steps.rows.len() as u32 >= queries::MAX_STEPS {
            format!(", the first {}", queries::MAX_STEPS)
        } else {
            String::new()
        }
    ));
    body.push_str(&svg::timeline(&marks, loop_start, caught));
    body.push_str(r#"<p class="muted">green: a step not repeated · orange: a tool call whose input repeats in this run · red: failed · purple edge: inside the loop · black rule: the step eddy's verdict fired on. ClickHouse keeps no payload text: inputs and outputs appear as fingerprints.</p>"#);
    let rows: Vec<(String, Vec<Cell>)> = steps
        .rows
        .iter()
        .map(|r| {
            let idx = cell_f(&steps, r, "step_index") as u64;
            let n = repeats(r);
            let ok = cell(&steps, r, "tool_success");
            let mut class = Vec::new();
            if n > 1 {
                class.push("rep");
            }
            if ok == "0" {
                class.push("err");
            }
            if loop_start.is_some_and(|s| idx >= s) {
                class.push("loop");
            }
            if caught == Some(idx) {
                class.push("caught");
            }
            let fp = cell(&steps, r, "input_fp");
            (
                class.join(" "),
                vec![
                    Cell::Html(format!(r#"<span class="i">{idx}</span>"#)),
                    Cell::Text(ms_time(cell_f(&steps, r, "ts_ms") as i64)),
                    Cell::Text(cell(&steps, r, "step_type").into()),
                    Cell::Text(cell(&steps, r, "tool_name").into()),
                    Cell::Text(if fp.bytes().all(|b| b == b'0') {
                        String::new()
                    } else {
                        fp.get(..12).unwrap_or(fp).into()
                    }),
                    Cell::Text(if n > 1 {
                        format!("×{n}")
                    } else {
                        String::new()
                    }),
                    Cell::Text(
                        match ok {
                            "1" => "ok",
                            "0" => "failed",
                            _ => "",
                        }
                        .into(),
                    ),
                    Cell::Num(cell(&steps, r, "tool_latency_ms").into()),
                    Cell::Num(cell(&steps, r, "tokens").into()),
                    Cell::Num(cell(&steps, r, "cost").into()),
                ],
            )
        })
        .collect();
    body.push_str(&table(
        "steps",
        &[
            "step",
            "time",
            "type",
            "tool",
            "input fp",
            "repeats",
            "success",
            "latency ms",
            "tokens",
            "cost (USD)",
        ],
        &rows,
    ));

    body.push_str("<h2>Signals</h2>");
    let rows: Vec<(String, Vec<Cell>)> = signals
        .rows
        .iter()
        .map(|r| {
            let ev = cell(&signals, r, "evidence");
            let pretty = serde_json::from_str::<serde_json::Value>(ev)
                .ok()
                .and_then(|v| serde_json::to_string_pretty(&v).ok())
                .unwrap_or_else(|| ev.to_string());
            (
                String::new(),
                vec![
                    Cell::Text(cell(&signals, r, "kind").into()),
                    Cell::Text(cell(&signals, r, "detector").into()),
                    Cell::Text(cell(&signals, r, "severity").into()),
                    Cell::Text(cell(&signals, r, "pattern").into()),
                    Cell::Num(cell(&signals, r, "step_index").into()),
                    Cell::Num(cell(&signals, r, "first_step_index").into()),
                    Cell::Num(cell(&signals, r, "hits").into()),
                    Cell::Text(cell(&signals, r, "indices").into()),
                    Cell::Html(format!("<pre>{}</pre>", esc(&pretty))),
                ],
            )
        })
        .collect();
    body.push_str(&table(
        "signals",
        &[
            "kind",
            "detector",
            "severity",
            "pattern",
            "step",
            "first step",
            "hits",
            "steps",
            "evidence",
        ],
        &rows,
    ));
    Ok(Html(page(&format!("Run {run_id}"), &body)))
}

async fn search(
    State(st): State<Arc<AppState>>,
    Query(p): Params,
) -> Result<Html<String>, UiError> {
    let get = |k: &str| p.get(k).map(|v| v.trim().to_string()).unwrap_or_default();
    let time_of = |k: &str| -> Result<Option<i64>, UiError> {
        let v = get(k);
        if v.is_empty() {
            return Ok(None);
        }
        parse_datetime(&v).map(Some).ok_or_else(|| bad(k, &v))
    };
    let q = Search {
        run_id: get("run_id"),
        agent: get("agent"),
        from: time_of("from")?,
        to: time_of("to")?,
    };
    let mut body = format!(
        r#"<form method="get" action="/search">run id <input name="run_id" value="{}"> agent <input name="agent" value="{}"> ended from <input name="from" value="{}" placeholder="2026-01-01T00:00:00Z"> to <input name="to" value="{}"> <button>search</button></form>"#,
        esc(&q.run_id),
        esc(&q.agent),
        esc(&get("from")),
        esc(&get("to"))
    );
    let t = queries::fetch(&st.client, &queries::search_sql(&q)).await?;
    body.push_str(&format!(
        r#"<p class="muted">{} runs{}, newest first</p>"#,
        t.rows.len(),
        if t.rows.len() as u32 >= queries::SEARCH_LIMIT {
            " (the first)"
        } else {
            ""
        }
    ));
    let rows: Vec<(String, Vec<Cell>)> = t
        .rows
        .iter()
        .map(|r| {
            let (proj, run) = (cell(&t, r, "project_id"), cell(&t, r, "run_id"));
            (
                String::new(),
                vec![
                    Cell::Text(proj.into()),
                    Cell::Html(link(&run_href(proj, run), run)),
                    Cell::Text(cell(&t, r, "agent_name").into()),
                    Cell::Text(cell(&t, r, "ended").into()),
                    Cell::Text(cell(&t, r, "termination_reason").into()),
                    Cell::Text(
                        if cell(&t, r, "loop_detected") == "1" {
                            "yes"
                        } else {
                            ""
                        }
                        .into(),
                    ),
                    Cell::Num(cell(&t, r, "steps").into()),
                    Cell::Num(cell(&t, r, "cost").into()),
                ],
            )
        })
        .collect();
    body.push_str(&table(
        "results",
        &[
            "project",
            "run",
            "agent",
            "ended",
            "termination",
            "loop",
            "steps",
            "cost (USD)",
        ],
        &rows,
    ));
    Ok(Html(page("Search runs", &body)))
}
