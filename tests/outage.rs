//! Outages mid-stream: ClickHouse down for 30 s, then the broker restarted. The worker must stay
//! up, commit nothing past unsunk data, and end with exactly the undisturbed result.
//!
//! This drives the servers through `scripts/stack` (stop/start), so it needs the stack that
//! `scripts/test` starts; against other servers it fails with that instruction.
mod common;

use common::*;
use std::process::Command;
use std::time::Duration;

fn stack(cmd: &str) {
    let root = env!("CARGO_MANIFEST_DIR");
    let ok = Command::new(format!("{root}/scripts/stack"))
        .arg(cmd)
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "`scripts/stack {cmd}` failed: the outage test needs the servers started by scripts/stack \
         (run it through scripts/test)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_outage_and_broker_restart_lose_nothing() {
    let ep = endpoints().await;
    let mut cfg = test_config(&ep, "outage");
    cfg.worker.batch_max_messages = 500;
    let fleet = Fleet::new(&cfg, 600, 99, 2);
    let (first, rest) = fleet.lines.split_at(fleet.lines.len() / 3);
    let (second, third) = rest.split_at(rest.len() / 2);

    produce(&cfg, first).await;
    let mut worker = spawn_worker(&cfg, &[]);
    // Wait until the first third is fully processed and sunk.
    let t = Duration::from_secs(120);
    let q = |table: &str| format!("SELECT count() FROM {{db}}.{table} FINAL");
    let first_steps = step_count(first);
    assert_eq!(
        await_ch_count(&cfg, &q("steps"), first_steps, t).await,
        first_steps
    );

    // ClickHouse goes away for 30 s while traffic keeps coming. The 30 s is the scenario's
    // length, not a synchronisation: the test then waits on conditions only.
    stack("stop-clickhouse");
    produce(&cfg, second).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(
        worker.try_wait().expect("wait").is_none(),
        "the worker must ride out a ClickHouse outage"
    );
    stack("start-clickhouse");

    // Then the broker restarts mid-stream.
    produce(&cfg, third).await;
    stack("restart-kafka");
    assert!(
        worker.try_wait().expect("wait").is_none(),
        "the worker must ride out a broker restart"
    );

    let got = read_all_expected(
        &cfg,
        &fleet.want,
        Duration::from_secs(240),
        Some(&mut worker),
    );
    assert_exact_or_duplicate(&got, &fleet.want);
    assert_eq!(
        await_ch_count(&cfg, &q("steps"), fleet.steps, t).await,
        fleet.steps
    );
    let runs = fleet.runs as u64;
    assert_eq!(await_ch_count(&cfg, &q("runs"), runs, t).await, runs);
    let signals = fleet.signals();
    assert_eq!(
        await_ch_count(&cfg, &q("signals"), signals, t).await,
        signals
    );
    // Every signal row is one the undisturbed replay produced.
    let ids: Vec<String> = clickhouse(&cfg)
        .query(&format!(
            "SELECT event_id FROM {}.signals FINAL",
            cfg.clickhouse.database
        ))
        .fetch_all()
        .await
        .expect("signal ids");
    assert!(ids.iter().all(|id| fleet.want.contains_key(id)));
    stop_gracefully(&mut worker);
}
