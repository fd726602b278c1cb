//! Records round-trip for every state the engine leaves; the JSON versions still restore.
use super::*;
use crate::contract::decode;
use crate::engine::{EngineConfig, PartitionEngine};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Open runs as an engine with rollups leaves them: each run's events but its
/// `run_finished`, the first `max` runs of the file.
fn open_runs(events: &str, max: usize) -> Vec<(RunKey, RunState)> {
    open_runs_of(events, max, true)
}

fn open_runs_of(events: &str, max: usize, rollups: bool) -> Vec<(RunKey, RunState)> {
    let mut e = PartitionEngine::new(Arc::new(EngineConfig {
        idle_timeout_ms: 0,
        ..EngineConfig::default()
    }));
    if rollups {
        e = e.with_rollups();
    }
    let mut out = Vec::new();
    let mut runs = BTreeSet::new();
    for line in events.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        if v["kind"] == "run_finished" {
            continue;
        }
        let run = v["run_id"].as_str().unwrap_or_default().to_string();
        if !runs.contains(&run) {
            if runs.len() >= max {
                continue;
            }
            runs.insert(run);
        }
        if let Ok(ev) = decode(line.as_bytes()) {
            e.apply(&ev, &mut out);
            out.clear();
        }
    }
    e.runs().map(|(k, s)| (k, s.clone())).collect()
}

fn corpus() -> &'static str {
    include_str!("../../tests/corpus/events.jsonl")
}

fn assert_round_trips(runs: &[(RunKey, RunState)]) {
    assert!(!runs.is_empty());
    for (k, s) in runs {
        let (key, v) = encode(&Change::Upsert(k.clone(), s), 7);
        assert_eq!(parse_run_key(&key).expect("key reads"), *k);
        let v = v.expect("a value");
        assert!(binary::is_binary(&v));
        let rec = decode_run(&v).unwrap_or_else(|e| panic!("{k:?}: {e}"));
        assert_eq!(rec.offset, Some(7));
        let back = rec.state.expect("open run");
        assert_eq!(&back, s, "{k:?}");
        // Read back, the state writes the same bytes again.
        let (_, again) = encode(&Change::Upsert(k.clone(), &back), 7);
        assert_eq!(again.expect("a value"), v, "{k:?}");
    }
}

#[test]
fn corpus_states_round_trip() {
    assert_round_trips(&open_runs(corpus(), usize::MAX));
    assert_round_trips(&open_runs(
        include_str!("../../tests/corpus_heldout/events.jsonl"),
        usize::MAX,
    ));
}

#[test]
fn simulated_states_round_trip() {
    let sim = crate::simulate::SimulateArgs {
        runs: 600,
        seed: 11,
        unfinished_rate: 1.0,
        ..Default::default()
    };
    let events: String = crate::simulate::generate(&sim)
        .into_iter()
        .map(|(_, _, line)| line + "\n")
        .collect();
    assert_round_trips(&open_runs(&events, usize::MAX));
    // Without rollups (as `replay` and the benches run the engine) a run has no open minute.
    assert_round_trips(&open_runs_of(&events, usize::MAX, false));
}

#[test]
fn ended_runs_and_tombstones() {
    let k = RunKey {
        project_id: "p".into(),
        run_id: "r".into(),
    };
    let (_, v) = encode(&Change::Ended(k.clone()), 3);
    let rec = decode_run(&v.expect("a marker")).expect("decodes");
    assert_eq!(
        rec,
        RunRecord {
            offset: Some(3),
            state: None
        }
    );
    assert_eq!(encode(&Change::Forget(k), 3).1, None);
}

/// Version 4 records (JSON, what the previous release wrote) of the corpus's first 30 runs,
/// cut before their end, restore to exactly the state this engine has for the same events.
#[test]
fn version_4_records_restore() {
    let fixture = include_str!("../../tests/fixtures/changelog_v4.jsonl");
    let live = written_by_version_5();
    assert_eq!(live.len(), 50);
    let (mut open, mut ended) = (0, 0);
    for line in fixture.lines() {
        let rec: serde_json::Value = serde_json::from_str(line).expect("fixture line");
        assert_eq!(rec["value"]["v"], 4);
        let key = parse_run_key(rec["key"].as_str().expect("key").as_bytes()).expect("key");
        let value = serde_json::to_vec(&rec["value"]).expect("JSON");
        let got = decode_run(&value).unwrap_or_else(|e| panic!("{key:?}: {e}"));
        match got.state {
            Some(s) => {
                assert_eq!(Some(&s), live.get(&key), "{key:?}");
                open += 1;
            }
            None => ended += 1,
        }
    }
    assert_eq!((open, ended), (30, 1));
}

