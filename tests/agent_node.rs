//! The Node package (clients/typescript, `eddy-agent`) against a real `eddy run`: an agent on its
//! Emitter and fleet Guard is stopped once the worker's verdict arrives; an agent on its Local
//! with a tee is stopped in process, and the worker, fed the teed events, gives the same signals
//! and the same end of the run: the in-process guard and the fleet agree.
//!
//! The agents are tests/agent_node.js; scripts/bootstrap builds the package from the checkout.
mod common;

use common::*;
use eddy::config::Config;
use eddy::contract::OutputEvent;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn agent(cfg: &Config, scenario: &str, run: &str) -> Value {
    let pkg = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/typescript");
    assert!(
        pkg.join("dist/src/index.js").exists() && pkg.join("eddy-agent.linux-x64-gnu.node").exists(),
        "clients/typescript is not built: run scripts/bootstrap, or `npm ci && npm run build` there"
    );
    let mut child = Command::new("node")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agent_node.js"))
        .args(["--brokers", &cfg.kafka.brokers])
        .args(["--steps-topic", &cfg.kafka.topics.input])
        .args(["--signals-topic", &cfg.kafka.topics.output])
        .args(["--run", run, "--scenario", scenario])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node tests/agent_node.js (Node.js 20 or later)");
    // The agent bounds its own loop; a hang anywhere else fails the test with what it printed.
    let deadline = Instant::now() + Duration::from_secs(180);
    while child.try_wait().expect("wait node").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("node output");
    assert!(
        out.status.success(),
        "the node agent failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    report
}

/// `v` with every number as a float: JavaScript's JSON has one number type, so `0.0` comes back
/// from the Node agent as `0`.
fn numbers_as_floats(v: &Value) -> Value {
    match v {
        Value::Number(n) => n.as_f64().map_or(Value::Null, |f| serde_json::json!(f)),
        Value::Array(a) => Value::Array(a.iter().map(numbers_as_floats).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), numbers_as_floats(v)))
                .collect(),
        ),
        v => v.clone(),
    }
}

/// The worker's output events for `run`, once its run_terminated is there.
fn worker_outputs(cfg: &Config, run: &str) -> Vec<OutputEvent> {
    let recs = read_topic_until(
        cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(120),
        None,
        |r| {
            outputs(r)
                .iter()
                .any(|o| o.run_id() == run && matches!(o, OutputEvent::RunTerminated(_)))
        },
    );
    outputs(&recs)
        .into_iter()
        .filter(|o| o.run_id() == run)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_agent_on_the_fleet_guard_is_stopped_by_the_workers_verdict() {
    let ep = endpoints().await;
    let cfg = test_config(&ep, "agentnode_fleet");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let _worker = spawn_worker(&cfg, &[]);
    let report = agent(&cfg, "fleet", "node-fleet-1");
    assert_eq!(report["stopped"], true, "{report}");
    let calls = report["tool_calls"].as_u64().expect("tool_calls");
    assert!(calls < 400, "{report}");
    let stop = &report["signal"];
    assert_eq!(stop["severity"], "stop");
    // The stop the agent raised is the worker's, about a step the agent had taken.
    assert!(stop["step_index"].as_u64().expect("step_index") <= calls);
    let mine = worker_outputs(&cfg, "node-fleet-1");
    assert!(mine
        .iter()
        .any(|o| o.event_id() == stop["event_id"].as_str().expect("event_id")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_agent_on_a_local_guard_gets_the_workers_verdicts_before_the_worker() {
    let ep = endpoints().await;
    let cfg = test_config(&ep, "agentnode_tee");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let _worker = spawn_worker(&cfg, &[]);
    let report = agent(&cfg, "tee", "node-tee-1");
    let local = report["signals"].as_array().expect("signals");
    assert!(
        local.last().is_some_and(|s| s["severity"] == "stop"),
        "the Local stopped the run: {report}"
    );
    let worker = worker_outputs(&cfg, "node-tee-1");
    let to_value = |o: &OutputEvent| numbers_as_floats(&serde_json::to_value(o).expect("json"));
    let local = &numbers_as_floats(&Value::Array(local.clone()));
    let signals: Vec<Value> = worker
        .iter()
        .filter(|o| !matches!(o, OutputEvent::RunTerminated(_)))
        .map(to_value)
        .collect();
    assert_eq!(
        &Value::Array(signals),
        local,
        "the worker's signals are the Local's"
    );
    let ended = worker
        .iter()
        .find(|o| matches!(o, OutputEvent::RunTerminated(_)))
        .map(to_value)
        .expect("run_terminated");
    assert_eq!(
        ended,
        numbers_as_floats(&report["terminated"]),
        "the same end of the run"
    );
}
