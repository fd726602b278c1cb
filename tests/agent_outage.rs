//! A Python agent's guard rides out a broker restart: it was consuming the signals topic when the
//! broker went down, and the stop for a loop that starts after the broker is back still reaches
//! it, once.
//!
//! Restarts the broker through `scripts/stack` (as tests/outage.rs does), so it is a test binary
//! of its own: no other test of the binary may run meanwhile.
mod common;

use common::python_agent::{require_eddy_agent, Agent};
use common::*;
use std::process::Command;
use std::time::Duration;

fn restart_kafka() {
    let root = env!("CARGO_MANIFEST_DIR");
    let ok = Command::new(format!("{root}/scripts/stack"))
        .arg("restart-kafka")
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "`scripts/stack restart-kafka` failed: this test needs the servers started by scripts/stack"
    );
}

/// Until the worker's `/readyz` answers 200, or panics after `timeout`.
fn await_ready(admin: &str, timeout: Duration) {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let answer = common::http_get(admin, "/readyz");
        if answer.as_ref().is_some_and(|(status, _)| *status == 200) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the worker was not ready within {timeout:?}: {answer:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guard_rides_out_a_broker_restart() {
    require_eddy_agent();
    let ep = endpoints().await;
    let cfg = test_config(&ep, "agentpy_restart");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let admin = free_addr();
    let _worker = spawn_worker(&cfg, &[("EDDY_ADMIN_ADDR", admin.clone())]);
    let mut agent = Agent::spawn(&cfg, "restart", &["--max-steps", "300"]);
    // The guard has its partitions and the worker is past its start-up (topics, migrations,
    // assignment, restore): the broker goes away under both and comes back. A worker that
    // cannot reach Kafka while it starts exits for its orchestrator to restart it, which is
    // not what this test is about.
    agent.wait_for("waiting", Duration::from_secs(60));
    await_ready(&admin, Duration::from_secs(60));
    restart_kafka();
    agent.say("go");
    let report = agent.wait_for("report", Duration::from_secs(180));
    eprintln!("{report}");
    assert_eq!(
        report["stopped"], true,
        "the loop was never stopped: {report}"
    );
    assert_eq!(report["raised"], 1, "LoopDetected raised once: {report}");
    assert_eq!(report["on_stop_calls"], 1, "on_stop called once: {report}");
    assert_eq!(report["severity"], "stop", "{report}");
    let tool_calls = report["tool_calls"].as_u64().expect("tool_calls");
    assert!(
        tool_calls < 300,
        "stopped before running out of steps: {report}"
    );
}