/// Version 1 records (window entries as objects, full 32-bit MinHash signatures) still
/// restore, and the run goes on detecting as the one restored from its version 5 record does.
#[test]
fn version_1_records_restore() {
    let fixture = include_str!("../../tests/fixtures/changelog_v4.jsonl");
    let live = written_by_version_5();
    let mut converted = 0;
    for line in fixture.lines() {
        let rec: serde_json::Value = serde_json::from_str(line).expect("fixture line");
        let key = parse_run_key(rec["key"].as_str().expect("key").as_bytes()).expect("key");
        let mut v = rec["value"].clone();
        if v["state"].is_null() {
            continue;
        }
        v["v"] = 1.into();
        let det = &mut v["state"]["detectors"];
        let as_objects = |list: &mut serde_json::Value, names: &[&str]| {
            for item in list.as_array_mut().expect("a window").iter_mut() {
                let fields = item.as_array().expect("an array entry").clone();
                let obj: serde_json::Map<String, serde_json::Value> =
                    names.iter().map(|n| n.to_string()).zip(fields).collect();
                *item = obj.into();
            }
        };
        as_objects(
            &mut det["neardup"]["window"],
            &["step", "tool", "action", "kind", "result", "sig"],
        );
        as_objects(
            &mut det["repeat"]["window"],
            &["step", "primary", "output", "repeatable", "work"],
        );
        as_objects(
            &mut det["cycle"]["hist"],
            &["step", "action", "output", "repeatable"],
        );
        for call in det["neardup"]["window"].as_array_mut().expect("window") {
            if let Some(f) = call["sig"].get("f").and_then(|f| f.as_array()).cloned() {
                let hashes: Vec<u64> = f.iter().filter_map(|h| h.as_u64()).collect();
                let mut full = [0; crate::engine::text::MINHASH_K];
                crate::engine::text::minhash_into(&mut full, &hashes);
                call["sig"] = serde_json::json!(full.to_vec());
            }
        }
        let back = decode_run(&serde_json::to_vec(&v).expect("JSON"))
            .unwrap_or_else(|e| panic!("{key:?}: {e}"))
            .state
            .expect("open run");
        let want = &live[&key];
        assert_eq!(back.steps, want.steps);
        // Same findings from here on: both states see the same next steps.
        let next = |st: RunState| {
            let mut e = PartitionEngine::new(Arc::new(EngineConfig::default()));
            e.restore(Default::default(), [(key.clone(), st)], []);
            let mut out = Vec::new();
            for i in 0..4 {
                let step = want.steps + 1 + i;
                let line = format!(
                    r#"{{"v":1,"kind":"step","project_id":"{}","run_id":"{}","ts":{},"step_index":{step},"step_type":"tool_call","tool_name":"web_search","tool_input":{{"q":"async rust runtime tokio {}"}},"tool_output":[],"tool_success":true}}"#,
                    key.project_id,
                    key.run_id,
                    want.last_ts + 1000 * step as i64,
                    i % 2
                );
                e.apply(&decode(line.as_bytes()).expect("valid step"), &mut out);
            }
            serde_json::to_string(&out).expect("outputs")
        };
        assert_eq!(next(back), next(want.clone()), "{key:?}");
        converted += 1;
    }
    assert_eq!(converted, 30);
}

