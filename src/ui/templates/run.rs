//! `/runs/{project_id}/{run_id}`: one run's summary, timeline, steps and signals.
use super::{page, table};
use crate::ui::queries::{Run, SignalRow, MAX_STEPS};
use crate::ui::run_view::{self, Loop, StepView};
use crate::ui::{fmt, svg};
use maud::{html, Markup};

pub(crate) fn render(project: &str, run_id: &str, data: &Run) -> Markup {
    let lp = Loop::of(data.summary.as_ref());
    let steps = run_view::steps(&data.steps, lp);
    let body = html! {
        div.kv { (summary(&run_view::summary(project, run_id, data.summary.as_ref()))) }
        (timeline(&steps, lp))
        (steps_table(&steps))
        h2 { "Signals" }
        (signals(&data.signals))
    };
    page(&format!("Run {run_id}"), body)
}

fn summary(kv: &[(&str, String)]) -> Markup {
    let rows: Vec<Markup> = kv
        .iter()
        .map(|(label, value)| html! { tr { td { (label) } td { (value) } } })
        .collect();
    table("run-summary", &["", ""], &rows)
}

fn timeline(steps: &[StepView], lp: Loop) -> Markup {
    let marks: Vec<svg::Mark> = steps.iter().map(StepView::mark).collect();
    html! {
        h2 {
            "Timeline (" (steps.len()) " steps"
            @if steps.len() >= MAX_STEPS as usize { ", the first " (MAX_STEPS) }
            ")"
        }
        (svg::timeline(&marks, lp.start, lp.caught))
        p.muted {
            "green: a step not repeated · orange: a tool call whose input repeats in this run · \
             red: failed · purple edge: inside the loop · black rule: the step eddy's verdict \
             fired on. ClickHouse keeps no payload text: inputs and outputs appear as fingerprints."
        }
    }
}

fn steps_table(steps: &[StepView]) -> Markup {
    let rows: Vec<Markup> = steps
        .iter()
        .map(|s| {
            let r = s.row;
            html! {
                tr class=[s.class()] {
                    td { span.i { (r.step_index) } }
                    td { (fmt::clock_ms(r.ts_ms)) }
                    td { (r.step_type) }
                    td { (r.tool_name) }
                    td { (s.input_fp()) }
                    td { @if s.repeats > 1 { "×" (s.repeats) } }
                    td { (s.success()) }
                    td.n { (r.tool_latency_ms) }
                    td.n { (r.tokens) }
                    td.n { (r.cost) }
                }
            }
        })
        .collect();
    let head = [
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
    ];
    table("steps", &head, &rows)
}

/// Evidence is JSON; indented, it reads. Text that is not JSON is shown as it is.
fn pretty(evidence: &str) -> String {
    serde_json::from_str::<serde_json::Value>(evidence)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| evidence.to_string())
}

fn signals(rows: &[SignalRow]) -> Markup {
    let rows: Vec<Markup> = rows
        .iter()
        .map(|s| {
            html! {
                tr {
                    td { (s.kind) }
                    td { (s.detector) }
                    td { (s.severity) }
                    td { (s.pattern) }
                    td.n { (s.step_index) }
                    td.n { (s.first_step_index) }
                    td.n { (s.hits) }
                    td { (s.indices) }
                    td { pre { (pretty(&s.evidence)) } }
                }
            }
        })
        .collect();
    let head = [
        "kind",
        "detector",
        "severity",
        "pattern",
        "step",
        "first step",
        "hits",
        "steps",
        "evidence",
    ];
    table("signals", &head, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::run_view::tests::{ended, step};
    use crate::ui::templates::hostile::{assert_escaped, NAME};

    #[test]
    fn names_from_the_database_and_the_path_are_escaped() {
        let mut run = ended(Some(1), Some(2));
        run.agent_name = NAME.into();
        run.termination_reason = NAME.into();
        let mut s = step(1, NAME, "ab12ab12ab12ab12", 1);
        s.step_type = NAME.into();
        let signal = SignalRow {
            kind: NAME.into(),
            detector: NAME.into(),
            severity: NAME.into(),
            pattern: NAME.into(),
            step_index: 2,
            first_step_index: 1,
            hits: 2,
            indices: "1,2".into(),
            evidence: serde_json::json!({ "tool": NAME }).to_string(),
        };
        let data = Run {
            summary: Some(run),
            steps: vec![s],
            signals: vec![signal],
        };
        let html = render(NAME, NAME, &data).into_string();
        // Title and heading (2), project and run (2), agent and reason (2), the step's type and
        // tool (2), the signal's kind, detector, severity, pattern (4). The evidence's copy is
        // JSON-escaped inside, so it is checked apart.
        assert_escaped(&html, 2 + 2 + 2 + 2 + 4);
        assert!(
            html.contains(r#"&quot;tool&quot;: &quot;&lt;script&gt;"#),
            "{html}"
        );
    }

    #[test]
    fn a_run_not_ended_yet_still_shows_its_steps() {
        let data = Run {
            summary: None,
            steps: vec![step(0, "t", "ab", 1), step(1, "t", "ab", 0)],
            signals: vec![],
        };
        let html = render("p", "r", &data).into_string();
        assert!(html.contains("not ended yet"), "{html}");
        assert!(html.contains(r#"<tr class="rep err">"#), "{html}");
        assert!(html.contains("Timeline (2 steps)"), "{html}");
    }
}
