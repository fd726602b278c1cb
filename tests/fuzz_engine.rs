//! Fuzzing the engine with proptest: arbitrary event sequences (hostile step indices, clocks
//! far in the future and past, many runs, secrets in payloads). Cases from `EDDY_FUZZ_CASES`
//! (CI default 2000). Properties: no panic; open runs ≤ `max_open_runs`; every run's serialised
//! state stays under a fixed bound; ended runs ≤ `ended_runs_remembered`; no redacted secret
//! reaches an output event; the same sequence gives the same outputs.
//!
//! Plus two scale checks (sizes from `EDDY_FUZZ_STEPS` / `EDDY_FUZZ_RUNS`): one adversarial
//! run with very many sparse, unique steps, and very many distinct run ids.
use eddy::contract::{decode, OutputEvent};
use eddy::engine::{EngineConfig, PartitionEngine};
use proptest::prelude::*;
use std::sync::Arc;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A far-future *first* event cannot stop idle timeouts: runs that agree on the real time bring
/// the watermark back, and timeouts work again.
#[test]
fn a_far_future_first_event_is_outvoted() {
    let cfg = Arc::new(EngineConfig::default());
    let timeout = cfg.idle_timeout_ms;
    let mut eng = PartitionEngine::new(cfg);
    let mut out = Vec::new();
    let apply = |eng: &mut PartitionEngine, l: String, out: &mut Vec<OutputEvent>| {
        eng.apply(&decode(l.as_bytes()).unwrap(), out);
    };
    let future = BASE_TS + 10 * 365 * 86_400_000;
    apply(
        &mut eng,
        step_line("broken-clock", 1, future, "a"),
        &mut out,
    );
    assert_eq!(eng.watermark_ms(), Some(future));
    apply(&mut eng, step_line("r1", 1, BASE_TS, "b"), &mut out);
    apply(&mut eng, step_line("r2", 1, BASE_TS + 10, "c"), &mut out);
    // Two runs are not a quorum; a repeat from one of them is not a third.
    apply(&mut eng, step_line("r2", 2, BASE_TS + 20, "d"), &mut out);
    assert_eq!(eng.watermark_ms(), Some(future));
    apply(&mut eng, step_line("r3", 1, BASE_TS + 30, "e"), &mut out);
    assert_eq!(eng.watermark_ms(), Some(BASE_TS));
    assert!(out.is_empty(), "moving back times nobody out: {out:?}");
    // Time then advances as usual, and a quiet run times out again.
    apply(&mut eng, step_line("r2", 3, BASE_TS + 1_000, "f"), &mut out);
    apply(
        &mut eng,
        step_line("r3", 2, BASE_TS + timeout + 5_000, "g"),
        &mut out,
    );
    let ended: Vec<&str> = out
        .iter()
        .filter_map(|o| match o {
            OutputEvent::RunTerminated(t) => Some(t.run_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        ended,
        vec!["r1", "r2"],
        "the quiet runs timed out, in order"
    );
}

const BASE_TS: i64 = 1_767_225_600_000;
const SECRET: &str = "SECRET-7f3a";
/// Serialised RunState bound under `small_config` (detector windows are fixed; keelwave ≤ 64
/// fingerprints, ≤ 16 seen ranges).
const STATE_BOUND: usize = 96 * 1024;

fn small_config() -> EngineConfig {
    let mut c = EngineConfig {
        max_open_runs: 8,
        max_seen_ranges: 16,
        ended_runs_remembered: 32,
        idle_timeout_ms: 60_000,
        max_future_skew_ms: 3_600_000,
        watermark_jump_quorum: 3,
        ..EngineConfig::default()
    };
    c.detectors.keelwave.max_fingerprints = 64;
    c.detectors.fingerprint.max_field_bytes = 512;
    c
}

#[derive(Debug, Clone)]
struct Op {
    run: u8,
    kind: u8,
    step: u64,
    ts: u8,
    tool: u8,
    input: u8,
    output: u8,
    success: u8,
}

fn op() -> impl Strategy<Value = Op> {
    (
        0u8..24,
        0u8..20,
        prop_oneof![0u64..40, any::<u64>()],
        0u8..20,
        0u8..6,
        0u8..8,
        0u8..8,
        0u8..3,
    )
        .prop_map(|(run, kind, step, ts, tool, input, output, success)| Op {
            run,
            kind,
            step,
            ts,
            tool,
            input,
            output,
            success,
        })
}

fn line(i: usize, o: &Op) -> String {
    let ts: i64 = match o.ts {
        0 => 0,
        1 => eddy::contract::input::MAX_TS_MS,
        2 => BASE_TS + 400 * 24 * 3_600_000,
        3 => BASE_TS - 7 * 24 * 3_600_000,
        4 => BASE_TS + i as i64 * 120_000,
        _ => BASE_TS + i as i64 * 1_000,
    };
    let run = format!("r{}", o.run);
    let tool = ["search", "read_file", "get_job_status", "edit", "bash", ""][o.tool as usize];
    let input = [
        r#"{"q":"a"}"#.to_string(),
        r#"{"q":"b","request_id":"9f8e7d6c5b4a39281706f5e4d3c2b1a0"}"#.to_string(),
        format!(r#"{{"api_key":"{SECRET}","q":"c"}}"#),
        r#""just a string""#.to_string(),
        "[1,2,3]".to_string(),
        "42".to_string(),
        format!(r#"{{"blob":"{}"}}"#, "x".repeat(2000)),
        r#"{"path":"/a","nested":{"deep":[{"password":"hunter2"}]}}"#.to_string(),
    ][o.input as usize]
        .clone();
    let output = [
        r#"{"hits":[]}"#.to_string(),
        format!(r#"{{"error":"unauthorized: token {SECRET} rejected","token":"{SECRET}"}}"#),
        r#"{"status":"running"}"#.to_string(),
        "null".to_string(),
        r#""HTTP/1.1 401 Unauthorized\nAuthorization: Bearer SECRET-7f3a\n\nno""#.to_string(),
        r#"{"error":"old text not found"}"#.to_string(),
        format!(r#"{{"error":{{"message":"denied","password":"{SECRET}"}}}}"#),
        r#"{"rows":[1,2,3]}"#.to_string(),
    ][o.output as usize]
        .clone();
    let success = ["true", "false", "null"][o.success as usize];
    match o.kind {
        0 => format!(
            r#"{{"v":1,"kind":"run_started","project_id":"p","run_id":"{run}","ts":{ts},"agent_name":"a{}"}}"#,
            o.tool
        ),
        1 => format!(
            r#"{{"v":1,"kind":"run_finished","project_id":"p","run_id":"{run}","ts":{ts},"status":"completed"}}"#
        ),
        2 => format!(
            r#"{{"v":1,"kind":"step","project_id":"p","run_id":"{run}","ts":{ts},"step_index":{},"step_type":"thought","content":"I will try again {SECRET}"}}"#,
            o.step
        ),
        _ if tool.is_empty() => format!(
            r#"{{"v":1,"kind":"step","project_id":"p","run_id":"{run}","ts":{ts},"step_index":{},"step_type":"thought","content":""}}"#,
            o.step
        ),
        _ => format!(
            r#"{{"v":1,"kind":"step","project_id":"p","run_id":"{run}","ts":{ts},"step_index":{},"step_type":"tool_call","tool_name":"{tool}","tool_input":{input},"tool_output":{output},"tool_success":{success},"tokens_in_context":{},"agent":"a","caller":"b{}"}}"#,
            o.step,
            u64::from(o.output) * 30_000,
            o.run % 3
        ),
    }
}

fn run_all(cfg: &Arc<EngineConfig>, ops: &[Op]) -> Result<Vec<String>, TestCaseError> {
    let mut eng = PartitionEngine::new(cfg.clone());
    let mut all = Vec::new();
    let mut out = Vec::new();
    for (i, o) in ops.iter().enumerate() {
        let l = line(i, o);
        let ev = decode(l.as_bytes()).map_err(|e| TestCaseError::fail(format!("{e}: {l}")))?;
        eng.apply(&ev, &mut out);
        prop_assert!(eng.open_runs() <= cfg.max_open_runs);
        prop_assert!(eng.ended_runs() <= cfg.ended_runs_remembered);
        for o in out.drain(..) {
            let s = serde_json::to_string(&o).unwrap();
            // Evidence and patterns carry the tool's error text: the unredacted secrets must
            // not. (Message content is never copied into outputs.)
            prop_assert!(!s.contains(SECRET), "secret leaked: {s}");
            prop_assert!(!s.contains("hunter2"), "secret leaked: {s}");
            all.push(s);
        }
        // Touch the changelog path exactly as the worker does.
        let _ = eng.take_changes();
    }
    for (_, st) in eng.runs() {
        let n = serde_json::to_vec(st).unwrap().len();
        prop_assert!(n <= STATE_BOUND, "run state {n} bytes");
        prop_assert!(st.seen.range_count() <= cfg.max_seen_ranges);
    }
    Ok(all)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: env_or("EDDY_FUZZ_CASES", 2000) as u32,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_event_sequences_keep_state_bounded(ops in prop::collection::vec(op(), 1..120)) {
        let cfg = Arc::new(small_config());
        let a = run_all(&cfg, &ops)?;
        let b = run_all(&cfg, &ops)?;
        prop_assert_eq!(a, b, "the same events must give the same outputs");
    }
}

fn step_line(run: &str, i: u64, ts: i64, input: &str) -> String {
    format!(
        r#"{{"v":1,"kind":"step","project_id":"p","run_id":"{run}","ts":{ts},"step_index":{i},"step_type":"tool_call","tool_name":"search","tool_input":{{"q":"{input}"}},"tool_output":{{"n":"{input}"}},"tool_success":true}}"#
    )
}

/// One run, very many steps, every index sparse (a new range each) and every input unique
/// (a new keelwave fingerprint each): its state must stop growing.
#[test]
fn adversarial_long_run_state_is_bounded() {
    let n = env_or("EDDY_FUZZ_STEPS", 20_000);
    let cfg = Arc::new(EngineConfig::default());
    let mut eng = PartitionEngine::new(cfg.clone());
    let mut out = Vec::new();
    let mut peak = 0usize;
    for i in 0..n {
        let ev = decode(step_line("long", i * 2, BASE_TS + i as i64, &i.to_string()).as_bytes())
            .unwrap();
        eng.apply(&ev, &mut out);
        out.clear();
        if i % 5_000 == 4_999 || i + 1 == n {
            let (_, st) = eng.runs().next().unwrap();
            peak = peak.max(serde_json::to_vec(st).unwrap().len());
            assert!(st.seen.range_count() <= cfg.max_seen_ranges);
        }
    }
    // keelwave: 4096 × (u64 key + step) ≈ 170 KB as JSON; seen ranges 1024 × ~30 B; windows.
    assert!(peak < 320 * 1024, "run state grew to {peak} bytes");
    eprintln!("{n} steps: peak serialised run state {peak} bytes");
}

/// Very many run ids: open runs and remembered ended runs stay at their caps, and every
/// evicted run is closed with exactly one run_terminated(abandoned, evicted).
#[test]
fn many_run_ids_are_evicted_deterministically() {
    let n = env_or("EDDY_FUZZ_RUNS", 20_000);
    let cfg = Arc::new(EngineConfig {
        max_open_runs: 1_000,
        ended_runs_remembered: 2_000,
        ..EngineConfig::default()
    });
    let mut eng = PartitionEngine::new(cfg.clone());
    let mut out = Vec::new();
    let mut evicted = 0u64;
    for i in 0..n {
        let ev =
            decode(step_line(&format!("run-{i}"), 1, BASE_TS + i as i64, "q").as_bytes()).unwrap();
        eng.apply(&ev, &mut out);
        for o in out.drain(..) {
            if let OutputEvent::RunTerminated(t) = o {
                assert_eq!(
                    (t.status.as_str(), t.termination_reason.as_str()),
                    ("abandoned", "evicted")
                );
                // Least recently active first: exactly the run 1000 arrivals ago.
                assert_eq!(t.run_id, format!("run-{}", i - 1_000));
                evicted += 1;
            }
        }
        assert!(eng.open_runs() <= 1_000);
        assert!(eng.ended_runs() <= 2_000);
    }
    assert_eq!(evicted, n.saturating_sub(1_000));
}

/// One producer with a broken clock cannot time out every other run.
#[test]
fn a_far_future_clock_does_not_drag_the_watermark() {
    let cfg = Arc::new(EngineConfig::default());
    let mut eng = PartitionEngine::new(cfg);
    let mut out = Vec::new();
    let apply = |eng: &mut PartitionEngine, l: String, out: &mut Vec<OutputEvent>| {
        eng.apply(&decode(l.as_bytes()).unwrap(), out);
    };
    apply(&mut eng, step_line("healthy", 1, BASE_TS, "a"), &mut out);
    // A run whose clock is in microseconds (1000x ahead), and one a year ahead.
    apply(
        &mut eng,
        step_line("bad", 1, BASE_TS * 1000 / 1000 + 365 * 86_400_000, "b"),
        &mut out,
    );
    apply(
        &mut eng,
        step_line("bad", 2, 253_402_300_000_000, "c"),
        &mut out,
    );
    assert_eq!(eng.watermark_ms(), Some(BASE_TS));
    apply(
        &mut eng,
        step_line("healthy", 2, BASE_TS + 1_000, "d"),
        &mut out,
    );
    assert!(out.is_empty(), "nobody timed out: {out:?}");
    assert_eq!(eng.open_runs(), 2);
    // Three distinct runs agreeing on a jump (a real gap in traffic) do move it.
    for r in ["x", "y", "z"] {
        apply(
            &mut eng,
            step_line(r, 1, BASE_TS + 3 * 3_600_000, "e"),
            &mut out,
        );
    }
    assert_eq!(eng.watermark_ms(), Some(BASE_TS + 3 * 3_600_000));
    assert!(out
        .iter()
        .any(|o| matches!(o, OutputEvent::RunTerminated(t) if t.run_id == "healthy")));
}
