//! eddy's persisted fingerprints against the vectors of docs/fingerprints.md
//! (tests/fingerprint_vectors.json, derived from the written rules with Python's hashlib).
use eddy::contract::input::decode;
use eddy::contract::{Event, OutputEvent, Step};
use eddy::engine::detectors::DetectorConfig;
use eddy::engine::EngineConfig;
use eddy::replay::replay_to_vec;
use eddy::sink::rows::Origin;
use eddy::sink::StepRow;
use serde_json::Value;
use std::sync::Arc;

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fingerprint_vectors.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("read vectors")).expect("parse")
}

/// A v1 step event carrying `tool_input` / `tool_output` exactly as the vector's raw text.
fn step_line(i: u64, v: &Value) -> String {
    let mut line = format!(
        r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":{},"step_index":{i},"step_type":"tool_call","tool_name":{}"#,
        1_700_000_000_000u64 + i * 1000,
        v["tool_name"]
    );
    for field in ["tool_input", "tool_output"] {
        if let Some(raw) = v[field].as_str() {
            line.push_str(&format!(r#","{field}":{raw}"#));
        }
    }
    if let Some(ok) = v["tool_success"].as_bool() {
        line.push_str(&format!(r#","tool_success":{ok}"#));
    }
    line.push('}');
    line
}

fn step(v: &Value) -> Step {
    match decode(step_line(0, v).as_bytes()) {
        Ok(Event::Step(s)) => s,
        other => panic!("{}: not a step: {other:?}", v["name"]),
    }
}

#[test]
fn step_fingerprints_match_the_vectors() {
    let all = vectors();
    let steps = all["steps"].as_array().expect("steps");
    assert!(steps.len() >= 10);
    for v in steps {
        let name = &v["name"];
        let mut cfg = DetectorConfig::default();
        if let Some(n) = v["max_field_bytes"].as_u64() {
            cfg.fingerprint.max_field_bytes = n as usize;
        }
        let s = step(v);
        let c = cfg.canonical(&s);
        assert_eq!(
            c.input_text,
            v["canonical_input"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(
            c.output_text,
            v["canonical_output"].as_str().unwrap(),
            "{name}"
        );
        let hex = |fp: Option<[u8; 32]>| fp.map(hex::encode);
        let want = |k: &str| Some(v[k].as_str().unwrap().to_string());
        assert_eq!(hex(c.fps.raw), want("raw_fp"), "{name}");
        assert_eq!(
            hex(c.fps.canonical_input),
            want("canonical_input_fp"),
            "{name}"
        );
        assert_eq!(
            hex(c.fps.canonical_output),
            want("canonical_output_fp"),
            "{name}"
        );
        // The `steps` columns hold the same bytes.
        let row = StepRow::new(
            &s,
            &c.fps,
            Origin {
                partition: 0,
                offset: 0,
            },
        );
        assert_eq!(Some(hex::encode(row.raw_fp)), want("raw_fp"), "{name}");
        assert_eq!(row.has_raw_fp, 1, "{name}");
        assert_eq!(
            Some(hex::encode(row.canonical_input_fp)),
            want("canonical_input_fp"),
            "{name}"
        );
        assert_eq!(
            Some(hex::encode(row.canonical_output_fp)),
            want("canonical_output_fp"),
            "{name}"
        );
    }
}

#[test]
fn a_step_without_a_tool_has_no_fingerprints() {
    let s = match decode(
        br#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1700000000000,"step_index":0,"step_type":"message","content":"hi"}"#,
    ) {
        Ok(Event::Step(s)) => s,
        other => panic!("{other:?}"),
    };
    let c = DetectorConfig::default().canonical(&s);
    assert_eq!(c.fps.raw, None);
    assert_eq!(c.fps.canonical_input, None);
    assert_eq!(c.fps.canonical_output, None);
    let row = StepRow::new(
        &s,
        &c.fps,
        Origin {
            partition: 0,
            offset: 0,
        },
    );
    assert_eq!(
        (row.raw_fp, row.has_raw_fp, row.canonical_input_fp),
        ([0; 32], 0, [0; 32])
    );
    assert_eq!(row.canonical_output_fp, [0; 32]);
}

#[test]
fn signal_fingerprints_match_the_vectors() {
    let all = vectors();
    let sig = &all["signals"];
    let trace = &sig["trace"];
    let mut input = String::new();
    for i in 1..=8 {
        input.push_str(&step_line(i, trace));
        input.push('\n');
    }
    input.push_str(
        r#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1700000009000,"status":"completed"}"#,
    );
    input.push('\n');
    let (outs, _) = replay_to_vec(input.as_bytes(), Arc::new(EngineConfig::default()), 1);
    let fingerprint = |detector: &str| -> Vec<String> {
        outs.iter()
            .filter_map(|o| match o {
                OutputEvent::LoopWarning(s) | OutputEvent::LoopDetected(s)
                    if s.detector == detector =>
                {
                    Some(s.fingerprint.clone())
                }
                _ => None,
            })
            .collect()
    };
    let ended = outs
        .iter()
        .find_map(|o| match o {
            OutputEvent::RunTerminated(t) => Some(t.event_id.clone()),
            _ => None,
        })
        .expect("run_terminated");
    assert_eq!(ended, sig["run_terminated_event_id"].as_str().unwrap());
    for detector in ["keelwave_fingerprint", "repeated_operation"] {
        let got = fingerprint(detector);
        assert!(!got.is_empty(), "no {detector} signal in {outs:#?}");
        for fp in got {
            assert_eq!(fp, sig[detector].as_str().unwrap(), "{detector}");
        }
    }
}