#[test]
fn newer_and_malformed_records_are_refused() {
    let (k, s) = open_runs(corpus(), 1).remove(0);
    let (_, v) = encode(&Change::Upsert(k, &s), 1);
    let mut v = v.expect("a value");
    v[1] = (VERSION + 1) as u8;
    assert!(matches!(decode_run(&v), Err(RecordError::Newer(6))));
    v[1] = VERSION as u8;
    let whole = v.clone();
    v.truncate(v.len() / 2);
    assert!(matches!(decode_run(&v), Err(RecordError::Binary(_))));
    let mut longer = whole;
    longer.push(0);
    assert!(matches!(decode_run(&longer), Err(RecordError::Binary(_))));
    assert!(matches!(
        decode_run(br#"{"v":9,"ended":true}"#),
        Err(RecordError::Newer(9))
    ));
    assert!(matches!(decode_run(b"{\"v\":"), Err(RecordError::Json(_))));
}

/// The bytes of a fixture line: its key and its value.
fn fixture_line(line: &str) -> (RunKey, Vec<u8>) {
    let (key, hex) = line.split_once('\t').expect("key, tab, value");
    let key = parse_run_key(key.as_bytes()).expect("key");
    let value: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    (key, value)
}

/// The states version 5 records held when `9a61d71` wrote them (`changelog_v5.tsv`): those of
/// the engine of the time, which the older fixtures were checked against. Detection has changed
/// since (issue 41: stop at the evidence), so today's engine builds other states from the same
/// events; what older records must do is restore to what was written.
fn written_by_version_5() -> std::collections::HashMap<RunKey, RunState> {
    include_str!("../../tests/fixtures/changelog_v5.tsv")
        .lines()
        .map(|line| {
            let (key, value) = fixture_line(line);
            let rec = decode_run(&value).unwrap_or_else(|e| panic!("{key:?}: {e}"));
            assert_eq!(rec.offset, Some(7));
            (key, rec.state.expect("open run"))
        })
        .collect()
}

/// Version 5 records as `9a61d71` wrote them, before thoughts had a target (issue 41), still
/// restore: to the states the version 4 records of the same runs hold, with no target on any
/// thought; and each restored state writes today's shape, which reads back the same.
#[test]
fn version_5_records_before_thought_targets_restore() {
    let old = written_by_version_5();
    assert_eq!(old.len(), 50);
    let v4: std::collections::HashMap<RunKey, RunState> =
        include_str!("../../tests/fixtures/changelog_v4.jsonl")
            .lines()
            .filter_map(|line| {
                let rec: serde_json::Value = serde_json::from_str(line).expect("fixture line");
                let key = parse_run_key(rec["key"].as_str().expect("key").as_bytes()).expect("key");
                let value = serde_json::to_vec(&rec["value"]).expect("JSON");
                let state = decode_run(&value).expect("a v4 record").state?;
                Some((key, state))
            })
            .collect();
    assert_eq!(v4.len(), 30);
    let mut thoughts = 0;
    for (key, state) in &old {
        if let Some(s) = v4.get(key) {
            assert_eq!(s, state, "{key:?}");
        }
        if let Some(c) = state.detectors.content.get() {
            assert!(c.thoughts.iter().all(|t| t.target == 0), "{key:?}");
            thoughts += c.thoughts.len();
        }
        let (_, bytes) = encode(&Change::Upsert(key.clone(), state), 7);
        let back = decode_run(&bytes.expect("a value")).expect("today's record");
        assert_eq!(back.state.as_ref(), Some(state), "{key:?}");
    }
    assert!(thoughts > 0);
}

/// Version 5 records as this engine writes them (thoughts with their target, since issue 41),
/// of the corpus's first 30 runs (with rollups) and the held-out corpus's first 20 (without),
/// each cut before its end. Each decodes to the state this engine builds from the same events,
/// and that state encodes to exactly these bytes: a change to any persisted type's shape fails
/// here rather than in a rolling upgrade (and so does a change of what the detectors remember
/// of these runs: then write this fixture again, and keep the old one restoring).
#[test]
fn version_5_records_are_frozen() {
    let fixture = include_str!("../../tests/fixtures/changelog_v5_issue41.tsv");
    let live: std::collections::HashMap<RunKey, RunState> = open_runs(corpus(), 30)
        .into_iter()
        .chain(open_runs_of(
            include_str!("../../tests/corpus_heldout/events.jsonl"),
            20,
            false,
        ))
        .collect();
    assert_eq!(live.len(), 50);
    let mut checked = 0;
    for line in fixture.lines() {
        let (key, value) = fixture_line(line);
        let want = live.get(&key).unwrap_or_else(|| panic!("{key:?} is live"));
        let rec = decode_run(&value).unwrap_or_else(|e| panic!("{key:?}: {e}"));
        assert_eq!(rec.offset, Some(7));
        assert_eq!(rec.state.as_ref(), Some(want), "{key:?}");
        let (_, again) = encode(&Change::Upsert(key.clone(), want), 7);
        assert!(
            again.as_deref() == Some(&value[..]),
            "{key:?} encodes differently"
        );
        checked += 1;
    }
    assert_eq!(checked, 50);
}

/// A steered run writes its steering after the open minute (written even when absent, so the
/// binary array stays aligned) and reads it back; runs never steered keep the frozen shape
/// above.
#[test]
fn steered_runs_round_trip_with_and_without_an_open_minute() {
    for rollups in [true, false] {
        let mut runs = open_runs_of(corpus(), 6, rollups);
        assert_eq!(
            runs.iter().any(|(_, s)| s.minute.is_some()),
            rollups,
            "the open minute is there exactly with rollups"
        );
        for (i, (_, s)) in runs.iter_mut().enumerate() {
            let before = s.clone();
            s.steered(40 + i as u64);
            s.steered(50);
            if i % 2 == 0 {
                // A later alert: the run looped again after it was steered.
                s.caught(60, 1);
            }
            assert_ne!(*s, before);
            assert_eq!(s.steered_step_index(), Some(40 + i as u64));
            assert_eq!(s.steers(), 2);
        }
        assert_round_trips(&runs);
        for (i, (k, s)) in runs.iter().enumerate() {
            let (_, v) = encode(&Change::Upsert(k.clone(), s), 7);
            let back = decode_run(&v.expect("a value")).expect("reads").state;
            let outcome = back.and_then(|b| b.steer_outcome());
            let want = if i % 2 == 0 {
                crate::contract::SteerOutcome::LoopedAgain
            } else {
                crate::contract::SteerOutcome::Recovered
            };
            assert_eq!(outcome, Some(want), "{k:?}");
        }
    }
}
