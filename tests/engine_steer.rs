//! Steering in the engine: every signal carries its advice, a guard's `steer` step is recorded
//! on the run (never seen by the detectors), and `run_terminated` says whether the run was
//! caught again after it.
use eddy::contract::{OutputEvent, Severity, Signal, SteerOutcome};
use eddy::engine::EngineConfig;
use eddy::replay::replay_to_vec;
use std::sync::Arc;

const T0: u64 = 1_700_000_000_000;

fn call(i: u64, q: &str, hits: &str) -> String {
    format!(
        r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":{},"step_index":{i},"step_type":"tool_call","tool_name":"web_search","tool_input":{{"q":"{q}"}},"tool_output":{{"hits":[{hits}]}},"tool_success":true,"tokens":10}}"#,
        T0 + i * 1000
    )
}

fn steer(i: u64, signal: &Signal) -> String {
    serde_json::json!({
        "v": 1, "kind": "step", "project_id": "p", "run_id": "r", "ts": T0 + i * 1000,
        "step_index": i, "step_type": "steer", "content": signal.advice,
        "signal_event_id": signal.event_id, "tokens": 1000,
    })
    .to_string()
}

fn finish(i: u64) -> String {
    format!(
        r#"{{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":{},"status":"completed"}}"#,
        T0 + i * 1000
    )
}

fn replay(lines: &[String]) -> Vec<OutputEvent> {
    replay_to_vec(
        lines.join("\n").as_bytes(),
        Arc::new(EngineConfig::default()),
        1,
    )
    .0
}

fn caught(outs: &[OutputEvent]) -> Vec<&Signal> {
    outs.iter()
        .filter_map(|o| match o {
            OutputEvent::LoopDetected(s) => Some(s),
            _ => None,
        })
        .collect()
}

fn terminated(outs: &[OutputEvent]) -> &eddy::contract::RunTerminated {
    outs.iter()
        .find_map(|o| match o {
            OutputEvent::RunTerminated(t) => Some(t),
            _ => None,
        })
        .expect("run_terminated")
}

/// Three identical searches back to back: the first verdict, which the guard steers on. The same
/// call with the same result three times in a row is conclusive (docs/detection.md), so it is a
/// `stop` with no alert before it, and a guard whose agent can be steered steers first.
fn looping() -> (Vec<String>, Signal) {
    let lines: Vec<String> = (1..=3).map(|i| call(i, "eddy release date", "")).collect();
    let outs = replay(&lines);
    let first = caught(&outs)
        .into_iter()
        .find(|s| s.severity >= Severity::Alert)
        .cloned()
        .expect("a verdict at the third identical call");
    (lines, first)
}

#[test]
fn every_signal_says_what_repeats_since_when_and_what_to_try() {
    let (_, alert) = looping();
    assert_eq!(alert.detector, "repeated_operation");
    assert_eq!((alert.step_index, alert.severity), (3, Severity::Stop));
    let a = &alert.advice;
    assert!(a.contains("Since step 1"), "{a}");
    assert!(a.contains("web_search 3 times"), "{a}");
    assert!(a.contains("change the arguments"), "{a}");
    let json = serde_json::to_value(OutputEvent::signal(alert.clone())).unwrap();
    assert_eq!(json["advice"], serde_json::Value::String(a.clone()));
}

