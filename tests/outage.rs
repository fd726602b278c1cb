//! Outages mid-stream: ClickHouse down for 30 s, then the broker restarted. The worker must stay
//! up, commit nothing past unsunk data, and end with exactly the undisturbed result.
//!
//! This drives the servers through `scripts/stack` (stop/start), so it needs the stack that
//! `scripts/test` starts; against other servers it fails with that instruction.
mod common;

use common::*;
use eddy::contract::OutputEvent;
use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const T0: i64 = 1_767_225_600_000;

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
    cfg.batch_max_messages = 500;
    let sim = eddy::simulate::SimulateArgs {
        runs: 600,
        loop_rate: 0.3,
        seed: 99,
        projects: 2,
        start_ms: T0,
        out: None,
        unfinished_rate: 0.0,
    };
    let lines: Vec<(String, String)> = eddy::simulate::generate(&sim)
        .into_iter()
        .map(|(_, k, l)| (k, l))
        .collect();
    let input: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
    let (want, _) = eddy::replay::replay_to_vec(
        input.as_bytes(),
        Arc::new(cfg.engine.clone()),
        cfg.topic_partitions as u32,
    );
    let want: BTreeMap<String, OutputEvent> = want
        .into_iter()
        .map(|o| (o.event_id().to_string(), o))
        .collect();
    let (first, rest) = lines.split_at(lines.len() / 3);
    let (second, third) = rest.split_at(rest.len() / 2);

    produce(&cfg, first).await;
    let mut worker = spawn_worker(&cfg, &[]);
    // Wait until the first third is fully processed and sunk.
    let first_steps = first
        .iter()
        .filter(|(_, l)| l.contains("\"kind\":\"step\""))
        .count() as u64;
    let t = Duration::from_secs(120);
    assert_eq!(
        await_ch_count(&cfg, "SELECT count() FROM {db}.steps FINAL", first_steps, t).await,
        first_steps
    );

    // ClickHouse goes away for 30 s while traffic keeps coming.
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

    let recs = read_topic_until(
        &cfg,
        &cfg.output_topic,
        Duration::from_secs(240),
        Some(&mut worker),
        |r| {
            let ids: HashSet<String> = outputs(r)
                .iter()
                .map(|o| o.event_id().to_string())
                .collect();
            ids.len() >= want.len()
        },
    );
    for o in outputs(&recs) {
        let w = want
            .get(o.event_id())
            .unwrap_or_else(|| panic!("unexpected {o:?}"));
        assert_eq!(&o, w, "an extra event must be an exact duplicate");
    }
    let steps = lines
        .iter()
        .filter(|(_, l)| l.contains("\"kind\":\"step\""))
        .count() as u64;
    let signals = want
        .values()
        .filter(|o| !matches!(o, OutputEvent::RunTerminated(_)))
        .count() as u64;
    assert_eq!(
        await_ch_count(&cfg, "SELECT count() FROM {db}.steps FINAL", steps, t).await,
        steps
    );
    assert_eq!(
        await_ch_count(
            &cfg,
            "SELECT count() FROM {db}.runs FINAL",
            sim.runs as u64,
            t
        )
        .await,
        sim.runs as u64
    );
    assert_eq!(
        await_ch_count(&cfg, "SELECT count() FROM {db}.signals FINAL", signals, t).await,
        signals
    );
    // Every signal row is one the undisturbed replay produced.
    let ids: Vec<String> = clickhouse(&cfg)
        .query(&format!(
            "SELECT event_id FROM {}.signals FINAL",
            cfg.clickhouse_database
        ))
        .fetch_all()
        .await
        .expect("signal ids");
    assert!(ids.iter().all(|id| want.contains_key(id)));
    stop_gracefully(&mut worker);
}
