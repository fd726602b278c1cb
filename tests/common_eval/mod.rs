//! Scoring harness shared by the labeled-corpus tests (`engine_eval`, `engine_heldout`,
//! `engine_kinds`): each sets its own floors (and explains them) and adds its own checks on the
//! returned report.
// Each test crate that includes this module uses a part of it.
#![allow(dead_code)]
use eddy::engine::EngineConfig;
use eddy::eval::{evaluate, EvalReport};
use std::path::Path;
use std::sync::Arc;

/// What a corpus must score at least (`max_delay`: at most) with default settings.
pub struct Floors {
    pub min_runs: usize,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    /// Mean steps from the start of a loop to its detection.
    pub max_delay: f64,
    /// Share of labeled loops whose first alert or stop is on time (`eddy::eval::on_time`).
    pub on_time: f64,
}

/// Scores `tests/<corpus>` with the default configuration, prints the report and checks the
/// floors every corpus shares: pooled precision / recall / F1, detection delay, and every loop
/// family caught at least once (whichever detector catches it). Returns the report and its
/// printed form (for assertion messages).
pub fn score(corpus: &str, floors: &Floors) -> (EvalReport, String) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(corpus);
    let report = evaluate(&dir, Arc::new(EngineConfig::default())).expect("corpus evaluates");
    let mut text = Vec::new();
    report.print(&mut text).expect("print");
    let text = String::from_utf8_lossy(&text).into_owned();
    println!("{text}");
    assert!(report.runs.len() >= floors.min_runs, "{text}");
    let p = &report.pooled;
    assert!(
        p.precision() >= floors.precision,
        "pooled precision {:.2}\n{text}",
        p.precision()
    );
    assert!(
        p.recall() >= floors.recall,
        "pooled recall {:.2}\n{text}",
        p.recall()
    );
    assert!(p.f1() >= floors.f1, "pooled F1 {:.2}\n{text}", p.f1());
    let delay = report.mean_steps_to_detection.unwrap_or(f64::MAX);
    assert!(
        delay <= floors.max_delay,
        "mean steps to detection {delay:.1}\n{text}"
    );
    let (on, timed) = report.on_time();
    assert!(
        timed > 0 && on as f64 >= floors.on_time * timed as f64,
        "on time {on} of {timed}\n{text}"
    );
    for (kind, r) in &report.kinds {
        assert!(
            r.caught > 0,
            "no {kind} loop caught out of {}\n{text}",
            r.runs
        );
    }
    (report, text)
}

/// Issue 41's targets for the verdict that halts an agent: every loop caught (at alert) is also
/// stopped, no healthy run is, and per loop kind the stop comes a median of at most 2 steps and
/// a 90th percentile of at most 4 after the labeled onset, paraphrases (`near_duplicate`, whose
/// evidence is lexical) aside.
pub fn assert_stop_follows_the_evidence(report: &EvalReport, text: &str) {
    assert_eq!(
        report.stopped.tp, report.pooled.tp,
        "loops caught but not stopped\n{text}"
    );
    assert_eq!(report.stopped.fp, 0, "healthy runs stopped\n{text}");
    for (kind, r) in &report.kinds {
        if kind == "near_duplicate" {
            continue;
        }
        if let Some((median, p90)) = r.stop_steps() {
            assert!(
                median <= 2 && p90 <= 4,
                "{kind}: stop {median} (p90 {p90}) steps after the onset\n{text}"
            );
        }
    }
}
