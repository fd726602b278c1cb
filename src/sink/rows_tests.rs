//! Row encoding: what each column gets from an event, and the edge values a DateTime column
//! cannot hold.
use super::*;
use crate::contract::input::{decode, TerminationReason};
use crate::contract::{Event, RunKey};
use crate::engine::rollup::{Ending, Minute};
use crate::sink::Batch;

/// 2023-11-14T22:13:20Z.
const T0_MS: i64 = 1_700_000_000_000;
const SRC: Origin = Origin {
    partition: 3,
    offset: 42,
};

fn step(json: &str) -> Step {
    match decode(json.as_bytes()) {
        Ok(Event::Step(s)) => s,
        other => panic!("not a step: {other:?}"),
    }
}

fn fps(raw: Option<u8>, input: Option<u8>, output: Option<u8>) -> StepFingerprints {
    StepFingerprints {
        raw: raw.map(|b| [b; 32]),
        canonical_input: input.map(|b| [b; 32]),
        canonical_output: output.map(|b| [b; 32]),
    }
}

#[test]
fn date_time_seconds_are_clamped_to_uint32() {
    assert_eq!(secs(T0_MS), 1_700_000_000);
    assert_eq!(secs(T0_MS + 999), 1_700_000_000);
    // Before 1970: floor division would give -1; the column cannot hold it.
    assert_eq!(secs(-1), 0);
    assert_eq!(secs(i64::MIN), 0);
    assert_eq!(secs(4_294_967_295_000), u32::MAX);
    assert_eq!(secs(i64::MAX), u32::MAX);
}

#[test]
fn rfc3339_times_become_epoch_milliseconds() {
    assert_eq!(ms_of("2023-11-14T22:13:20Z"), T0_MS);
    assert_eq!(ms_of("2023-11-14T22:13:20.123Z"), T0_MS + 123);
    assert_eq!(ms_of("2023-11-15T00:13:20.5+02:00"), T0_MS + 500);
    assert_eq!(ms_of("not a time"), 0);
}

#[test]
fn a_tool_step_fills_every_column() {
    let s = step(
        r#"{"v":1,"kind":"step","project_id":"p1","run_id":"r1","ts":1700000000250,"step_index":7,
        "step_type":"tool_call","tool_name":"search","tool_input":{"q":"x"},"tool_output":"ok",
        "tool_success":false,"tool_latency_ms":12.5,"tokens":30,"cost_usd":0.25,
        "tokens_in_context":900,"agent":"planner","caller":"root","content":"héllo"}"#,
    );
    let r = StepRow::new(&s, &fps(Some(1), Some(2), Some(3)), SRC);
    assert_eq!(
        r,
        StepRow {
            project_id: "p1".into(),
            run_id: "r1".into(),
            step_index: 7,
            ts: 1_700_000_000,
            ts_ms: T0_MS + 250,
            step_type: "tool_call".into(),
            agent: "planner".into(),
            caller: "root".into(),
            tool_name: "search".into(),
            raw_fp: [1; 32],
            has_raw_fp: 1,
            canonical_input_fp: [2; 32],
            canonical_output_fp: [3; 32],
            tool_success: 0,
            tool_latency_ms: 12.5,
            tokens: 30,
            cost_usd: 0.25,
            tokens_in_context: 900,
            // Bytes, not characters: `é` is two.
            content_len: 6,
            src_partition: 3,
            src_offset: 42,
            signal_event_id: String::new(),
        }
    );
}

#[test]
fn absent_step_fields_get_their_column_defaults() {
    let s = step(
        r#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1700000000000,"step_index":0,
        "step_type":"message"}"#,
    );
    let r = StepRow::new(&s, &fps(None, None, None), SRC);
    assert_eq!(r.tool_name, "");
    assert_eq!(r.agent, "");
    assert_eq!(r.caller, "");
    assert_eq!((r.raw_fp, r.has_raw_fp), ([0; 32], 0));
    assert_eq!(r.canonical_input_fp, [0; 32]);
    assert_eq!(r.canonical_output_fp, [0; 32]);
    // -1 tells "not reported" apart from a failure (0).
    assert_eq!(r.tool_success, -1);
    assert_eq!((r.tool_latency_ms, r.cost_usd), (0.0, 0.0));
    assert_eq!((r.tokens, r.tokens_in_context, r.content_len), (0, 0, 0));
}

#[test]
fn tool_success_true_is_one() {
    let s = step(
        r#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1700000000000,"step_index":0,
        "step_type":"tool_call","tool_name":"t","tool_success":true}"#,
    );
    assert_eq!(
        StepRow::new(&s, &fps(None, None, None), SRC).tool_success,
        1
    );
}

