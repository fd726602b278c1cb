//! End to end on the real broker and ClickHouse: signals, rows, dead letters, and a kill -9.
mod common;

use common::*;
use eddy::contract::OutputEvent;
use eddy::replay::replay_to_vec;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

const T0: i64 = 1_767_225_600_000;

fn step(
    run: &str,
    i: u64,
    ts: i64,
    tool: &str,
    input: serde_json::Value,
    output: serde_json::Value,
) -> String {
    json!({"v":1,"kind":"step","project_id":"acme","run_id":run,"ts":ts,"step_index":i,
           "step_type":"tool_call","tool_name":tool,"tool_input":input,"tool_output":output,
           "tool_success":true,"tokens":100,"cost_usd":0.001,"agent":"researcher"})
    .to_string()
}

/// A looping run (the same search, the same empty answer, from step 3 on) and a healthy one.
fn two_runs() -> (Vec<(String, String)>, u64) {
    let mut v = Vec::new();
    let mut steps = 0;
    for run in ["loopy", "healthy"] {
        v.push((run.to_string(), json!({"v":1,"kind":"run_started","project_id":"acme","run_id":run,"ts":T0,"agent_name":"researcher"}).to_string()));
        for i in 1..=10u64 {
            let ts = T0 + i as i64 * 1000;
            let line = if run == "loopy" && i >= 3 {
                step(
                    run,
                    i,
                    ts,
                    "web_search",
                    json!({"q":"weather in Paris"}),
                    json!({"hits":[]}),
                )
            } else {
                step(
                    run,
                    i,
                    ts,
                    "read_file",
                    json!({"path": format!("src/f{i}.rs")}),
                    json!({"bytes": 100 + i}),
                )
            };
            v.push((run.to_string(), line));
            steps += 1;
        }
        v.push((run.to_string(), json!({"v":1,"kind":"run_finished","project_id":"acme","run_id":run,"ts":T0 + 20_000,"status":"completed"}).to_string()));
    }
    (v, steps)
}

fn by_id(events: &[OutputEvent]) -> BTreeMap<String, OutputEvent> {
    events
        .iter()
        .map(|e| (e.event_id().to_string(), e.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loops_and_healthy_runs_end_to_end() {
    let ep = endpoints().await;
    let cfg = test_config(&ep, "e2e");
    let (mut lines, steps) = two_runs();
    // One undecodable message in the middle: it must go to the dead-letter topic, not stop us.
    lines.insert(5, ("loopy".into(), "{not json".into()));
    produce(&cfg, &lines).await;
    let mut worker = spawn_worker(&cfg, &[]);

    let recs = read_topic_until(
        &cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(90),
        Some(&mut worker),
        |r| terminated_count(r) >= 2,
    );
    let got = outputs(&recs);

    // Exactly what the offline replay of the same events publishes.
    let input: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
    let (want, _) = replay_to_vec(
        input.as_bytes(),
        Arc::new(cfg.engine.clone()),
        cfg.kafka.topics.partitions as u32,
    );
    assert_eq!(by_id(&got), by_id(&want), "run and replay disagree");
    assert_eq!(got.len(), want.len(), "no duplicates in an undisturbed run");

    let term: HashMap<String, _> = got
        .iter()
        .filter_map(|o| match o {
            OutputEvent::RunTerminated(t) => Some((t.run_id.clone(), t.clone())),
            _ => None,
        })
        .collect();
    assert!(term["loopy"].loop_detected, "the looping run is caught");
    assert_eq!(
        term["loopy"].loop_step_index,
        Some(3),
        "repetition began at step 3"
    );
    assert!(
        !term["healthy"].loop_detected,
        "the healthy run stays quiet"
    );
    assert!(got
        .iter()
        .all(|o| !(matches!(o, OutputEvent::LoopDetected(s) if s.run_id == "healthy"))));
    assert_eq!(term["loopy"].totals.steps, 10);

    // ClickHouse holds every step, run and signal exactly once.
    let signals = got
        .iter()
        .filter(|o| !matches!(o, OutputEvent::RunTerminated(_)))
        .count() as u64;
    let t = Duration::from_secs(30);
    assert_eq!(
        await_ch_count(&cfg, "SELECT count() FROM {db}.steps FINAL", steps, t).await,
        steps
    );
    assert_eq!(
        await_ch_count(&cfg, "SELECT count() FROM {db}.runs FINAL", 2, t).await,
        2
    );
    assert_eq!(
        await_ch_count(&cfg, "SELECT count() FROM {db}.signals FINAL", signals, t).await,
        signals
    );
    assert_eq!(
        ch_count(
            &cfg,
            "SELECT toUInt64(sum(loop_detected)) FROM {db}.runs FINAL WHERE run_id = 'loopy'"
        )
        .await,
        1
    );
    assert_eq!(
        ch_count(
            &cfg,
            "SELECT toUInt64(sum(loop_detected)) FROM {db}.runs FINAL WHERE run_id = 'healthy'"
        )
        .await,
        0
    );

    // The bad message is in the dead-letter topic with its reason and origin.
    let dlq = read_topic_until(
        &cfg,
        &cfg.kafka.topics.dlq,
        Duration::from_secs(30),
        None,
        |r| !r.is_empty(),
    );
    assert_eq!(dlq.len(), 1);
    assert_eq!(dlq[0].headers["eddy.reason"], "invalid_json");
    assert_eq!(dlq[0].payload.as_deref(), Some(&b"{not json"[..]));
    assert_eq!(dlq[0].headers["eddy.source.topic"], cfg.kafka.topics.input);

    stop_gracefully(&mut worker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_stream_loses_nothing_and_doubles_nothing() {
    let ep = endpoints().await;
    let mut cfg = test_config(&ep, "kill9");
    cfg.worker.batch_max_messages = 500;
    let fleet = Fleet::new(&cfg, 1500, 11, 3);
    produce(&cfg, &fleet.lines).await;

    let mut worker = spawn_worker(&cfg, &[]);
    // Kill it hard once it is visibly mid-stream.
    read_topic_until(
        &cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(120),
        Some(&mut worker),
        |r| terminated_count(r) >= fleet.runs / 5,
    );
    kill_hard(&mut worker);
    let before = read_topic_until(
        &cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(5),
        None,
        |_| true,
    )
    .len();
    assert!(
        before < fleet.want.len(),
        "sanity: the worker was stopped mid-stream"
    );

    let mut worker = spawn_worker(&cfg, &[]);
    let got = read_all_expected(
        &cfg,
        &fleet.want,
        Duration::from_secs(180),
        Some(&mut worker),
    );
    let dupes = assert_exact_or_duplicate(&got, &fleet.want);
    eprintln!("kill -9: {} events, {} exact duplicates", got.len(), dupes);

    let t = Duration::from_secs(60);
    let q = |table: &str| format!("SELECT count() FROM {{db}}.{table} FINAL");
    assert_eq!(
        await_ch_count(&cfg, &q("steps"), fleet.steps, t).await,
        fleet.steps
    );
    let runs = fleet.runs as u64;
    assert_eq!(await_ch_count(&cfg, &q("runs"), runs, t).await, runs);
    assert_eq!(
        await_ch_count(&cfg, &q("signals"), fleet.signals(), t).await,
        fleet.signals()
    );
    stop_gracefully(&mut worker);
}
