//! A simulated fleet for `eddy fleet-watch`'s tests: steady agents, and a new version that
//! loops more, through `eddy run` into ClickHouse; and fleet-watch run as a process.
use super::*;
use eddy::config::Config;
use eddy::fleet::FleetAlert;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const T0: u32 = 1_767_225_600; // 2026-01-01T00:00:00Z
pub const H: u32 = 3600;
pub const PROJECT: &str = "proj-0";

/// `runs` runs of `agent` starting in the first minutes of hour `hour`.
pub fn batch(
    hour: u32,
    agent: &str,
    runs: usize,
    loop_rate: f64,
    seed: u64,
) -> Vec<(String, String)> {
    let sim = eddy::simulate::SimulateArgs {
        runs,
        loop_rate,
        seed,
        projects: 1,
        start_ms: i64::from(T0 + hour * H) * 1000,
        agent: Some(agent.into()),
        ..Default::default()
    };
    eddy::simulate::generate(&sim)
        .into_iter()
        .map(|(_, k, l)| (k, l))
        .collect()
}

/// Hours 0–6 of a fleet of two agents at a steady loop rate, plus the first minutes of hour 7
/// so that hour 6 closes; with `regress`, version 2 of `coder` joins in hour 6 and loops 8×
/// as often.
pub fn fleet(regress: bool) -> (Vec<(String, String)>, usize) {
    let mut lines = Vec::new();
    let mut seed = 100;
    let mut add = |lines: &mut Vec<(String, String)>, h, agent: &str, n, rate| {
        seed += 1;
        lines.extend(batch(h, agent, n, rate, seed));
        n
    };
    let mut runs = 0;
    for h in 0..7 {
        runs += add(&mut lines, h, "coder@1", 40, 0.1);
        runs += add(&mut lines, h, "reviewer", 40, 0.1);
    }
    if regress {
        runs += add(&mut lines, 6, "coder@2", 40, 0.8);
    }
    runs += add(&mut lines, 7, "coder@1", 10, 0.1);
    runs += add(&mut lines, 7, "reviewer", 10, 0.1);
    (lines, runs)
}

pub fn fleet_env(cfg: &Config, tag: &str) -> Vec<(String, String)> {
    vec![
        ("EDDY_KAFKA_BROKERS".into(), cfg.kafka.brokers.clone()),
        ("EDDY_CLICKHOUSE_URL".into(), cfg.clickhouse.url.clone()),
        (
            "EDDY_CLICKHOUSE_DATABASE".into(),
            cfg.clickhouse.database.clone(),
        ),
        ("EDDY_INPUT_TOPIC".into(), cfg.kafka.topics.input.clone()),
        ("EDDY_OUTPUT_TOPIC".into(), cfg.kafka.topics.output.clone()),
        ("EDDY_DLQ_TOPIC".into(), cfg.kafka.topics.dlq.clone()),
        ("EDDY_FLEET__ALERT_TOPIC".into(), alert_topic(cfg, tag)),
        (
            "EDDY_FLEET__STATE_TOPIC".into(),
            format!("{}.state", alert_topic(cfg, tag)),
        ),
        (
            "EDDY_FLEET__TRANSACTIONAL_ID".into(),
            format!("{}.txn", alert_topic(cfg, tag)),
        ),
        ("EDDY_FLEET__BACKFILL_WINDOWS".into(), "9".into()),
        ("EDDY_FLEET__SETTLE_SECONDS".into(), "300".into()),
        // The simulator's steps cost fractions of a cent: a rise of half a cent per run is
        // what a loop-heavy version adds there.
        ("EDDY_FLEET__LOOP_COST_MIN_RISE_USD".into(), "0.005".into()),
        ("EDDY_FLEET__INTERVAL_MS".into(), "300".into()),
        ("EDDY_LOG".into(), "warn,eddy=info".into()),
    ]
}

pub fn alert_topic(cfg: &Config, tag: &str) -> String {
    format!("{}.fleet{tag}", cfg.kafka.topics.output)
}

pub fn fleet_watch(cfg: &Config, tag: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_eddy"));
    cmd.arg("fleet-watch")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(fleet_env(cfg, tag))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// The daemon, serving its admin endpoints on a fresh address (returned); killed by its guard
/// if the test fails first.
pub fn spawn_daemon(cfg: &Config) -> (Worker, String) {
    spawn_daemon_with(cfg, &[])
}

/// [`spawn_daemon`] with more environment (destinations).
pub fn spawn_daemon_with(cfg: &Config, extra: &[(String, String)]) -> (Worker, String) {
    let admin = free_addr();
    let child = fleet_watch(cfg, "", &[])
        .envs(extra.iter().cloned())
        .env("EDDY_FLEET__ADMIN_ADDR", &admin)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn");
    (Worker(child), admin)
}

/// `eddy fleet-watch --once`; returns its summary line.
pub fn once(cfg: &Config, tag: &str) -> String {
    once_with(cfg, tag, &[])
}

/// [`once`] with more environment (destinations).
pub fn once_with(cfg: &Config, tag: &str, extra: &[(String, String)]) -> String {
    let out = fleet_watch(cfg, tag, &["--once"])
        .envs(extra.iter().cloned())
        .output()
        .expect("run fleet-watch");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "fleet-watch --once failed:\n{err}");
    err.lines()
        .find(|l| l.starts_with("fleet-watch:"))
        .unwrap_or_default()
        .to_string()
}

/// Every committed record of `topic`, read to its end (`read_committed`); none if it does not
/// exist yet.
pub fn read_all(cfg: &Config, topic: &str) -> Vec<Vec<u8>> {
    let (c, mut open) = topic_reader(cfg, topic, &[("enable.partition.eof", "true")]);
    let start = Instant::now();
    let mut out = Vec::new();
    while open > 0 {
        assert!(start.elapsed() < Duration::from_secs(60), "reading {topic}");
        match c.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => out.extend(m.payload().map(<[u8]>::to_vec)),
            Some(Err(KafkaError::PartitionEOF(_))) => open -= 1,
            _ => {}
        }
    }
    out
}

pub fn alerts(cfg: &Config, tag: &str) -> Vec<Vec<u8>> {
    read_all(cfg, &alert_topic(cfg, tag))
}

/// The `fleet_alert` events among `raw` (the alert topic also carries their resolutions).
pub fn decode(raw: &[Vec<u8>]) -> Vec<FleetAlert> {
    let mut v: Vec<FleetAlert> = raw
        .iter()
        .filter(|p| kind(p) == "fleet_alert")
        .map(|p| serde_json::from_slice(p).expect("a fleet_alert"))
        .collect();
    v.sort_by(|a, b| a.event_id.cmp(&b.event_id));
    v
}

pub fn kind(payload: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(payload).expect("JSON");
    v["kind"].as_str().unwrap_or_default().to_string()
}

pub async fn run_fleet(cfg: &Config, regress: bool) {
    let (lines, runs) = fleet(regress);
    let _worker = spawn_worker(cfg, &[]);
    produce(cfg, &lines).await;
    let got = await_ch_count(
        cfg,
        &format!("SELECT count() FROM {{db}}.runs FINAL WHERE project_id = '{PROJECT}'"),
        runs as u64,
        Duration::from_secs(180),
    )
    .await;
    assert_eq!(got, runs as u64, "every run reached ClickHouse");
}
