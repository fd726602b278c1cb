//! Properties of the detection engine: canonical fingerprints ignore key order, changing
//! outputs never alert, replays are deterministic, and a changelog snapshot taken mid-run
//! (serde_json round trip) continues with exactly the signals an uninterrupted engine emits.
use eddy::contract::{decode, Event, OutputEvent};
use eddy::engine::{EngineConfig, PartitionEngine, RunState, StepFingerprints};
use eddy::replay::replay_to_vec;
use proptest::prelude::*;
use std::path::Path;
use std::sync::Arc;

/// A JSON object whose keys we can print in two orders.
#[derive(Debug, Clone)]
enum J {
    Num(i64),
    Float(i32),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

fn arb_json() -> impl Strategy<Value = J> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(J::Num),
        any::<i32>().prop_map(J::Float),
        "[a-z ]{0,8}".prop_map(J::Str),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(J::Arr),
            proptest::collection::btree_map("[a-z]{1,5}", inner, 0..5)
                .prop_map(|m| J::Obj(m.into_iter().collect())),
        ]
    })
}

fn print(j: &J, reverse: bool, out: &mut String) {
    match j {
        J::Num(n) => out.push_str(&n.to_string()),
        // Same number written two ways (`3` vs `3.0`) depending on the order flag.
        J::Float(n) => out.push_str(&if reverse {
            format!("{n}.0")
        } else {
            n.to_string()
        }),
        J::Str(s) => out.push_str(&serde_json::to_string(s).unwrap()),
        J::Arr(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                print(x, reverse, out);
            }
            out.push(']');
        }
        J::Obj(kv) => {
            let mut kv: Vec<&(String, J)> = kv.iter().collect();
            if reverse {
                kv.reverse();
            }
            out.push('{');
            for (i, (k, v)) in kv.iter().enumerate() {
                if i > 0 {
                    out.push_str(if reverse { " , " } else { "," });
                }
                out.push_str(&serde_json::to_string(k).unwrap());
                out.push(':');
                print(v, reverse, out);
            }
            out.push('}');
        }
    }
}

fn step_line(run: &str, i: u64, tool: &str, input: &str, output: &str) -> String {
    format!(
        r#"{{"v":1,"kind":"step","project_id":"p","run_id":"{run}","ts":{},"step_index":{i},"step_type":"tool_call","tool_name":"{tool}","tool_input":{input},"tool_output":{output},"tool_success":true}}"#,
        1_700_000_000_000u64 + i * 1000
    )
}

fn fps_of(line: &str) -> StepFingerprints {
    let Ok(Event::Step(s)) = decode(line.as_bytes()) else {
        panic!("not a step: {line}")
    };
    EngineConfig::default().detectors.canonical(&s).fps
}