#[test]
fn an_agent_that_heeds_the_steer_ends_recovered() {
    let (mut lines, alert) = looping();
    lines.push(steer(4, &alert));
    lines.push(call(5, "eddy changelog", r#""v0.9 released in March""#));
    lines.push(call(6, "eddy 1.0 roadmap", r#""1.0 planned for June""#));
    lines.push(finish(7));
    let outs = replay(&lines);
    assert!(
        caught(&outs).iter().all(|s| s.step_index < 4),
        "nothing caught after the steer: {outs:?}"
    );
    let t = terminated(&outs);
    assert_eq!(t.steered_step_index, Some(4));
    assert_eq!(t.steers, 1);
    assert_eq!(t.steer_outcome, Some(SteerOutcome::Recovered));
    assert!(t.loop_detected, "the loop before the steer still counts");
    // The steer step is the guard's: not an agent step, its tokens not the agent's.
    assert_eq!((t.totals.steps, t.totals.tokens), (5, 50));
    let json = serde_json::to_value(OutputEvent::RunTerminated(t.clone())).unwrap();
    assert_eq!(json["steer_outcome"], "recovered");
    assert_eq!(json["steered_step_index"], 4);
}

#[test]
fn an_agent_that_ignores_the_steer_is_stopped_and_ends_looped_again() {
    let (mut lines, alert) = looping();
    lines.push(steer(4, &alert));
    // The same search again: the steer step between them is not a step of the agent, so this
    // is the fourth identical call in a row.
    lines.push(call(5, "eddy release date", ""));
    lines.push(finish(6));
    let outs = replay(&lines);
    // The detectors re-armed on the steer step: the loop that goes on is stopped again at
    // once, although its stop had fired before the steer.
    let stop = caught(&outs)
        .into_iter()
        .find(|s| s.severity == Severity::Stop && s.step_index > 4)
        .expect("a stop after the steer");
    assert_eq!(
        (stop.detector.as_str(), stop.step_index),
        ("repeated_operation", 5)
    );
    let t = terminated(&outs);
    assert_eq!(t.steered_step_index, Some(4));
    assert_eq!(t.steer_outcome, Some(SteerOutcome::LoopedAgain));
}

#[test]
fn without_a_steer_a_stopped_loop_is_not_reported_again() {
    let (mut lines, _) = looping();
    lines.push(call(4, "eddy release date", ""));
    lines.push(call(5, "eddy release date", ""));
    let outs = replay(&lines);
    let stops: Vec<u64> = caught(&outs)
        .into_iter()
        .filter(|s| s.severity == Severity::Stop)
        .map(|s| s.step_index)
        .collect();
    assert_eq!(stops, vec![3], "one stop per loop unless a guard steered");
}

#[test]
fn after_a_steer_the_loop_it_was_about_is_reported_again_when_it_comes_back() {
    // The agent tries something else after the steer, then goes back to the call it was told
    // about: that repetition is reported again (at the level its count is at), where without
    // the steer its latch would keep it silent.
    let (mut lines, first) = looping();
    lines.push(steer(4, &first));
    lines.push(call(5, "eddy changelog", r#""v0.9""#));
    lines.push(call(6, "eddy changelog", r#""v0.9""#));
    lines.push(call(7, "eddy release date", ""));
    let outs = replay(&lines);
    let after: Vec<(String, u64)> = outs
        .iter()
        .filter_map(|o| match o {
            OutputEvent::LoopDetected(s) | OutputEvent::LoopWarning(s) => Some(s),
            _ => None,
        })
        .filter(|s| s.step_index > 4)
        .map(|s| (s.pattern.clone(), s.step_index))
        .collect();
    assert!(
        after
            .iter()
            .any(|(p, i)| p.starts_with("web_search") && *i == 7),
        "the steered loop, repeated after the steer, is reported again: {after:?}"
    );
}

#[test]
fn a_run_never_steered_says_nothing_about_steering() {
    let (mut lines, _) = looping();
    lines.push(finish(4));
    let outs = replay(&lines);
    let t = terminated(&outs);
    assert_eq!(
        (t.steered_step_index, t.steers, t.steer_outcome),
        (None, 0, None)
    );
    let json = serde_json::to_value(OutputEvent::RunTerminated(t.clone())).unwrap();
    for k in ["steered_step_index", "steers", "steer_outcome"] {
        assert!(json.get(k).is_none(), "{k} in {json}");
    }
}

#[test]
fn a_replay_writes_the_same_advice_byte_for_byte() {
    let corpus = std::fs::read("tests/corpus/events.jsonl").expect("corpus");
    let cfg = Arc::new(EngineConfig::default());
    let one = replay_to_vec(&corpus, cfg.clone(), 3).0;
    let two = replay_to_vec(&corpus, cfg, 3).0;
    let advice = |outs: &[OutputEvent]| -> Vec<String> {
        outs.iter()
            .filter_map(|o| match o {
                OutputEvent::LoopWarning(s) | OutputEvent::LoopDetected(s) => {
                    Some(s.advice.clone())
                }
                _ => None,
            })
            .collect()
    };
    let a = advice(&one);
    assert!(a.len() > 100 && a.iter().all(|m| m.starts_with("eddy: ")));
    assert_eq!(a, advice(&two));
}
