//! `/search`: runs by run id, agent and end time.
use super::{page, table};
use crate::ui::links;
use crate::ui::params::SearchParams;
use crate::ui::queries::{SearchRow, SEARCH_LIMIT};
use maud::{html, Markup};

pub(crate) fn render(p: &SearchParams, rows: &[SearchRow]) -> Markup {
    let body = html! {
        (form(p))
        p.muted {
            (rows.len()) " runs"
            @if rows.len() >= SEARCH_LIMIT as usize { " (the first)" }
            ", newest first"
        }
        (results(rows))
    };
    page("Search runs", body)
}

fn form(p: &SearchParams) -> Markup {
    html! {
        form method="get" action="/search" {
            "run id "
            input name="run_id" value=(p.search.run_id);
            " agent "
            input name="agent" value=(p.search.agent);
            " ended from "
            input name="from" value=(p.from_text) placeholder="2026-01-01T00:00:00Z";
            " to "
            input name="to" value=(p.to_text);
            " "
            button { "search" }
        }
    }
}

fn results(rows: &[SearchRow]) -> Markup {
    let rows: Vec<Markup> = rows
        .iter()
        .map(|r| {
            html! {
                tr {
                    td { (r.project_id) }
                    td { a href=(links::run(&r.project_id, &r.run_id)) { (r.run_id) } }
                    td { (r.agent_name) }
                    td { (r.ended) }
                    td { (r.termination_reason) }
                    td { @if r.loop_detected { "yes" } }
                    td.n { (r.steps) }
                    td.n { (r.cost) }
                }
            }
        })
        .collect();
    let head = [
        "project",
        "run",
        "agent",
        "ended",
        "termination",
        "loop",
        "steps",
        "cost (USD)",
    ];
    table("results", &head, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::templates::hostile::{assert_escaped, NAME};
    use std::collections::BTreeMap;

    #[test]
    fn names_from_the_database_and_the_form_are_escaped() {
        let params: BTreeMap<String, String> = [("run_id", NAME), ("agent", NAME)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let p = SearchParams::parse(&params).unwrap();
        let row = SearchRow {
            project_id: NAME.into(),
            run_id: NAME.into(),
            agent_name: NAME.into(),
            ended: "2026-01-01 00:00:00".into(),
            termination_reason: NAME.into(),
            loop_detected: true,
            steps: 3,
            cost: 0.5,
        };
        let html = render(&p, &[row]).into_string();
        // The form's run id and agent (2); the row's project, run, agent and reason (4).
        assert_escaped(&html, 2 + 4);
        assert!(!html.contains("/runs/<"), "{html}");
    }
}
