//! `/`: the fleet over a window.
use super::{page, table};
use crate::ui::fleet_view::Charts;
use crate::ui::params::{FleetParams, BUCKETS, RANGES};
use crate::ui::queries::{AgentRow, DetectorRow, Fleet, PatternRow, TerminationRow, Window};
use crate::ui::{fmt, links, palette::PALETTE, svg};
use maud::{html, Markup};

pub(crate) fn render(p: &FleetParams, w: &Window, charts: &Charts, data: &Fleet) -> Markup {
    let body = html! {
        (form(p, w))
        (window_line(w))
        (chart_grid(charts))
        h2 { "Agents" }
        (agents(&data.agents))
        div.grid {
            div { h2 { "Runs by termination reason" } (terminations(&data.terminations)) }
            div { h2 { "Detectors that fire most" } (detectors(&data.detectors)) }
        }
        h2 { "Top loop patterns" }
        (patterns(&data.patterns))
    };
    page("Fleet", body)
}

fn form(p: &FleetParams, w: &Window) -> Markup {
    html! {
        form method="get" action="/" {
            "range "
            select name="range" {
                @for (name, _) in RANGES {
                    option selected[*name == p.range_name] { (name) }
                }
            }
            " bucket "
            select name="bucket" {
                @for b in BUCKETS {
                    option value=(b) selected[*b == w.bucket] { (b) " s" }
                }
            }
            " project "
            input name="project" value=(w.project.as_deref().unwrap_or("")) placeholder="all";
            " ending "
            input name="to" value=(p.to_text) placeholder="newest data" size="20";
            " "
            button { "show" }
        }
    }
}

fn window_line(w: &Window) -> Markup {
    html! {
        p.muted #window {
            (fmt::rfc3339(w.from)) " to " (fmt::rfc3339(w.to)) " (UTC), " (w.bucket) " s buckets"
            @if let Some(project) = &w.project { ", project " (project) }
        }
    }
}

/// Series names in their lines' colours.
fn legend(names: &[String]) -> Markup {
    html! {
        div.legend {
            @for (i, name) in names.iter().enumerate() {
                span {
                    i style=(format!("background:{}", PALETTE[i % PALETTE.len()])) {}
                    (name)
                }
            }
        }
    }
}

fn chart_grid(c: &Charts) -> Markup {
    html! {
        div.grid {
            div {
                h2 { "Loop rate per agent (loop runs / runs ended)" }
                (svg::line_chart("chart-loop-rate", &c.xs, &c.loop_rate, |v| format!("{:.0}%", v * 100.0)))
                (legend(&c.agents))
            }
            div {
                h2 { "Cost inside loops per agent (USD)" }
                (svg::line_chart("chart-loop-cost", &c.xs, &c.loop_cost, |v| format!("${v:.2}")))
                (legend(&c.agents))
            }
        }
    }
}

fn agents(rows: &[AgentRow]) -> Markup {
    let rows: Vec<Markup> = rows
        .iter()
        .map(|a| {
            html! {
                tr {
                    td { a href=(links::agent_runs(&a.agent)) { (a.agent) } }
                    td.n { (a.ended) }
                    td.n { (a.loops) }
                    td.n { (format!("{:.2}%", a.loop_rate * 100.0)) }
                    td.n { (a.loop_cost) }
                    td.n { (a.cost) }
                }
            }
        })
        .collect();
    let head = [
        "agent",
        "runs ended",
        "loop runs",
        "loop rate",
        "cost inside loops (USD)",
        "cost (USD)",
    ];
    table("agents", &head, &rows)
}

fn terminations(rows: &[TerminationRow]) -> Markup {
    let bars: Vec<(String, f64)> = rows
        .iter()
        .map(|t| {
            let label = if t.reason.is_empty() {
                "(none)"
            } else {
                &t.reason
            };
            (label.to_string(), t.runs as f64)
        })
        .collect();
    let rows: Vec<Markup> = rows
        .iter()
        .map(|t| html! { tr { td { (t.reason) } td.n { (t.runs) } } })
        .collect();
    html! {
        (svg::bar_chart("chart-terminations", &bars))
        (table("terminations", &["reason", "runs"], &rows))
    }
}

fn detectors(rows: &[DetectorRow]) -> Markup {
    let rows: Vec<Markup> = rows
        .iter()
        .map(|d| html! { tr { td { (d.detector) } td.n { (d.signals) } td.n { (d.runs) } } })
        .collect();
    table("detectors", &["detector", "signals", "runs"], &rows)
}

fn patterns(rows: &[PatternRow]) -> Markup {
    let rows: Vec<Markup> = rows
        .iter()
        .map(|p| {
            html! {
                tr {
                    td { (p.detector) }
                    td { (p.pattern) }
                    td.n { (p.signals) }
                    td.n { (p.runs) }
                    td {
                        @for (i, r) in p.examples.iter().enumerate() {
                            @if i > 0 { " " }
                            a href=(links::run(&r.project, &r.run)) { (r.run) }
                        }
                    }
                }
            }
        })
        .collect();
    let head = ["detector", "pattern", "signals", "runs", "example runs"];
    table("patterns", &head, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::fleet_view;
    use crate::ui::queries::{RunRef, SeriesRow};
    use crate::ui::templates::hostile::{assert_escaped, NAME};
    use std::collections::BTreeMap;

    #[test]
    fn names_from_the_database_and_the_request_are_escaped() {
        let params: BTreeMap<String, String> = [("project", NAME), ("range", "1h")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let p = FleetParams::parse(&params).unwrap();
        let w = p.window(3600);
        let data = Fleet {
            series: vec![SeriesRow {
                t: 0,
                agent: NAME.into(),
                ended: 2,
                loops: 1,
                loop_cost: 0.5,
            }],
            agents: vec![AgentRow {
                agent: NAME.into(),
                ended: 2,
                loops: 1,
                loop_rate: 0.5,
                loop_cost: 0.5,
                cost: 1.0,
            }],
            terminations: vec![TerminationRow {
                reason: NAME.into(),
                runs: 2,
            }],
            detectors: vec![DetectorRow {
                detector: NAME.into(),
                signals: 3,
                runs: 1,
            }],
            patterns: vec![PatternRow {
                detector: NAME.into(),
                pattern: NAME.into(),
                signals: 3,
                runs: 1,
                examples: vec![RunRef {
                    project: NAME.into(),
                    run: NAME.into(),
                }],
            }],
        };
        let charts = fleet_view::charts(&w, &data.agents, &data.series);
        let html = render(&p, &w, &charts, &data).into_string();
        // The project: form and window line. The agent: two chart titles, two legends, its
        // row. The reason: bar and row. The detector twice, the pattern, the example run.
        assert_escaped(&html, 2 + 5 + 2 + 2 + 1 + 1);
        assert!(
            !html.contains("/runs/<") && !html.contains("agent=<"),
            "{html}"
        );
    }
}
