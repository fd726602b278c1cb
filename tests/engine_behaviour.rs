//! Documented behaviours of the detectors, one small trace each.
use eddy::contract::{OutputEvent, Severity};
use eddy::engine::EngineConfig;
use eddy::replay::replay_to_vec;
use std::sync::Arc;

fn step(i: u64, tool: &str, input: &str, output: &str) -> String {
    format!(
        r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":{},"step_index":{i},"step_type":"tool_call","tool_name":"{tool}","tool_input":{input},"tool_output":{output},"tool_success":true}}"#,
        1_700_000_000_000u64 + i * 1000
    )
}

fn finish(i: u64) -> String {
    format!(
        r#"{{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":{},"status":"completed"}}"#,
        1_700_000_000_000u64 + i * 1000
    )
}

fn run(lines: &[String], cfg: EngineConfig) -> Vec<OutputEvent> {
    replay_to_vec(lines.join("\n").as_bytes(), Arc::new(cfg), 1).0
}

fn max_severity(outs: &[OutputEvent], detector: &str) -> Option<Severity> {
    outs.iter()
        .filter_map(|o| match o {
            OutputEvent::LoopWarning(s) | OutputEvent::LoopDetected(s)
                if s.detector == detector =>
            {
                Some(s.severity)
            }
            _ => None,
        })
        .max()
}

fn terminated(outs: &[OutputEvent]) -> &eddy::contract::RunTerminated {
    outs.iter()
        .find_map(|o| match o {
            OutputEvent::RunTerminated(t) => Some(t),
            _ => None,
        })
        .expect("run terminated")
}

#[test]
fn keelwave_duplicate_is_info_only() {
    let mut l: Vec<String> = (1..=2)
        .map(|i| step(i, "search", r#"{"q":"x"}"#, r#""a""#))
        .collect();
    l.push(finish(3));
    let outs = run(&l, EngineConfig::default());
    assert_eq!(
        max_severity(&outs, "keelwave_fingerprint"),
        Some(Severity::Info)
    );
    assert!(!terminated(&outs).loop_detected);
}

#[test]
fn a_poll_that_completes_is_quiet_but_an_endless_one_trips() {
    let poll = |i, state: &str| {
        step(
            i,
            "get_job_status",
            r#"{"id":"j1"}"#,
            &format!(r#"{{"state":"{state}"}}"#),
        )
    };
    let mut healthy: Vec<String> = (1..=12).map(|i| poll(i, "running")).collect();
    healthy.push(poll(13, "done"));
    healthy.push(finish(14));
    let outs = run(&healthy, EngineConfig::default());
    assert!(!terminated(&outs).loop_detected, "{outs:#?}");

    let mut stuck: Vec<String> = (1..=30).map(|i| poll(i, "running")).collect();
    stuck.push(finish(31));
    let outs = run(&stuck, EngineConfig::default());
    let t = terminated(&outs);
    assert!(t.loop_detected);
    assert_eq!(t.loop_step_index, Some(1));
}

#[test]
fn budgets_stop_and_infer_the_termination_reason() {
    let mut cfg = EngineConfig::default();
    cfg.detectors.budget.max_steps = Some(3);
    let mut l: Vec<String> = (1..=5)
        .map(|i| {
            step(
                i,
                "read",
                &format!(r#"{{"path":"f{i}"}}"#),
                &format!(r#""c{i}""#),
            )
        })
        .collect();
    l.push(finish(6));
    let outs = run(&l, cfg);
    assert_eq!(max_severity(&outs, "budget"), Some(Severity::Stop));
    let t = terminated(&outs);
    assert_eq!(t.termination_reason, "max_steps_reached");
    assert!(!t.termination_reason_reported);
}

#[test]
fn edit_not_found_then_reread_then_new_edit_is_healthy() {
    let edit_fail = |i, old: &str| {
        step(
            i,
            "str_replace",
            &format!(r#"{{"path":"a.rs","old":"{old}"}}"#),
            r#"{"error":"old text not found"}"#,
        )
        .replace("\"tool_success\":true", "\"tool_success\":false")
    };
    let l = vec![
        step(1, "read_file", r#"{"path":"a.rs"}"#, r#""v1""#),
        edit_fail(2, "x"),
        step(3, "read_file", r#"{"path":"a.rs"}"#, r#""v1""#),
        edit_fail(4, "y"),
        step(5, "read_file", r#"{"path":"a.rs"}"#, r#""v1""#),
        step(
            6,
            "str_replace",
            r#"{"path":"a.rs","old":"z"}"#,
            r#"{"ok":true}"#,
        ),
        finish(7),
    ];
    let outs = run(&l, EngineConfig::default());
    assert!(!terminated(&outs).loop_detected, "{outs:#?}");
}
