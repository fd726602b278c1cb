//! Decoding as a whole: events and rejections, and the fast path held against the reference
//! decoder on hand-picked and (in [`differential`]) generated input.
use super::fast::decode_fast;
use super::serde_path::decode_serde;
use super::*;
use crate::contract::scan;

/// Both paths give a payload's text as it arrived, without the whitespace around it, and
/// only valid JSON becomes a `JsonText`.
#[test]
fn payload_text_is_kept_as_it_arrived() {
    let text = r#"{"q" : [1, "a\u00e9"] }"#;
    let msg = format!(
        r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1,"step_index":1,"step_type":"tool_call","tool_name":"t","tool_input": {text} }}"#
    );
    let fast = decode_fast(&msg).expect("the fast path takes it");
    let slow = decode_serde(msg.as_bytes(), &msg).expect("serde takes it");
    for e in [fast, slow] {
        let Event::Step(s) = e else {
            panic!("not a step")
        };
        assert_eq!(s.tool_input.as_ref().map(JsonText::get), Some(text));
    }
    assert_eq!(
        JsonText::parse(" [1] \n").map(|j| j.get().to_owned()).ok(),
        Some("[1]".into())
    );
    for bad in ["", "{", "[1,]", "\"a", "1 2", "{\"a\":\"\\x\"}"] {
        assert!(JsonText::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn decodes_a_step_and_keeps_raw_input_bytes() {
    let msg = br#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":"2026-01-02T03:04:05.678+01:00","step_index":3,"step_type":"tool_call","tool_name":"web_search","tool_input":{"q":"keelwave","limit":5},"unknown_future_field":[1,2]}"#;
    let Event::Step(s) = decode(msg).expect("valid step") else {
        panic!("not a step")
    };
    assert_eq!(s.step_index, 3);
    assert_eq!(
        s.tool_input.as_ref().map(|r| r.get()),
        Some(r#"{"q":"keelwave","limit":5}"#)
    );
    // 03:04:05.678+01:00 is 02:04:05.678 UTC.
    assert_eq!(format_ts(s.ts_ms), "2026-01-02T02:04:05.678Z");
}

#[test]
fn epoch_millis_and_rfc3339_agree() {
    let a = decode(br#"{"v":1,"kind":"run_started","project_id":"p","run_id":"r","ts":1767225600000,"agent_name":"a"}"#).unwrap();
    let b = decode(br#"{"v":1,"kind":"run_started","project_id":"p","run_id":"r","ts":"2026-01-01T00:00:00Z","agent_name":"a"}"#).unwrap();
    assert_eq!(a.ts_ms(), b.ts_ms());
}

#[test]
fn run_finished_carries_what_the_agent_reported() {
    let msg = br#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1,"status":"completed","reported_loop_detected":true,"reported_loop_step_index":1,"reported_totals":{"total_steps":7,"total_tokens":5120,"total_cost_usd":0.0132,"duration_ms":8312}}"#;
    let Event::RunFinished(f) = decode(msg).expect("valid run_finished") else {
        panic!("not a run_finished")
    };
    assert_eq!(f.reported_loop_detected, Some(true));
    assert_eq!(f.reported_loop_step_index, Some(1));
    let t = f.reported_totals.expect("totals");
    assert_eq!((t.total_steps, t.total_tokens), (Some(7), Some(5120)));
    assert_eq!(
        (t.total_cost_usd, t.duration_ms),
        (Some(0.0132), Some(8312))
    );
    // Absent means not reported, never false.
    let Event::RunFinished(f) = decode(
        br#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1,"status":"failed"}"#,
    )
    .unwrap() else {
        panic!("not a run_finished")
    };
    assert_eq!(f.reported_loop_detected, None);
    assert!(f.reported_totals.is_none());
    let bad = decode(br#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1,"status":"failed","reported_loop_detected":"yes"}"#);
    assert_eq!(bad.unwrap_err().reason(), "invalid_field");
}

#[test]
fn rejections_carry_precise_reasons() {
    let cases: &[(&[u8], &str)] = &[
        (b"{not json", "invalid_json"),
        (b"[1,2]", "not_an_object"),
        (br#"{"kind":"step"}"#, "missing_version"),
        (br#"{"v":2,"kind":"step"}"#, "unsupported_version"),
        (br#"{"v":1}"#, "missing_kind"),
        (br#"{"v":1,"kind":"nope","project_id":"p","run_id":"r","ts":1}"#, "unknown_kind"),
        (br#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1,"step_type":"x"}"#, "missing_field"),
        (br#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":"yesterday","step_index":1,"step_type":"x"}"#, "invalid_field"),
        (br#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1,"step_index":-1,"step_type":"x"}"#, "invalid_field"),
        (br#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1,"status":"maybe"}"#, "invalid_field"),
        (br#"{"v":1,"kind":"step","project_id":5,"run_id":"r","ts":1}"#, "invalid_field"),
    ];
    for (msg, reason) in cases {
        let err = decode(msg).expect_err(&String::from_utf8_lossy(msg));
        assert_eq!(err.reason(), *reason, "{}", String::from_utf8_lossy(msg));
    }
}

/// The decoder as it was before the fast path: the reference every test compares with.
fn reference(bytes: &[u8]) -> Result<Event, DecodeError> {
    utf8(bytes).and_then(|text| decode_serde(bytes, text))
}

/// The fast path either declines or agrees with the reference, and `decode` as a whole
/// returns exactly the reference's result. Returns whether the fast path accepted.
fn check_against_reference(bytes: &[u8]) -> bool {
    let want = format!("{:?}", reference(bytes));
    let fast = std::str::from_utf8(bytes).ok().and_then(decode_fast);
    let accepted = fast.is_some();
    if let Some(ev) = fast {
        let got = format!("{:?}", Ok::<_, DecodeError>(ev));
        assert_eq!(
            got,
            want,
            "fast path differs on {}",
            String::from_utf8_lossy(bytes)
        );
    }
    assert_eq!(
        format!("{:?}", decode(bytes)),
        want,
        "decode differs on {}",
        String::from_utf8_lossy(bytes)
    );
    accepted
}

/// Ordinary simulator traffic must take the fast path: a silent fallback on the common
/// case would keep every result right and lose the speed.
#[test]
fn fast_path_takes_every_simulator_event() {
    let args = crate::simulate::SimulateArgs {
        runs: 300,
        loop_rate: 0.3,
        seed: 11,
        projects: 3,
        start_ms: 1_767_225_600_000,
        out: None,
        unfinished_rate: 0.1,
        ..Default::default()
    };
    let lines = crate::simulate::generate(&args);
    assert!(lines.len() > 1000);
    for (_, _, line) in &lines {
        assert!(
            check_against_reference(line.as_bytes()),
            "fast path declined a simulator event: {line}"
        );
    }
}

#[test]
fn fast_path_takes_the_common_shapes() {
    let accepted: &[&str] = &[
        r#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":"2026-01-02T03:04:05.678+01:00","step_index":3,"step_type":"tool_call","tool_name":"web_search","tool_input":{"q":"keelwave","limit":5},"unknown_future_field":[1,2]}"#,
        " {\n \"v\" : 1 ,\t\"kind\":\"run_started\",\"project_id\":\"p\",\"run_id\":\"r\",\"ts\":1,\"agent_name\":\"a\",\"input\":\"line\\none \\\"q\\\" \\u00e9\",\"metadata\":null}\r\n",
        r#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1,"status":"completed","termination_reason":"loop_detected","reported_loop_detected":true,"reported_loop_step_index":1,"reported_totals":{"total_steps":7,"total_cost_usd":0.0132}}"#,
        r#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":5,"step_index":2.0,"step_type":"llm","tool_success":null,"cost_usd":1e-3,"tokens":12,"agent":"","content":"é😀"}"#,
    ];
    for msg in accepted {
        assert!(check_against_reference(msg.as_bytes()), "declined: {msg}");
    }
}

/// Inputs on the edge of what serde accepts: each must come out exactly as before, whatever
/// path takes it.
#[test]
fn fast_path_edge_cases_match_the_reference() {
    let ok = r#""v":1,"kind":"run_started","project_id":"p","run_id":"r","ts":1,"agent_name":"a""#;
    let cases: Vec<String> = vec![
        format!("{{{ok}}}"),
        format!("{{{ok}}} x"),
        format!("{{{ok}}}{{}}"),
        format!("{{{ok},}}"),
        format!("{{{ok}"),
        format!("\u{feff}{{{ok}}}"),
        format!("{{{ok}}}\u{a0}"),
        format!("{{{ok}}}\x0b"),
        format!("[{ok}]"),
        format!("{{{ok},\"agent_name\":\"b\"}}"),
        format!("{{{ok},\"agent_name\":null}}"),
        format!("{{{ok},\"k\\u0069nd\":\"step\"}}"),
        format!("{{{ok},\"content\":\"\\ud800\"}}"),
        format!("{{{ok},\"content\":\"\\udc00\\ud800\"}}"),
        format!("{{{ok},\"content\":\"\\ud83d\\ude00\"}}"),
        format!("{{{ok},\"x\":\"\\ud800\"}}"),
        format!("{{{ok},\"metadata\":\"\\ud800\"}}"),
        format!("{{{ok},\"metadata\":\"a\u{1}b\"}}"),
        format!("{{{ok},\"input\":\"a\u{1f}b\"}}"),
        format!("{{{ok},\"input\":\"\\x\"}}"),
        format!("{{{ok},\"input\":\"\\u12g4\"}}"),
        format!("{{{ok},\"input\":5}}"),
        format!("{{{ok},\"tool_success\":\"yes\"}}"),
        format!("{{{ok},\"x\":01}}"),
        format!("{{{ok},\"x\":1.}}"),
        format!("{{{ok},\"x\":-}}"),
        format!("{{{ok},\"x\":.5}}"),
        format!("{{{ok},\"x\":nul}}"),
        format!("{{{ok},\"x\":[1,]}}"),
        format!("{{{ok},\"x\":{{\"a\" 1}}}}"),
        format!("{{{ok},\"x\":{}}}", "[".repeat(63) + &"]".repeat(63)),
        format!("{{{ok},\"x\":{}}}", "[".repeat(64) + &"]".repeat(64)),
        format!("{{{ok},\"metadata\":{}}}", "{\"a\":".repeat(63) + "1" + &"}".repeat(63)),
        format!("{{{ok},\"metadata\":{}}}", "{\"a\":".repeat(64) + "1" + &"}".repeat(64)),
        r#"{"v":1.0,"kind":"run_started","project_id":"p","run_id":"r","ts":1,"agent_name":"a"}"#.into(),
        r#"{"v":"1","kind":"run_started","project_id":"p","run_id":"r","ts":1,"agent_name":"a"}"#.into(),
        r#"{"v":1,"kind":"st\u0065p","project_id":"p","run_id":"r","ts":-0,"step_index":18446744073709551616,"step_type":"x"}"#.into(),
        r#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1e3,"step_index":1E+2,"step_type":"x","tokens_in_context":-0,"tool_latency_ms":-0.0,"cost_usd":123456789012345678901234567890}"#.into(),
        r#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1,"status":"completed","termination_reason":"evicted"}"#.into(),
        r#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1,"status":"failed","reported_totals":{"total_cost_usd":-1}}"#.into(),
        format!("{{\"v\":1,\"kind\":\"step\",\"project_id\":\"{}\",\"run_id\":\"r\",\"ts\":1,\"step_index\":1,\"step_type\":\"x\"}}", "p".repeat(MAX_ID_BYTES + 1)),
        "{}".into(),
        " ".into(),
        "".into(),
        "null".into(),
    ];
    for c in &cases {
        check_against_reference(c.as_bytes());
    }
    let mut bad_utf8 = format!("{{{ok},\"input\":\"ab\"}}").into_bytes();
    let at = bad_utf8.len() - 3;
    bad_utf8[at] = 0xff;
    check_against_reference(&bad_utf8);
}

mod differential;
