//! `eddy fleet-watch` end to end on the real stack: a simulated fleet goes through `eddy run`
//! into ClickHouse's rollups; the evaluator reads them and publishes `fleet_alert` events.
//! (a) a new agent version that loops more is named, with baseline and current values equal to
//! what ClickHouse itself computes over the same tables; (b) a steady fleet raises none;
//! (c) a restart, or a second pass, publishes no second alert, and an evaluator starting from
//! nothing reproduces the same events byte for byte.
mod common;
use common::fleet::*;
use common::receiver::*;
use common::*;
use eddy::config::Config;
use eddy::fleet::Metric;
use std::process::Command;
use std::time::{Duration, Instant};

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
    // Someone is told: a signed webhook (tests/fleet_notify.rs, a CI stage of its own, adds
    // Slack, PagerDuty and a real Alertmanager).
    let rx = Receiver::start().await;
    let hook: Vec<(String, String)> = [
        ("KIND", "webhook".to_string()),
        ("URL", rx.url("hook")),
        ("SECRET", SECRET.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (format!("EDDY_FLEET__NOTIFY__DESTINATIONS__HOOK__{k}"), v))
    .collect();
    run_fleet(&cfg, true).await;

    // The daemon finds the closed windows on its own, says so on its admin server, and stops
    // gracefully once it alerted.
    let (mut daemon, admin) = spawn_daemon_with(&cfg, &hook);
    let start = Instant::now();
    let metrics = loop {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the daemon did not evaluate the 9 windows"
        );
        if let Ok(Some(s)) = daemon.try_wait() {
            panic!("fleet-watch exited ({s}) before evaluating");
        }
        let m = http_get(&admin, "/metrics")
            .map(|(_, body)| body)
            .unwrap_or_default();
        // Ready once a whole pass succeeded, which the last window's count precedes.
        if m.contains("eddy_fleet_windows_evaluated_total 9")
            && http_get(&admin, "/readyz").is_some_and(|(st, _)| st == 200)
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
    // The daemon tells the webhook on its own (2 alerts: loop rate and loop cost).
    rx.await_n("hook", 2, Duration::from_secs(30)).await;
    let _ = Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status();
    let status = daemon.wait().expect("fleet-watch exits");
    assert!(status.success(), "graceful stop: {status}");
    // A restart finishes whatever windows are left, and repeats nothing.
    once_with(&cfg, "", &hook);
    let raw = alerts(&cfg, "");
    let got = decode(&raw);
    let ids: std::collections::BTreeSet<&str> = got.iter().map(|a| a.event_id.as_str()).collect();
    assert_eq!(ids.len(), got.len(), "no alert published twice: {got:#?}");
    // The webhook got each alert once, as published, signed with the shared secret.
    let told = rx.got("hook");
    assert_eq!(
        told.len(),
        got.len(),
        "each alert sent once, across the restart"
    );
    for g in &told {
        verify(g);
        assert!(raw.contains(&g.body), "the body is the published event");
        assert!(ids.contains(g.header("X-Eddy-Event-Id")));
    }

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
    while http_get(&admin, "/readyz").map(|(st, _)| st) != Some(200) {
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
