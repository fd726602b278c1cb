//! `eddy fleet-watch` end to end on the real stack: a simulated fleet goes through `eddy run`
//! into ClickHouse's rollups; the evaluator reads them and publishes `fleet_alert` events.
//! (a) a new agent version that loops more is named, with baseline and current values equal to
//! what ClickHouse itself computes over the same tables; (b) a steady fleet raises none;
//! (c) a restart, or a second pass, publishes no second alert, and an evaluator starting from
//! nothing reproduces the same events byte for byte.
mod common;
use common::*;
use eddy::config::Config;
use eddy::fleet::{FleetAlert, Metric};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const T0: u32 = 1_767_225_600; // 2026-01-01T00:00:00Z
const H: u32 = 3600;
const PROJECT: &str = "proj-0";

/// `runs` runs of `agent` starting in the first minutes of hour `hour`.
fn batch(hour: u32, agent: &str, runs: usize, loop_rate: f64, seed: u64) -> Vec<(String, String)> {
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
fn fleet(regress: bool) -> (Vec<(String, String)>, usize) {
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

fn fleet_env(cfg: &Config, tag: &str) -> Vec<(String, String)> {
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

fn alert_topic(cfg: &Config, tag: &str) -> String {
    format!("{}.fleet{tag}", cfg.kafka.topics.output)
}

fn fleet_watch(cfg: &Config, tag: &str, args: &[&str]) -> Command {
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
fn spawn_daemon(cfg: &Config) -> (Worker, String) {
    let admin = free_addr();
    let child = fleet_watch(cfg, "", &[])
        .env("EDDY_FLEET__ADMIN_ADDR", &admin)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn");
    (Worker(child), admin)
}

/// `eddy fleet-watch --once`; returns its summary line.
fn once(cfg: &Config, tag: &str) -> String {
    let out = fleet_watch(cfg, tag, &["--once"])
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
fn read_all(cfg: &Config, topic: &str) -> Vec<Vec<u8>> {
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

fn alerts(cfg: &Config, tag: &str) -> Vec<Vec<u8>> {
    read_all(cfg, &alert_topic(cfg, tag))
}

/// The whole HTTP/1.0 response (status line, headers, body), or "" when nothing listens yet.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn decode(raw: &[Vec<u8>]) -> Vec<FleetAlert> {
    let mut v: Vec<FleetAlert> = raw
        .iter()
        .map(|p| serde_json::from_slice(p).expect("a fleet_alert"))
        .collect();
    v.sort_by(|a, b| a.event_id.cmp(&b.event_id));
    v
}

async fn run_fleet(cfg: &Config, regress: bool) {
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

#[derive(clickhouse::Row, serde::Deserialize, Debug)]
struct Truth {
    loops: u64,
    ended: u64,
    loop_cost: f64,
    active: u64,
}

/// The metric over `[from, to)` for agent names matching `names`, computed by ClickHouse.
async fn truth(cfg: &Config, names: &str, from: u32, to: u32, m: Metric) -> (f64, u64) {
    let sql = format!(
        "SELECT sum(loop_runs) AS loops, sum(runs_ended) AS ended, \
         sum(loop_cost_usd) AS loop_cost, uniqExact(run_id, toStartOfHour(bucket)) AS active \
         FROM {}.rollup_minute FINAL WHERE project_id = '{PROJECT}' AND ({names}) \
         AND bucket >= toDateTime({from}) AND bucket < toDateTime({to})",
        cfg.clickhouse.database
    );
    let t: Truth = clickhouse(cfg).query(&sql).fetch_one().await.expect(&sql);
    match m {
        Metric::LoopRate => (t.loops as f64 / t.ended as f64, t.ended),
        Metric::LoopCostPerRun => (t.loop_cost / t.active as f64, t.active),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_version_that_loops_more_is_named_once() {
    let ep = endpoints().await;
    let cfg = test_config(&ep, "fleet_regress");
    run_fleet(&cfg, true).await;

    // The daemon finds the closed windows on its own, says so on its admin server, and stops
    // gracefully once it alerted.
    let (mut daemon, admin) = spawn_daemon(&cfg);
    let start = Instant::now();
    let metrics = loop {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the daemon did not evaluate the 9 windows"
        );
        if let Ok(Some(s)) = daemon.try_wait() {
            panic!("fleet-watch exited ({s}) before evaluating");
        }
        let m = http_get(&admin, "/metrics");
        // Ready once a whole pass succeeded, which the last window's count precedes.
        if m.contains("eddy_fleet_windows_evaluated_total 9")
            && http_get(&admin, "/readyz").contains(" 200 OK")
        {
            break m;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(
        metrics.contains("eddy_fleet_alerts_total{metric=\"loop_rate\"} 1"),
        "{metrics}"
    );
    assert!(!alerts(&cfg, "").is_empty());
    let _ = Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status();
    let status = daemon.wait().expect("fleet-watch exits");
    assert!(status.success(), "graceful stop: {status}");
    // A restart finishes whatever windows are left, and repeats nothing.
    once(&cfg, "");
    let raw = alerts(&cfg, "");
    let got = decode(&raw);
    let ids: std::collections::BTreeSet<&str> = got.iter().map(|a| a.event_id.as_str()).collect();
    assert_eq!(ids.len(), got.len(), "no alert published twice: {got:#?}");

    // Only version 2 of coder, only in hour 6: its loop rate and its loop cost per run.
    let mut metrics: Vec<Metric> = got.iter().map(|a| a.metric).collect();
    metrics.sort();
    assert_eq!(
        metrics,
        vec![Metric::LoopRate, Metric::LoopCostPerRun],
        "{got:#?}"
    );
    for a in &got {
        assert_eq!(
            (
                a.project_id.as_str(),
                a.agent_name.as_str(),
                a.agent_version.as_deref()
            ),
            (PROJECT, "coder", Some("2")),
            "{a:#?}"
        );
        assert_eq!(a.window_start, "2026-01-01T06:00:00Z");
        assert_eq!(a.window_end, "2026-01-01T07:00:00Z");
        assert_eq!(a.baseline_start, "2026-01-01T00:00:00Z");
        // Baseline: coder, all versions, hours 0–5; current: coder@2 in hour 6.
        let (bv, bn) = truth(&cfg, "agent_name LIKE 'coder@%'", T0, T0 + 6 * H, a.metric).await;
        let (cv, cn) = truth(
            &cfg,
            "agent_name = 'coder@2'",
            T0 + 6 * H,
            T0 + 7 * H,
            a.metric,
        )
        .await;
        assert_eq!((a.baseline.runs, a.current.runs), (bn, cn), "{a:#?}");
        assert!((a.baseline.value - bv).abs() < 1e-6, "{a:#?} vs {bv}");
        assert!((a.current.value - cv).abs() < 1e-6, "{a:#?} vs {cv}");
        assert!(a.current.value >= 2.0 * a.baseline.value);
        assert!(!a.example_run_ids.is_empty());
        for run in &a.example_run_ids {
            let n = ch_count(
                &cfg,
                &format!(
                    "SELECT count() FROM {{db}}.runs FINAL WHERE run_id = '{run}' \
                     AND agent_name = 'coder@2' AND loop_detected = 1"
                ),
            )
            .await;
            assert_eq!(n, 1, "example run {run} is a looping run of coder@2");
        }
    }

    // Another pass has nothing left to do.
    assert_eq!(once(&cfg, ""), "fleet-watch: 0 windows evaluated, 0 alerts");
    assert_eq!(alerts(&cfg, "").len(), raw.len());

    // An evaluator with no progress of its own (another state topic) re-derives the same
    // events, byte for byte.
    once(&cfg, ".again");
    let again = alerts(&cfg, ".again");
    let mut a1 = raw.clone();
    let mut a2 = again.clone();
    a1.sort();
    a2.sort();
    assert_eq!(a1, a2, "re-evaluation reproduces identical events");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_steady_fleet_raises_no_alert_and_one_instance_publishes() {
    let ep = endpoints().await;
    let cfg = test_config(&ep, "fleet_steady");
    run_fleet(&cfg, false).await;
    let summary = once(&cfg, "");
    // Windows up to hour 6 were judged (the backfill reaches back before the fleet began).
    assert_eq!(summary, "fleet-watch: 9 windows evaluated, 0 alerts");
    assert_eq!(alerts(&cfg, "").len(), 0);

    // One instance publishes: a daemon (A) is fenced by a later start with the same
    // transactional id (B), so when hour 7 closes only a third pass (C) can judge it.
    let (mut a, admin) = spawn_daemon(&cfg);
    let start = Instant::now();
    while !http_get(&admin, "/readyz").contains(" 200 OK") {
        assert!(start.elapsed() < Duration::from_secs(60), "A never ready");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(once(&cfg, ""), "fleet-watch: 0 windows evaluated, 0 alerts");
    let (_, runs) = fleet(false);
    let mut hour8 = batch(8, "coder@1", 10, 0.1, 900);
    hour8.extend(batch(8, "reviewer", 10, 0.1, 901));
    let _worker = spawn_worker(&cfg, &[]);
    produce(&cfg, &hour8).await;
    let got = await_ch_count(
        &cfg,
        "SELECT count() FROM {db}.runs FINAL",
        runs as u64 + 20,
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(got, runs as u64 + 20);
    let start = Instant::now();
    let status = loop {
        if let Ok(Some(s)) = a.try_wait() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the fenced daemon kept running"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(!status.success(), "fenced: {status}");
    assert_eq!(once(&cfg, ""), "fleet-watch: 1 windows evaluated, 0 alerts");
}
