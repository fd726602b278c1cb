//! A Python agent stopped through the HTTP bridge's project stream (`eddy_agent.HttpGuard`),
//! against the real stack: `eddy run` judges the steps the agent sends to Kafka, `eddy
//! ingest-http` reads the signals back and streams its project's to the guard. A cut connection
//! and a restarted bridge lose no stop; a guard on another project's key sees nothing.
//!
//! Needs python3 with eddy_agent installed (tests/agent_http_guard.py says how); never skips.
mod common;

use common::bridge::*;
use common::python_agent::{require_eddy_agent, Agent};
use common::*;
use eddy::contract::{OutputEvent, Severity};
use std::process::Command;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn a_looping_agent_is_stopped_over_the_bridge_stream_and_a_reconnect_loses_nothing() {
    require_eddy_agent();
    let ep = endpoints().await;
    let cfg = test_config(&ep, "httpguard");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let (key, project) = ("kw_http_guard_a", "proj-http-a");
    let (other_key, other_project) = ("kw_http_guard_b", "proj-http-b");
    let keys = [(key, project), (other_key, other_project)];
    let mut worker = spawn_worker(&cfg, &[]);
    let bridge = start_bridge(&cfg, &keys);
    let (addr, admin) = (bridge.addr.clone(), bridge.admin.clone());

    let mut cmd = Command::new("python3");
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/agent_http_guard.py"
    ))
    .args(["--brokers", &cfg.kafka.brokers])
    .args(["--steps-topic", &cfg.kafka.topics.input])
    .args(["--url", &format!("http://{addr}")])
    .args(["--key", key, "--project", project])
    .args(["--other-key", other_key, "--other-project", other_project]);
    let mut agent = Agent::spawn_command(cmd);
    agent.wait_for("ready", Duration::from_secs(60));

    // 1. Stopped over the stream.
    let stopped = agent.wait_for("stopped", Duration::from_secs(120));
    let signal = &stopped["signal"];
    assert_eq!(signal["severity"], "stop", "{stopped}");
    assert_eq!(signal["kind"], "loop_detected");
    assert_eq!(signal["project_id"], project);
    assert_eq!(signal["run_id"], stopped["run_id"]);
    assert!(
        signal["pattern"]
            .as_str()
            .is_some_and(|p| p.contains("web_search")),
        "{signal}"
    );
    let steps = stopped["steps"].as_u64().expect("steps");
    let caught = signal["step_index"].as_u64().expect("step_index");
    assert!(caught <= steps, "{caught} > {steps}");
    eprintln!(
        "run 1: stop at step {caught}, raised before call {}",
        steps + 1
    );

    // 2. A cut connection resumes from the bridge's journal: the stop published meanwhile
    // arrives without a resync.
    let cut = agent.wait_for("cut", Duration::from_secs(120));
    assert_eq!(cut["signal"]["run_id"], cut["run_id"], "{cut}");
    assert_eq!(cut["signal"]["severity"], "stop");
    assert_eq!(cut["resynced"], 0, "resumed from its last id: {cut}");

    // 3. The bridge restarts while a run's stop is published: a resync brings it.
    agent.wait_for("bridge_down?", Duration::from_secs(30));
    let log = bridge.stop();
    agent.say("down");
    let emitted = agent.wait_for("emitted", Duration::from_secs(60));
    let run3 = emitted["run_id"].as_str().expect("run id").to_string();
    read_topic_until(
        &cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(60),
        Some(&mut worker),
        |recs| {
            outputs(recs).iter().any(
                |o| matches!(o, OutputEvent::LoopDetected(s) if s.run_id == run3 && s.severity == Severity::Stop),
            )
        },
    );
    let bridge = start_bridge_on(&cfg, &keys, addr, admin);
    agent.say("restarted");
    let report = agent.wait_for("report", Duration::from_secs(90));
    assert_eq!(report["run_id"], run3.as_str());
    assert_eq!(report["signal"]["severity"], "stop", "{report}");
    let stats = &report["stats"];
    assert!(stats["connects"].as_u64() >= Some(3), "{stats}");
    assert!(stats["resyncs"].as_u64() >= Some(1), "{stats}");
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    assert_eq!(report["emitter_errors"], serde_json::json!([]), "{report}");
    // The other project's guard watched the same run id and was never sent project A's signal.
    assert!(report["other_verdict"].is_null(), "{report}");
    assert_eq!(report["other_stats"]["received"], 0, "{report}");
    assert_eq!(report["other_stats"]["updates"], 0, "{report}");
    assert!(stats["updates"].as_u64() >= Some(3), "{stats}");
    assert_eq!(report["other_stats"]["ignored"], 0, "{report}");
    let log2 = bridge.stop();
    assert!(
        !log.contains("panicked") && !log2.contains("panicked"),
        "{log}\n{log2}"
    );
}
