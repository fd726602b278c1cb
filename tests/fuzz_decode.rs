//! Fuzzing the decoder with proptest (cargo-fuzz needs a nightly toolchain, which this
//! project's build machines cannot install; proptest is the fuzzer). Cases per property come
//! from `EDDY_FUZZ_CASES` (CI default 2000; run longer by hand, e.g. `EDDY_FUZZ_CASES=200000`).
//!
//! Properties: `decode` never panics on any bytes, and every rejection has one of the
//! documented machine-readable reasons.
use eddy::contract::input::{decode_bounded, DecodeError};
use eddy::contract::{decode, Event};
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("EDDY_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    match decode(bytes) {
        Ok(ev) => {
            // An accepted event is well-formed: non-empty identity, bounded identifiers.
            let k = ev.key();
            prop_assert!(!k.project_id.is_empty() && !k.run_id.is_empty());
            prop_assert!(k.run_id.len() <= eddy::contract::input::MAX_ID_BYTES);
            prop_assert!(ev.ts_ms() >= 0 && ev.ts_ms() <= eddy::contract::input::MAX_TS_MS);
        }
        Err(e) => {
            prop_assert!(DecodeError::REASONS.contains(&e.reason()), "{e:?}");
            prop_assert!(!e.to_string().is_empty());
        }
    }
    let bounded = decode_bounded(Some(bytes), 64);
    if bytes.len() > 64 {
        prop_assert_eq!(bounded.unwrap_err().reason(), "too_large");
    }
    Ok(())
}

const VALID: &str = r#"{"v":1,"kind":"step","project_id":"p","run_id":"r1","ts":1767225601000,"step_index":1,"step_type":"tool_call","tool_name":"web_search","tool_input":{"q":"weather"},"tool_output":{"hits":[]},"tool_success":true,"tool_latency_ms":120,"tokens":350,"cost_usd":0.002,"tokens_in_context":4100,"agent":"researcher","caller":"planner"}"#;

/// Arbitrary JSON values, nested a little.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(|n| serde_json::json!(n)),
        any::<f64>().prop_map(|f| serde_json::json!(f)),
        ".{0,40}".prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(".{0,12}", inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

const FIELDS: &[&str] = &[
    "v",
    "kind",
    "project_id",
    "run_id",
    "ts",
    "step_index",
    "step_type",
    "tool_name",
    "tool_input",
    "tool_output",
    "tool_success",
    "tool_latency_ms",
    "tokens",
    "cost_usd",
    "tokens_in_context",
    "agent",
    "caller",
    "status",
    "termination_reason",
    "agent_name",
    "reported_totals",
    "reported_loop_detected",
    "reported_loop_step_index",
    "metadata",
    "content",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check(&bytes)?;
    }

    #[test]
    fn mutated_valid_messages_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8)
    ) {
        let mut b = VALID.as_bytes().to_vec();
        for (i, byte, op) in edits {
            let at = i.index(b.len() + 1);
            match op {
                0 if at < b.len() => b[at] = byte,
                1 => b.insert(at, byte),
                _ if at < b.len() => { b.remove(at); }
                _ => b.push(byte),
            }
        }
        check(&b)?;
    }

    #[test]
    fn any_value_in_any_field_never_panics(
        field in prop::sample::select(FIELDS),
        value in json_value(),
        kind in prop::sample::select(&["step", "run_started", "run_finished", "nope"][..]),
    ) {
        let mut base: serde_json::Value = serde_json::from_str(VALID).unwrap();
        base["kind"] = serde_json::json!(kind);
        base["status"] = serde_json::json!("completed");
        base["agent_name"] = serde_json::json!("a");
        base[field] = value;
        let bytes = serde_json::to_vec(&base).unwrap();
        check(&bytes)?;
        if let Ok(Event::Step(s)) = decode(&bytes) {
            // tool_input is kept byte for byte when it is present.
            if let (Some(raw), Some(v)) = (s.tool_input.as_ref(), base.get("tool_input")) {
                prop_assert_eq!(raw.get(), serde_json::to_string(v).unwrap());
            }
        }
    }

    #[test]
    fn deep_nesting_is_rejected_precisely(depth in 1usize..2000, open in prop::sample::select(&["[", "{\"a\":"][..])) {
        let mut s = String::from(r#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1,"step_index":1,"step_type":"x","tool_input":"#);
        for _ in 0..depth { s.push_str(open); }
        s.push('1');
        let close = if open == "[" { "]" } else { "}" };
        for _ in 0..depth { s.push_str(close); }
        s.push('}');
        let r = decode(s.as_bytes());
        if depth + 1 > eddy::contract::input::MAX_DEPTH {
            prop_assert_eq!(r.unwrap_err().reason(), "too_deep");
        } else {
            prop_assert!(r.is_ok(), "{:?}", r.err());
        }
    }
}
