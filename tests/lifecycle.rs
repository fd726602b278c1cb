//! Lifecycle: readiness and metrics over HTTP, and a graceful restart that loses nothing and,
//! because the final flush commits everything, repeats nothing either.
mod common;

use common::*;
use eddy::contract::OutputEvent;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn await_http(
    port: u16,
    path: &str,
    timeout: Duration,
    ok: impl Fn(u16, &str) -> bool,
) -> (u16, String) {
    let start = Instant::now();
    loop {
        if let Some((st, body)) = http_get(&format!("127.0.0.1:{port}"), path) {
            if ok(st, &body) {
                return (st, body);
            }
        }
        assert!(
            start.elapsed() < timeout,
            "GET {path} never satisfied the condition"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_restart_loses_and_repeats_nothing() {
    let ep = endpoints().await;
    let cfg = test_config(&ep, "lifecycle");
    let fleet = Fleet::new(&cfg, 300, 3, 2);
    let (lines, want) = (&fleet.lines, &fleet.want);
    let (first, second) = lines.split_at(lines.len() / 2);

    produce(&cfg, first).await;
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut w = spawn_worker(&cfg, &[("EDDY_ADMIN_ADDR", addr.clone())]);
    await_http(port, "/livez", Duration::from_secs(30), |st, _| st == 200);
    await_http(port, "/readyz", Duration::from_secs(60), |st, _| st == 200);
    let first_steps = step_count(first);
    assert_eq!(
        await_ch_count(
            &cfg,
            "SELECT count() FROM {db}.steps FINAL",
            first_steps,
            Duration::from_secs(60)
        )
        .await,
        first_steps
    );
    // The rows counter moves when the whole insert is acknowledged (`runs` goes in after the
    // `steps` already counted above), so wait for it rather than race it.
    let (_, metrics) = await_http(port, "/metrics", Duration::from_secs(10), |st, b| {
        st == 200
            && b.contains("eddy_events_consumed_total")
            && b.contains("eddy_clickhouse_rows_total")
    });
    let consumed: f64 = metrics
        .lines()
        .find(|l| l.starts_with("eddy_events_consumed_total"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .expect("counter value");
    assert_eq!(
        consumed as usize,
        first.len(),
        "every consumed message is counted"
    );
    assert!(metrics.contains("eddy_clickhouse_rows_total"));

    // SIGTERM: flush, final commit, exit 0.
    stop_gracefully(&mut w);
    let status = w.try_wait().expect("wait").expect("exited");
    assert!(status.success(), "graceful shutdown exits 0, got {status}");

    produce(&cfg, second).await;
    let mut w = spawn_worker(&cfg, &[("EDDY_ADMIN_ADDR", addr)]);
    let recs = read_topic_until(
        &cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(120),
        Some(&mut w),
        |r| r.len() >= want.len(),
    );
    let got = outputs(&recs);
    let got_map: BTreeMap<String, OutputEvent> = got
        .iter()
        .map(|o| (o.event_id().to_string(), o.clone()))
        .collect();
    assert_eq!(
        &got_map, want,
        "the restarted worker continues exactly where it stopped"
    );
    assert_eq!(got.len(), want.len(), "a graceful restart repeats nothing");
    stop_gracefully(&mut w);
}
