//! The Python package's in-process guard against a real `eddy run`: an agent on `Local` with an
//! Emitter as its tee is stopped in process, and the worker, fed the teed events, gives the same
//! signals and the same end of the run (the Node package's is tests/agent_node.rs).
//!
//! The agent is tests/agent_local.py; scripts/bootstrap builds the wheel from the checkout.
mod common;

use common::python_agent::require_eddy_agent;
use common::*;
use eddy::contract::OutputEvent;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn a_python_agent_on_a_local_guard_gets_the_workers_verdicts_before_the_worker() {
    require_eddy_agent();
    let ep = endpoints().await;
    let cfg = test_config(&ep, "agentpy_local");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let _worker = spawn_worker(&cfg, &[]);
    let out = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/agent_local.py"))
        .args(["--brokers", &cfg.kafka.brokers])
        .args(["--steps-topic", &cfg.kafka.topics.input])
        .args(["--run", "py-local-1"])
        .output()
        .expect("run python3 tests/agent_local.py");
    assert!(
        out.status.success(),
        "the agent failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    let local = report["signals"].as_array().expect("signals");
    assert!(
        local.last().is_some_and(|s| s["severity"] == "stop"),
        "the Local stopped the run: {report}"
    );
    let recs = read_topic_until(
        &cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(120),
        None,
        |r| {
            outputs(r)
                .iter()
                .any(|o| o.run_id() == "py-local-1" && matches!(o, OutputEvent::RunTerminated(_)))
        },
    );
    let worker: Vec<Value> = outputs(&recs)
        .iter()
        .filter(|o| o.run_id() == "py-local-1")
        .map(|o| serde_json::to_value(o).expect("json"))
        .collect();
    let (ended, signals): (Vec<Value>, Vec<Value>) = worker
        .into_iter()
        .partition(|o| o["kind"] == "run_terminated");
    assert_eq!(&signals, local, "the worker's signals are the Local's");
    assert_eq!(
        ended,
        vec![report["terminated"].clone()],
        "the same end of the run"
    );
}