fn caught(outs: &[OutputEvent]) -> Vec<String> {
    outs.iter()
        .filter_map(|o| match o {
            OutputEvent::LoopDetected(s) => Some(format!("{} {}", s.detector, s.pattern)),
            _ => None,
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn key_order_never_changes_a_canonical_fingerprint(j in arb_json(), o in arb_json()) {
        let (mut a, mut b, mut oa, mut ob) = (String::new(), String::new(), String::new(), String::new());
        print(&j, false, &mut a);
        print(&j, true, &mut b);
        print(&o, false, &mut oa);
        print(&o, true, &mut ob);
        let ca = fps_of(&step_line("r", 1, "t", &a, &oa));
        let cb = fps_of(&step_line("r", 1, "t", &b, &ob));
        prop_assert_eq!(ca.canonical_input, cb.canonical_input);
        prop_assert_eq!(ca.canonical_output, cb.canonical_output);
        prop_assert!(ca.canonical_input.is_some());
    }

    #[test]
    fn changing_outputs_never_alert(
        calls in proptest::collection::vec((0usize..3, 0usize..3), 1..80),
    ) {
        let tools = ["web_search", "read_file", "get_status"];
        let inputs = [r#"{"q":"x"}"#, r#"{"path":"a.rs"}"#, "{}"];
        let mut lines = String::new();
        for (i, (t, inp)) in calls.iter().enumerate() {
            // Every output is new: the agent keeps learning something.
            let out = format!(r#"{{"result":"value {i}","n":{i}}}"#);
            lines.push_str(&step_line("r", i as u64 + 1, tools[*t], inputs[*inp], &out));
            lines.push('\n');
        }
        let (outs, _) = replay_to_vec(lines.as_bytes(), Arc::new(EngineConfig::default()), 1);
        prop_assert!(caught(&outs).is_empty(), "{:?}", caught(&outs));
    }

    #[test]
    fn replaying_random_runs_twice_gives_identical_signals(
        calls in proptest::collection::vec((0usize..3, 0usize..3, 0usize..3, any::<bool>()), 1..60),
    ) {
        let tools = ["web_search", "http_get", "edit"];
        let inputs = [r#"{"q":"x"}"#, r#"{"url":"u"}"#, "{}"];
        let outputs = [r#"{"error":"401 unauthorized"}"#, r#"{"results":[]}"#, r#""same""#];
        let mut lines = String::new();
        for (i, (t, inp, out, ok)) in calls.iter().enumerate() {
            let l = step_line("r", i as u64 + 1, tools[*t], inputs[*inp], outputs[*out])
                .replace("\"tool_success\":true", if *ok { "\"tool_success\":true" } else { "\"tool_success\":false" });
            lines.push_str(&l);
            lines.push('\n');
        }
        let cfg = Arc::new(EngineConfig::default());
        let (a, _) = replay_to_vec(lines.as_bytes(), cfg.clone(), 1);
        let (b, _) = replay_to_vec(lines.as_bytes(), cfg, 1);
        prop_assert_eq!(a, b);
    }
}

fn corpus() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/events.jsonl"))
        .expect("corpus exists (python3 tests/corpus/gen.py)")
}

#[test]
fn replaying_the_corpus_twice_gives_identical_signals() {
    let cfg = Arc::new(EngineConfig::default());
    let (a, _) = replay_to_vec(&corpus(), cfg.clone(), 1);
    let (b, _) = replay_to_vec(&corpus(), cfg.clone(), 4);
    let (c, _) = replay_to_vec(&corpus(), cfg, 1);
    assert_eq!(a, c);
    let ids = |v: &[OutputEvent]| {
        let mut x: Vec<String> = v.iter().map(|o| o.event_id().to_string()).collect();
        x.sort();
        x
    };
    // Partitioning changes interleaving, never the set of events.
    assert_eq!(ids(&a), ids(&b));
    assert!(a.iter().any(|o| matches!(o, OutputEvent::LoopDetected(_))));
}

/// Snapshot at `cut`, round-trip every run state through JSON, restore into a fresh engine and
/// continue: the outputs after the cut must equal an uninterrupted engine's.
#[test]
fn restored_state_continues_with_identical_signals() {
    let events: Vec<Event> = corpus()
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| decode(l).expect("corpus decodes"))
        .collect();
    let cfg = Arc::new(EngineConfig::default());
    let mut full = PartitionEngine::new(cfg.clone());
    let mut expected: Vec<Vec<OutputEvent>> = Vec::new();
    for ev in &events {
        let mut out = Vec::new();
        full.apply(ev, &mut out);
        expected.push(out);
    }
    for cut in [1, 97, events.len() / 3, events.len() / 2, events.len() - 5] {
        let mut a = PartitionEngine::new(cfg.clone());
        let mut sink = Vec::new();
        for ev in &events[..cut] {
            a.apply(ev, &mut sink);
        }
        let meta_json = serde_json::to_string(a.meta()).expect("meta serialises");
        let mut runs = Vec::new();
        let mut ended = Vec::new();
        for ch in a.take_changes() {
            match ch {
                eddy::engine::Change::Upsert(k, s) => {
                    let json = serde_json::to_string(s).expect("state serialises");
                    let back: RunState = serde_json::from_str(&json).expect("state deserialises");
                    assert_eq!(&back, s);
                    runs.push((k, back));
                }
                eddy::engine::Change::Ended(k) => ended.push(k),
                eddy::engine::Change::Forget(_) => {}
            }
        }
        let mut b = PartitionEngine::new(cfg.clone());
        b.restore(
            serde_json::from_str(&meta_json).expect("meta deserialises"),
            runs,
            ended,
        );
        for (i, ev) in events.iter().enumerate().skip(cut) {
            let mut out = Vec::new();
            b.apply(ev, &mut out);
            assert_eq!(out, expected[i], "event {i} after a restore at {cut}");
        }
    }
}

/// The changelog as Kafka compaction leaves it: flushes every `every` events write each changed
/// run (state or ended marker) and delete forgotten ones; a restore from what is left must
/// continue exactly like the engine that wrote it. A small ended-runs window makes runs get
/// forgotten between flushes, and runs change again after being written.
#[test]
fn compacted_changelog_restores_to_the_same_engine() {
    use eddy::engine::Change;
    use std::collections::BTreeMap;
    let events: Vec<Event> = corpus()
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| decode(l).expect("corpus decodes"))
        .collect();
    let cfg = Arc::new(EngineConfig {
        ended_runs_remembered: 25,
        ..EngineConfig::default()
    });
    for every in [1usize, 37, 500] {
        let mut a = PartitionEngine::new(cfg.clone());
        // key -> (write order, state JSON or None = ended)
        let mut log: BTreeMap<eddy::contract::RunKey, (usize, Option<String>)> = BTreeMap::new();
        let mut writes = 0usize;
        let cut = events.len() * 2 / 3;
        let mut sink = Vec::new();
        for (i, ev) in events[..cut].iter().enumerate() {
            a.apply(ev, &mut sink);
            if (i + 1) % every == 0 || i + 1 == cut {
                for ch in a.take_changes() {
                    writes += 1;
                    match ch {
                        Change::Upsert(k, s) => {
                            let json = serde_json::to_string(s).expect("state serialises");
                            log.insert(k, (writes, Some(json)));
                        }
                        Change::Ended(k) => {
                            log.insert(k, (writes, None));
                        }
                        Change::Forget(k) => {
                            log.remove(&k);
                        }
                    }
                }
            }
        }
        let mut runs = Vec::new();
        let mut ended = Vec::new();
        for (k, (at, v)) in log {
            match v {
                Some(json) => runs.push((k, serde_json::from_str(&json).expect("state"))),
                None => ended.push((at, k)),
            }
        }
        ended.sort();
        assert!(
            !runs.is_empty() && ended.len() <= 25,
            "{every}: {}",
            ended.len()
        );
        let mut b = PartitionEngine::new(cfg.clone());
        let meta = serde_json::to_string(a.meta()).expect("meta serialises");
        b.restore(
            serde_json::from_str(&meta).expect("meta deserialises"),
            runs,
            ended.into_iter().map(|(_, k)| k),
        );
        assert_eq!(b.open_runs(), a.open_runs(), "flush every {every}");
        assert_eq!(b.ended_runs(), a.ended_runs(), "flush every {every}");
        for (i, ev) in events.iter().enumerate().skip(cut) {
            let (mut x, mut y) = (Vec::new(), Vec::new());
            a.apply(ev, &mut x);
            b.apply(ev, &mut y);
            assert_eq!(x, y, "event {i} after a restore (flush every {every})");
        }
    }
}

/// Under `max_open_runs`, the run evicted is always the open run whose last event came longest
/// ago (in partition events), checked against a model kept here from the input alone.
#[test]
fn eviction_takes_the_least_recently_active_run() {
    use std::collections::BTreeMap;
    // Simulated runs overlap in time (the corpus's mostly follow each other).
    let args = eddy::simulate::SimulateArgs {
        runs: 300,
        loop_rate: 0.3,
        seed: 11,
        projects: 2,
        start_ms: 1_767_225_600_000,
        out: None,
        unfinished_rate: 0.2,
        ..Default::default()
    };
    let events: Vec<Event> = eddy::simulate::generate(&args)
        .into_iter()
        .map(|(_, _, l)| decode(l.as_bytes()).expect("simulator lines decode"))
        .collect();
    let cap = 20;
    let cfg = Arc::new(EngineConfig {
        max_open_runs: cap,
        ..EngineConfig::default()
    });
    let mut e = PartitionEngine::new(cfg);
    // run -> index of its last applied event, for runs the model believes open.
    let mut open: BTreeMap<eddy::contract::RunKey, usize> = BTreeMap::new();
    let mut evictions = 0;
    for (i, ev) in events.iter().enumerate() {
        let mut out = Vec::new();
        let outcome = e.apply(ev, &mut out);
        for o in &out {
            if let OutputEvent::RunTerminated(t) = o {
                let k = eddy::contract::RunKey {
                    project_id: t.project_id.clone(),
                    run_id: t.run_id.clone(),
                };
                if t.termination_reason == "evicted" {
                    let oldest = open
                        .iter()
                        .filter(|(r, _)| **r != *ev.key())
                        .min_by_key(|(_, at)| **at)
                        .map(|(r, _)| r.clone());
                    assert_eq!(Some(&k), oldest.as_ref(), "event {i}");
                    evictions += 1;
                }
                open.remove(&k);
            }
        }
        let ended = out.iter().any(|o| {
            matches!(o, OutputEvent::RunTerminated(t) if t.run_id == ev.key().run_id && t.project_id == ev.key().project_id)
        });
        if !ended && !matches!(outcome, eddy::engine::Outcome::AfterEnd) {
            open.insert(ev.key().clone(), i);
        }
        assert!(e.open_runs() <= cap);
    }
    assert!(
        evictions > 10,
        "the corpus must make the cap evict ({evictions})"
    );
}

/// Under an idle timeout, each event ends exactly the open runs whose latest event time fell
/// more than the timeout behind the partition's watermark, earliest first (ties by key),
/// checked against a model kept here from the input alone.
#[test]
fn idle_timeout_ends_exactly_the_runs_behind_the_watermark_in_order() {
    use std::collections::BTreeMap;
    let args = eddy::simulate::SimulateArgs {
        runs: 300,
        loop_rate: 0.3,
        seed: 12,
        projects: 2,
        start_ms: 1_767_225_600_000,
        out: None,
        unfinished_rate: 0.3,
        ..Default::default()
    };
    let events: Vec<Event> = eddy::simulate::generate(&args)
        .into_iter()
        .map(|(_, _, l)| decode(l.as_bytes()).expect("simulator lines decode"))
        .collect();
    let timeout = 2_000;
    let cfg = Arc::new(EngineConfig {
        idle_timeout_ms: timeout,
        max_open_runs: 0,
        ..EngineConfig::default()
    });
    let mut e = PartitionEngine::new(cfg);
    // run -> its latest event time, for runs the model believes open.
    let mut open: BTreeMap<eddy::contract::RunKey, i64> = BTreeMap::new();
    let mut expiries = 0;
    for (i, ev) in events.iter().enumerate() {
        let mut out = Vec::new();
        let outcome = e.apply(ev, &mut out);
        if !matches!(outcome, eddy::engine::Outcome::AfterEnd) {
            let t = open.entry(ev.key().clone()).or_insert(ev.ts_ms());
            *t = (*t).max(ev.ts_ms());
        }
        let wm = e.watermark_ms().expect("an event sets the watermark");
        let mut want: Vec<(i64, eddy::contract::RunKey)> = open
            .iter()
            .filter(|(_, t)| t.saturating_add(timeout) < wm)
            .map(|(k, t)| (*t, k.clone()))
            .collect();
        want.sort();
        let mut got = Vec::new();
        for o in &out {
            if let OutputEvent::RunTerminated(t) = o {
                let k = eddy::contract::RunKey {
                    project_id: t.project_id.clone(),
                    run_id: t.run_id.clone(),
                };
                if t.termination_reason == "timeout" {
                    got.push(k.clone());
                }
                open.remove(&k);
            }
        }
        let want: Vec<_> = want.into_iter().map(|(_, k)| k).collect();
        assert_eq!(got, want, "event {i}");
        expiries += got.len();
    }
    assert!(
        expiries > 30,
        "the corpus must make runs time out ({expiries})"
    );
}