fn signal(kind: &str) -> OutputEvent {
    let json = format!(
        r#"{{"kind":"{kind}","event_id":"e1","project_id":"p","run_id":"r","step_index":9,
        "ts":"2023-11-14T22:13:20.750Z","detector":"repeat","severity":"alert",
        "pattern":"search(q=x)","fingerprint":"00ff","hits":3,"step_indices":[5,7,9],
        "first_step_index":5,"evidence":{{"b":1,"a":[true]}}}}"#
    );
    serde_json::from_str(&json).unwrap()
}

#[test]
fn a_signal_row_keeps_the_event_and_its_kind() {
    let o = signal("loop_detected");
    let mut b = Batch::default();
    push_output(&mut b, &o, SRC);
    assert!(b.runs.is_empty() && b.steps.is_empty());
    let r = &b.signals[0];
    assert_eq!(r.kind, "loop_detected");
    assert_eq!(r.event_id, "e1");
    assert_eq!(r.agent_name, "");
    assert_eq!((r.ts, r.ts_ms), (1_700_000_000, T0_MS + 750));
    assert_eq!(
        (r.detector.as_str(), r.severity.as_str()),
        ("repeat", "alert")
    );
    assert_eq!(
        (r.pattern.as_str(), r.fingerprint.as_str()),
        ("search(q=x)", "00ff")
    );
    assert_eq!((r.hits, r.first_step_index, r.step_index), (3, 5, 9));
    assert_eq!(r.step_indices, vec![5, 7, 9]);
    // Evidence is stored as compact JSON text.
    assert_eq!(r.evidence, r#"{"a":[true],"b":1}"#);
    assert_eq!((r.src_partition, r.src_offset), (3, 42));

    let mut b = Batch::default();
    push_output(&mut b, &signal("loop_warning"), SRC);
    assert_eq!(b.signals[0].kind, "loop_warning");
}

#[test]
fn a_terminated_run_becomes_a_runs_row() {
    let o: OutputEvent = serde_json::from_str(
        r#"{"kind":"run_terminated","event_id":"t1","project_id":"p","run_id":"r",
        "agent_name":"a","ts":"2023-11-14T22:13:21.5Z","started_at":"2023-11-14T22:13:20Z",
        "status":"completed","termination_reason":"loop_detected",
        "termination_reason_reported":true,"loop_detected":true,"loop_step_index":4,
        "loop_caught_step_index":null,"signals":2,"redeliveries":1,
        "totals":{"steps":10,"tool_calls":8,"tokens":100,"cost_usd":0.5,"duration_ms":1500}}"#,
    )
    .unwrap();
    let mut b = Batch::default();
    push_output(&mut b, &o, SRC);
    assert!(b.signals.is_empty());
    let r = &b.runs[0];
    assert_eq!((r.started_at, r.ended_at), (1_700_000_000, 1_700_000_001));
    assert_eq!(r.ended_ms, T0_MS + 1500);
    assert_eq!(r.agent_name, "a");
    assert_eq!(
        (r.status.as_str(), r.termination_reason.as_str()),
        ("completed", "loop_detected")
    );
    assert_eq!((r.termination_reason_reported, r.loop_detected), (1, 1));
    assert_eq!((r.has_loop_step_index, r.loop_step_index), (1, 4));
    assert_eq!(r.loop_caught_step_index, 0);
    assert_eq!((r.signals, r.redeliveries), (2, 1));
    assert_eq!((r.steps, r.tool_calls, r.tokens), (10, 8, 100));
    assert_eq!((r.cost_usd, r.duration_ms), (0.5, 1500));
    // Never steered: the steering columns keep their defaults.
    assert_eq!(
        (r.steers, r.has_steered_step_index, r.steer_outcome.as_str()),
        (0, 0, "")
    );
    // A worker older than step numbers: 0, unknown.
    assert_eq!((r.loop_step_number, r.loop_caught_step_number), (0, 0));
    let o: OutputEvent = serde_json::from_str(
        r#"{"kind":"run_terminated","event_id":"t1","project_id":"p","run_id":"r",
        "ts":"2023-11-14T22:13:21.5Z","started_at":"2023-11-14T22:13:20Z",
        "status":"completed","termination_reason":"clean","termination_reason_reported":false,
        "loop_detected":true,"loop_step_index":1767225600000000042,
        "loop_caught_step_index":1767225604500000913,"loop_step_number":3,
        "loop_caught_step_number":6,"signals":1,"redeliveries":0,
        "totals":{"steps":10,"tool_calls":8,"tokens":100,"cost_usd":0.5,"duration_ms":1500}}"#,
    )
    .unwrap();
    let mut b = Batch::default();
    push_output(&mut b, &o, SRC);
    let r = &b.runs[0];
    assert_eq!(r.loop_step_index, 1_767_225_600_000_000_042);
    assert_eq!((r.loop_step_number, r.loop_caught_step_number), (3, 6));
}

