//! What the run page says about each step, from the rows: which steps repeat, where the loop
//! began and where eddy's verdict fired.
use super::queries::{RunRow, StepRow};
use super::svg::Mark;
use std::collections::HashMap;

/// The loop's onset and the verdict's step, when the run's row has them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Loop {
    pub(crate) start: Option<u64>,
    pub(crate) caught: Option<u64>,
}

impl Loop {
    pub(crate) fn of(run: Option<&RunRow>) -> Self {
        run.map_or_else(Self::default, |r| Self {
            start: r.has_loop_step_index.then_some(r.loop_step_index),
            caught: r.loop_detected.then_some(r.loop_caught_step_index),
        })
    }
}

/// A step as the table and the timeline show it.
pub(crate) struct StepView<'a> {
    pub(crate) row: &'a StepRow,
    /// How many steps of the run have this step's tool and canonical input (1: only itself).
    pub(crate) repeats: usize,
    pub(crate) in_loop: bool,
    pub(crate) caught: bool,
}

/// A step without tool input has an all-zero fingerprint; it repeats nothing.
fn has_input(step: &StepRow) -> bool {
    !step.input_fp.bytes().all(|b| b == b'0')
}

/// A step repeats when its tool and canonical input were seen elsewhere in the run.
pub(crate) fn steps<'a>(rows: &'a [StepRow], lp: Loop) -> Vec<StepView<'a>> {
    let mut counts: HashMap<(&str, &str), usize> = HashMap::new();
    for r in rows.iter().filter(|r| has_input(r)) {
        *counts.entry((&r.tool_name, &r.input_fp)).or_default() += 1;
    }
    rows.iter()
        .map(|row| StepView {
            row,
            repeats: if has_input(row) {
                counts[&(row.tool_name.as_str(), row.input_fp.as_str())]
            } else {
                1
            },
            in_loop: lp.start.is_some_and(|s| row.step_index >= s),
            caught: lp.caught == Some(row.step_index),
        })
        .collect()
}

impl StepView<'_> {
    pub(crate) fn failed(&self) -> bool {
        self.row.tool_success == 0
    }

    /// The row's classes (the stylesheet colours them; the browser test reads `rep`, `caught`).
    pub(crate) fn class(&self) -> Option<String> {
        let flags = [
            (self.repeats > 1, "rep"),
            (self.failed(), "err"),
            (self.in_loop, "loop"),
            (self.caught, "caught"),
        ];
        let on: Vec<&str> = flags.iter().filter(|f| f.0).map(|f| f.1).collect();
        (!on.is_empty()).then(|| on.join(" "))
    }

    /// The input fingerprint's first 12 hex digits; blank without tool input.
    pub(crate) fn input_fp(&self) -> &str {
        let fp = &self.row.input_fp;
        if has_input(self.row) {
            fp.get(..12).unwrap_or(fp)
        } else {
            ""
        }
    }

    pub(crate) fn success(&self) -> &'static str {
        match self.row.tool_success {
            1 => "ok",
            0 => "failed",
            _ => "",
        }
    }

    pub(crate) fn mark(&self) -> Mark {
        Mark {
            step_index: self.row.step_index,
            ok: !self.failed(),
            repeated: self.repeats > 1,
        }
    }
}

/// The summary table's (label, value) lines.
pub(crate) fn summary(
    project: &str,
    run_id: &str,
    run: Option<&RunRow>,
) -> Vec<(&'static str, String)> {
    let mut kv = vec![
        ("project", project.to_string()),
        ("run", run_id.to_string()),
    ];
    let Some(r) = run else {
        kv.push(("status", "not ended yet (no row in runs)".into()));
        return kv;
    };
    let lp = Loop::of(Some(r));
    let step = |s: Option<u64>| s.map_or("—".into(), |s| s.to_string());
    kv.extend([
        ("agent", r.agent_name.clone()),
        ("status", r.status.clone()),
        ("termination reason", r.termination_reason.clone()),
        ("loop detected", u8::from(r.loop_detected).to_string()),
        ("signals", r.signals.to_string()),
        ("steps", r.steps.to_string()),
        ("tokens", r.tokens.to_string()),
        ("cost (USD)", r.cost.to_string()),
        ("started", r.started.clone()),
        ("ended", r.ended.clone()),
        ("loop began at step", step(lp.start)),
        ("verdict at step", step(lp.caught)),
    ]);
    kv
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn step(i: u64, tool: &str, fp: &str, success: i8) -> StepRow {
        StepRow {
            step_index: i,
            ts_ms: 0,
            step_type: "tool_call".into(),
            tool_name: tool.into(),
            input_fp: fp.into(),
            tool_success: success,
            tool_latency_ms: 1.5,
            tokens: 10,
            cost: 0.001,
        }
    }

    pub(crate) fn ended(loop_start: Option<u64>, caught: Option<u64>) -> RunRow {
        RunRow {
            agent_name: "a".into(),
            status: "completed".into(),
            termination_reason: "done".into(),
            loop_detected: caught.is_some(),
            has_loop_step_index: loop_start.is_some(),
            loop_step_index: loop_start.unwrap_or(0),
            loop_caught_step_index: caught.unwrap_or(0),
            signals: 1,
            steps: 4,
            tokens: 40,
            cost: 0.004,
            started: "2026-01-01 00:00:00".into(),
            ended: "2026-01-01 00:01:00".into(),
        }
    }

    const ZERO: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn a_step_repeats_when_its_tool_and_input_come_again() {
        let rows = [
            step(0, "", ZERO, -1),
            step(1, "search", "aaaaaaaaaaaaaaaa", 1),
            step(2, "search", "aaaaaaaaaaaaaaaa", 0),
            step(3, "fetch", "aaaaaaaaaaaaaaaa", 1),
            step(4, "", ZERO, -1),
        ];
        let run = ended(Some(2), Some(3));
        let v = steps(&rows, Loop::of(Some(&run)));
        let repeats: Vec<usize> = v.iter().map(|s| s.repeats).collect();
        assert_eq!(repeats, vec![1, 2, 2, 1, 1]);
        let classes: Vec<Option<String>> = v.iter().map(StepView::class).collect();
        assert_eq!(
            classes,
            vec![
                None,
                Some("rep".into()),
                Some("rep err loop".into()),
                Some("loop caught".into()),
                Some("loop".into()),
            ]
        );
        assert_eq!(v[0].input_fp(), "");
        assert_eq!(v[1].input_fp(), "aaaaaaaaaaaa");
        let success: Vec<&str> = v.iter().map(StepView::success).collect();
        assert_eq!(success, vec!["", "ok", "failed", "ok", ""]);
        assert!(!v[2].mark().ok && v[2].mark().repeated);
    }

    #[test]
    fn the_loop_is_marked_only_where_the_run_row_says_so() {
        assert_eq!(Loop::of(None), Loop::default());
        let caught_without_onset = ended(None, Some(7));
        assert_eq!(
            Loop::of(Some(&caught_without_onset)),
            Loop {
                start: None,
                caught: Some(7)
            }
        );
        let kv = summary("p", "r", Some(&caught_without_onset));
        let get = |k: &str| kv.iter().find(|(l, _)| *l == k).map(|(_, v)| v.as_str());
        assert_eq!(get("loop began at step"), Some("—"));
        assert_eq!(get("verdict at step"), Some("7"));
        assert_eq!(get("loop detected"), Some("1"));
        let open = summary("p", "r", None);
        assert_eq!(open.last().map(|(l, _)| *l), Some("status"));
        assert_eq!(open.len(), 3);
    }
}
