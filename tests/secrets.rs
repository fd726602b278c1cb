//! Secrets are never logged: a worker given a ClickHouse password and Kafka SASL credentials
//! (here: wrong ones, so it fails and logs its errors at debug level) must not print them, and
//! neither may `eddy config check`; nor the API keys and UI tokens they are given too.
mod common;

use common::*;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CH_SECRET: &str = "ch-SECRET-7x1";
const KAFKA_SECRET: &str = "kafka-SECRET-9q2";
const API_KEY: &str = "kw_APIKEYSECRET4d1";
const UI_TOKEN: &str = "ui-TOKEN-SECRET-83bd27";

fn command(cfg: &eddy::config::Config, file: &std::path::Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_eddy"));
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("EDDY_CONFIG", file)
        .env("EDDY_LOG", "debug")
        .env("EDDY_KAFKA_BROKERS", &cfg.kafka.brokers)
        .env("EDDY_CLICKHOUSE_URL", &cfg.clickhouse.url)
        .env("EDDY_CLICKHOUSE_DATABASE", &cfg.clickhouse.database)
        .env("EDDY_CLICKHOUSE_USER", "default")
        .env("EDDY_CLICKHOUSE_PASSWORD", CH_SECRET)
        .env("EDDY_INPUT_TOPIC", &cfg.kafka.topics.input)
        .env("EDDY_OUTPUT_TOPIC", &cfg.kafka.topics.output)
        .env("EDDY_DLQ_TOPIC", &cfg.kafka.topics.dlq)
        .env("EDDY_GROUP_ID", &cfg.kafka.group_id)
        .env("EDDY_TOPIC_PARTITIONS", "1")
        .env("EDDY_ADMIN_ADDR", "127.0.0.1:0")
        .env("EDDY_SHUTDOWN_GRACE_MS", "5000")
        .env("EDDY_INGEST_API_KEYS", format!("{API_KEY}=proj-visible"))
        .env("EDDY_UI_TOKENS", format!("{UI_TOKEN}=user-visible"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_the_logs() {
    let ep = endpoints().await;
    let cfg = test_config(&ep, "secrets");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("eddy.toml");
    // SASL settings on a plaintext listener are accepted by librdkafka and unused; the point is
    // that their values are never printed, whatever happens.
    std::fs::write(
        &file,
        format!(
            "[kafka_consumer]\n\"sasl.mechanisms\" = \"PLAIN\"\n\"sasl.username\" = \"eddy-user\"\n\"sasl.password\" = \"{KAFKA_SECRET}\"\n\
             [kafka_producer]\n\"sasl.mechanisms\" = \"PLAIN\"\n\"sasl.username\" = \"eddy-user\"\n\"sasl.password\" = \"{KAFKA_SECRET}\"\n"
        ),
    )
    .unwrap();

    let check = command(&cfg, &file, &["config", "check"])
        .output()
        .expect("config check");
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    for visible in ["eddy-user", "proj-visible", "user-visible"] {
        assert!(
            shown.contains(visible),
            "config check shows the settings ({visible}): {shown}"
        );
    }
    for secret in [CH_SECRET, KAFKA_SECRET, API_KEY, UI_TOKEN] {
        assert!(!shown.contains(secret), "{secret}: {shown}");
    }

    // The worker: ClickHouse rejects the password, so it logs errors (and retries or exits).
    let mut child = command(&cfg, &file, &["run"]).spawn().expect("spawn");
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(8) {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    std::thread::sleep(Duration::from_millis(500));
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    let mut out = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let all = format!("{out}{err}");
    assert!(!all.is_empty(), "the worker logged something");
    assert!(
        !all.contains(CH_SECRET),
        "ClickHouse password in the logs:\n{all}"
    );
    assert!(
        !all.contains(KAFKA_SECRET),
        "SASL password in the logs:\n{all}"
    );
    for secret in [API_KEY, UI_TOKEN] {
        assert!(!all.contains(secret), "{secret} in the logs:\n{all}");
    }
    eprintln!(
        "{} log bytes checked; last lines:\n{}",
        all.len(),
        all.lines().rev().take(3).collect::<Vec<_>>().join("\n")
    );
}
