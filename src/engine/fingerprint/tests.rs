//! A payload to its canonical text, through every stage: what volatile keys, secrets and
//! number forms do to the text that is hashed.
use super::*;
use crate::engine::detectors::DetectorConfig;
use crate::engine::json::Json;
use serde_json::Value;

fn canon(json: &str) -> String {
    let v: Value = serde_json::from_str(json).unwrap();
    let keys = DetectorConfig::default().key_sets();
    canonical_string(&Json::from_value(keys.volatility(None).normalize(&v)))
}

#[test]
fn http_response_dumps_drop_volatile_headers() {
    let a = canon(
        r#"{"out":"HTTP/1.1 200 OK\ndate: Mon, 11 May 2026 14:35:42 GMT\nx-request-id: 8060c5e0\nx-envoy-upstream-service-time: 11\ncontent-type: application/json\n\n{\"status\":\"Failed\"}"}"#,
    );
    let b = canon(
        r#"{"out":"HTTP/1.1 200 OK\ndate: Tue, 12 May 2026 09:01:02 GMT\nx-request-id: 1b77c36a\nx-envoy-upstream-service-time: 52\ncontent-type: application/json\n\n{\"status\":\"Failed\"}"}"#,
    );
    assert_eq!(a, b);
    let c = canon(
        r#"{"out":"HTTP/1.1 200 OK\ndate: Tue, 12 May 2026 09:01:02 GMT\ncontent-type: application/json\n\n{\"status\":\"Ready\"}"}"#,
    );
    assert_ne!(a, c);
    // Not an HTTP dump: left alone.
    assert!(canon(r#"{"out":"date: 2026"}"#).contains("2026"));
}

#[test]
fn canonical_form_sorts_keys_and_numbers() {
    assert_eq!(
        canon(r#"{"b":1.0,"a":{"y":[1e2,2.5],"x":"s"}}"#),
        r#"{"a":{"x":"s","y":[100,2.5]},"b":1}"#
    );
    assert_eq!(
        canon(r#"{"q":"caf\u00e9"}"#),
        canon("{\"q\":\"caf\u{e9}\"}")
    );
}

#[test]
fn redacted_keys_are_masked_at_every_depth_and_in_http_dumps() {
    let c = canon(
        r#"{"q":"x","auth":{"API-Key":"sk-live-123","nested":[{"password":"hunter2"}]},"out":"HTTP/1.1 401\nAuthorization: Bearer abc.def\n\nno"}"#,
    );
    assert!(
        !c.contains("sk-live-123") && !c.contains("hunter2") && !c.contains("abc.def"),
        "{c}"
    );
    assert!(c.contains(REDACTED), "{c}");
    // Different secrets, same call: same canonical form.
    assert_eq!(
        canon(r#"{"q":1,"token":"a"}"#),
        canon(r#"{"q":1,"token":"b"}"#)
    );
}

#[test]
fn volatile_keys_and_values_are_removed_at_every_depth() {
    let a = canon(
        r#"{"q":"x","meta":{"requestId":"abc","sentAt":"2024-01-01T00:00:00Z"},"trace_id":"9f8e7d6c5b4a39281706f5e4d3c2b1a0"}"#,
    );
    let b = canon(r#"{"meta":{"Request-Id":"zzz"},"q":"x"}"#);
    assert_eq!(a, b);
    // `format` and `chat` end in `at` but are not `_at`/`At` suffixes.
    assert!(canon(r#"{"format":"csv","chat":"hi"}"#).contains("format"));
    assert_eq!(
        canon(r#"{"msg":"job 3f2b1c9e-1a2b-4c3d-8e9f-0123456789ab queued"}"#),
        r#"{"msg":"job <uuid> queued"}"#
    );
}