#[test]
fn a_steered_run_and_its_steer_step_fill_the_steering_columns() {
    let o: OutputEvent = serde_json::from_str(
        r#"{"kind":"run_terminated","event_id":"t1","project_id":"p","run_id":"r",
        "ts":"2023-11-14T22:13:21.5Z","started_at":"2023-11-14T22:13:20Z",
        "status":"completed","termination_reason":"clean",
        "termination_reason_reported":false,"loop_detected":true,"loop_step_index":4,
        "loop_caught_step_index":6,"signals":1,"redeliveries":0,
        "totals":{"steps":10,"tool_calls":8,"tokens":100,"cost_usd":0.5,"duration_ms":1500},
        "steered_step_index":7,"steers":1,"steer_outcome":"recovered"}"#,
    )
    .unwrap();
    let mut b = Batch::default();
    push_output(&mut b, &o, SRC);
    let r = &b.runs[0];
    assert_eq!(
        (r.steers, r.has_steered_step_index, r.steered_step_index),
        (1, 1, 7)
    );
    assert_eq!(r.steer_outcome, "recovered");

    let s = step(
        r#"{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1700000000250,
        "step_index":7,"step_type":"steer","content":"eddy: stop repeating",
        "signal_event_id":"0123456789abcdef0123456789abcdef"}"#,
    );
    let r = StepRow::new(&s, &fps(None, None, None), SRC);
    assert_eq!(r.step_type, "steer");
    assert_eq!(r.signal_event_id, "0123456789abcdef0123456789abcdef");
    assert_eq!(r.content_len, 20);
}

#[test]
fn a_closed_minute_becomes_a_rollup_row_versioned_by_the_closing_event() {
    let key = RunKey {
        project_id: "p".into(),
        run_id: "r".into(),
    };
    let minute = Minute {
        bucket_ms: T0_MS - 20_000,
        started: true,
        steps: 4,
        tool_calls: 3,
        errors: 1,
        tokens: 50,
        cost_usd: 0.125,
        loop_steps: 2,
        loop_cost_usd: 0.0625,
        caught_after_steps: Some(6),
    };
    let open = Closed {
        key: key.clone(),
        agent_name: None,
        minute: minute.clone(),
        ending: None,
    };
    let r = RollupRow::new(&open, SRC);
    assert_eq!(r.bucket, 1_699_999_980);
    assert_eq!((r.runs_started, r.runs_ended, r.loop_runs), (1, 0, 0));
    assert_eq!(r.termination_reason, "");
    assert_eq!(r.agent_name, "");
    assert_eq!((r.steps, r.tool_calls, r.errors, r.tokens), (4, 3, 1, 50));
    assert_eq!(
        (r.cost_usd, r.loop_steps, r.loop_cost_usd),
        (0.125, 2, 0.0625)
    );
    assert_eq!((r.loops_caught, r.caught_after_steps), (1, 6));
    assert_eq!((r.loops_counted, r.steps_to_catch), (1, 6));
    assert_eq!((r.src_partition, r.src_offset), (3, 42));

    // A loop caught whose steps could not be counted: caught, but out of the averages.
    let uncounted = Closed {
        minute: Minute {
            caught_after_steps: Some(crate::engine::rollup::UNCOUNTED),
            ..minute.clone()
        },
        ..open.clone()
    };
    let r = RollupRow::new(&uncounted, SRC);
    assert_eq!((r.loops_caught, r.caught_after_steps), (1, 0));
    assert_eq!((r.loops_counted, r.steps_to_catch), (0, 0));

    let ended = Closed {
        key,
        agent_name: Some("a".into()),
        minute: Minute {
            caught_after_steps: None,
            ..minute
        },
        ending: Some(Ending {
            reason: TerminationReason::Timeout,
            loop_detected: true,
        }),
    };
    let r = RollupRow::new(&ended, SRC);
    assert_eq!((r.runs_ended, r.loop_runs), (1, 1));
    assert_eq!(r.termination_reason, "timeout");
    assert_eq!((r.loops_caught, r.caught_after_steps), (0, 0));
    assert_eq!((r.loops_counted, r.steps_to_catch), (0, 0));
    assert_eq!(r.agent_name, "a");
}
