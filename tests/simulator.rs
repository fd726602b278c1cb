//! `eddy simulate` as a user runs it: a fleet file, its labels, and the detectors scored on them.
//! The simulator injects each loop by the definition of the detector named in its label, and its
//! healthy scenarios are the patterns peers flag wrongly (polling, retries that recover,
//! pagination, a writer and reviewer whose drafts move on), so the expectation comes from the
//! ground truth, not from what the engine happens to do.
use eddy::engine::EngineConfig;
use eddy::eval::evaluate;
use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Arc;

fn simulate(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .arg("simulate")
        .args(args)
        .arg("--out")
        .arg(dir.join("events.jsonl"))
        .arg("--labels")
        .arg(dir.join("labels.jsonl"))
        .output()
        .expect("run eddy simulate");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

#[test]
fn every_injected_loop_is_caught_and_no_healthy_run_alerted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let summary = simulate(dir.path(), &["--runs", "1500", "--seed", "21"]);
    for kind in eddy::simulate::Kind::ALL {
        assert!(
            summary.contains(&format!(" {}=", kind.name())),
            "summary names {}: {summary}",
            kind.name()
        );
    }
    let report = evaluate(dir.path(), Arc::new(EngineConfig::default())).expect("evaluates");
    let mut text = Vec::new();
    report.print(&mut text).expect("print");
    let text = String::from_utf8_lossy(&text);
    assert_eq!(report.runs.len(), 1500, "{text}");
    let kinds: BTreeSet<&str> = report.kinds.keys().map(String::as_str).collect();
    let want: BTreeSet<&str> = eddy::simulate::Kind::ALL
        .iter()
        .filter_map(|k| k.detector())
        .collect();
    assert_eq!(kinds, want, "{text}");
    for (kind, r) in &report.kinds {
        assert_eq!(
            r.caught, r.runs,
            "{kind}: {} of {} caught\n{text}",
            r.caught, r.runs
        );
    }
    // Caught by any detector is not enough: a regression in one could hide behind another
    // (no_progress corroborates most loops). Each loop's own detector must fire on it.
    for row in &report.detectors {
        assert_eq!(
            row.own_caught, row.own_kind,
            "{}: caught {} of its own {} loops\n{text}",
            row.detector, row.own_caught, row.own_kind
        );
    }
    assert_eq!(report.pooled.precision(), 1.0, "{text}");
    // The verdict that halts an agent: every loop caught is stopped, no healthy run is.
    assert_eq!(report.stopped.tp, report.pooled.tp, "{text}");
    assert_eq!(report.stopped.fp, 0, "{text}");
}

#[test]
fn the_mix_and_loop_rate_shape_the_fleet() {
    let dir = tempfile::tempdir().expect("tempdir");
    simulate(
        dir.path(),
        &[
            "--runs",
            "200",
            "--loop-rate",
            "1",
            "--mix",
            "exact_loop=0,volatile_loop=0,paraphrase_loop=0,auth_failure_loop=0,ping_pong=0,think_loop=0",
        ],
    );
    let labels = std::fs::read_to_string(dir.path().join("labels.jsonl")).expect("labels");
    let kinds: BTreeSet<String> = labels
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("label JSON");
            assert_eq!(v["looping"], true, "{l}");
            v["kind"].as_str().expect("kind").to_string()
        })
        .collect();
    assert_eq!(kinds, BTreeSet::from(["handoff_cycle".to_string()]));
    // Multi-agent: the steps name their agent and who handed over to it.
    let events = std::fs::read_to_string(dir.path().join("events.jsonl")).expect("events");
    assert!(events.contains("\"caller\":\"writer\""));

    let bad = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(["simulate", "--runs", "5", "--out", "-", "--mix", "loops=1"])
        .output()
        .expect("run");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("kinds: healthy"));
}
