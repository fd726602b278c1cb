//! The binary's edges: `config check` and `replay`'s contract (stdout carries only output
//! events; malformed lines are reported on stderr and skipped; unreadable input fails).
use std::io::Write;
use std::process::{Command, Stdio};

fn eddy() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_eddy"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    c
}

#[test]
fn config_check_masks_secrets_and_names_bad_settings() {
    let out = eddy()
        .args(["config", "check", "--group-id", "from-flag"])
        .env("EDDY_CLICKHOUSE_PASSWORD", "hunter2")
        .env("EDDY_KAFKA_CONSUMER__SASL_PASSWORD", "kafka-secret")
        .env("EDDY_SERVICE_HOST", "10.0.0.1")
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        !shown.contains("hunter2") && !shown.contains("kafka-secret"),
        "{shown}"
    );
    let v: serde_json::Value = serde_json::from_str(&shown).expect("JSON");
    assert_eq!(v["group_id"], "from-flag");
    assert_eq!(v["clickhouse_password"], "***");

    let bad = eddy()
        .args(["config", "check"])
        .env("EDDY_TOPIC_PARTITIONS", "0")
        .output()
        .expect("run");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("topic_partitions"));
}

#[test]
fn replay_skips_malformed_lines_and_keeps_stdout_clean() {
    let input = concat!(
        r#"{"v":1,"kind":"run_started","project_id":"p","run_id":"r","ts":1767225600000,"agent_name":"a"}"#,
        "\n",
        "this is not json\n",
        r#"{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":1767225601000,"status":"completed"}"#,
        "\n",
    );
    let mut child = eddy()
        .args(["replay", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("stdout is JSONL only"))
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["kind"], "run_terminated");
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2"));

    let missing = eddy()
        .args(["replay", "/nonexistent/trace.jsonl"])
        .output()
        .expect("run");
    assert!(!missing.status.success(), "unreadable input is an error");
}

/// fleet-watch's destinations from the environment alone: `config check` shows them by name
/// and kind, their hosts, never a secret (a Slack URL's path is one).
#[test]
fn config_check_masks_destination_secrets() {
    let d = "EDDY_FLEET__NOTIFY__DESTINATIONS__";
    let out = eddy()
        .args(["config", "check"])
        .env(format!("{d}ONCALL__KIND"), "pagerduty")
        .env(format!("{d}ONCALL__ROUTING_KEY"), "00ROUTINGSECRET")
        .env(format!("{d}TEAM__KIND"), "slack")
        .env(
            format!("{d}TEAM__URL"),
            "https://hooks.slack.com/services/T0/B0/SLACKSECRET",
        )
        .output()
        .expect("run");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&shown).expect("JSON");
    let dest = &v["fleet"]["notify"]["destinations"];
    assert_eq!(dest["oncall"]["kind"], "pagerduty");
    assert_eq!(dest["oncall"]["routing_key"], "***");
    assert_eq!(dest["team"]["url"], "https://hooks.slack.com/***");
    for secret in ["ROUTINGSECRET", "SLACKSECRET", "T0/B0"] {
        assert!(!shown.contains(secret), "{secret}: {shown}");
    }
    // A destination that cannot work is refused, by name.
    let bad = eddy()
        .args(["config", "check"])
        .env(format!("{d}HOOK__KIND"), "webhook")
        .env(format!("{d}HOOK__URL"), "https://h.example/x")
        .env(format!("{d}HOOK__SECRET"), "short")
        .output()
        .expect("run");
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("fleet.notify.destinations.hook (webhook): secret") && !err.contains("short"),
        "{err}"
    );
}
