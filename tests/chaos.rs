//! Differential chaos: a seeded fleet through three workers while one is `kill -9`'d and restarted
//! repeatedly and a fourth joins and leaves, compared with one undisturbed worker on the same
//! input. Both delivery modes.
//!
//! Size: `EDDY_CHAOS_RUNS` runs (default 1500, about 22k events, for CI); run it with 14000 for
//! the ≥ 200k-event version: `EDDY_CHAOS_RUNS=14000 scripts/test --test chaos`.
mod common;

use common::*;
use eddy::config::{Config, Delivery};
use std::time::Duration;

fn chaos_runs() -> usize {
    std::env::var("EDDY_CHAOS_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500)
}

fn mode_env(cfg: &Config) -> Vec<(&'static str, String)> {
    match cfg.kafka.delivery {
        Delivery::AtLeastOnce => vec![("EDDY_DELIVERY", "at_least_once".into())],
        Delivery::ExactlyOnce => vec![("EDDY_DELIVERY", "exactly_once".into())],
    }
}

/// Every row of a table, ordered, as text: the row-for-row comparison between two databases.
async fn table_dump(cfg: &Config, db: &str, table: &str, order: &str) -> String {
    let sql = format!("SELECT * FROM {db}.{table} FINAL ORDER BY {order} FORMAT TabSeparated");
    let bytes = clickhouse(cfg)
        .query(&sql)
        .fetch_bytes("TabSeparated")
        .expect("query")
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    String::from_utf8_lossy(&bytes).into_owned()
}

async fn chaos(delivery: Delivery) {
    let ep = endpoints().await;
    let mut cfg = test_config(&ep, "chaos");
    cfg.kafka.delivery = delivery;
    cfg.worker.batch_max_messages = 1000;
    let runs = chaos_runs();
    let fleet = Fleet::new(&cfg, runs, 2024, 4);
    let (lines, want) = (&fleet.lines, &fleet.want);
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");

    // The undisturbed reference: its own group, output topic and database, same input.
    let mut reference = cfg.clone();
    reference.kafka.group_id = format!("{}.reference", cfg.kafka.group_id);
    reference.kafka.topics.output = format!("{}.reference", cfg.kafka.topics.output);
    reference.clickhouse.database = format!("{}_reference", cfg.clickhouse.database);
    let env = mode_env(&cfg);
    let mut w_ref = spawn_worker(&reference, &env);

    // Input arrives over time, like a live fleet, so the disturbances land mid-stream.
    let producer_cfg = cfg.clone();
    let chunks: Vec<Vec<(String, String)>> = lines
        .chunks(lines.len() / 20 + 1)
        .map(<[_]>::to_vec)
        .collect();
    let producer = tokio::spawn(async move {
        for chunk in chunks {
            produce(&producer_cfg, &chunk).await;
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
    });

    let mut victim = spawn_worker(&cfg, &env);
    let mut w2 = spawn_worker(&cfg, &env);
    let mut w3 = spawn_worker(&cfg, &env);
    let mut kills = 0;
    let mut joiner: Option<Worker> = None;
    let total = want.len();
    for round in 1..=4usize {
        // Wait for visible progress (a condition), then disturb.
        let target = total * round / 6;
        read_topic_until(
            &cfg,
            &cfg.kafka.topics.output,
            Duration::from_secs(240),
            Some(&mut w2),
            |r| r.len() >= target,
        );
        kill_hard(&mut victim);
        kills += 1;
        victim = spawn_worker(&cfg, &env);
        match round {
            1 => joiner = Some(spawn_worker(&cfg, &env)),
            3 => {
                if let Some(mut j) = joiner.take() {
                    stop_gracefully(&mut j);
                }
            }
            _ => {}
        }
    }
    producer.await.expect("producer task");

    let got = read_all_expected(&cfg, want, Duration::from_secs(300), Some(&mut w3));
    let dupes = assert_exact_or_duplicate(&got, want);
    eprintln!(
        "chaos {delivery:?}: {} input events, {} output events expected, {} received, {} exact duplicates ({:.3}%), {kills} kills",
        lines.len(),
        want.len(),
        got.len(),
        dupes,
        100.0 * dupes as f64 / want.len() as f64
    );
    if delivery == Delivery::ExactlyOnce {
        assert_eq!(
            dupes, 0,
            "exactly_once: a read_committed reader sees every event once"
        );
    }

    // The reference must be complete too before comparing ClickHouse row for row.
    read_topic_until(
        &reference,
        &reference.kafka.topics.output,
        Duration::from_secs(300),
        Some(&mut w_ref),
        |r| r.len() >= want.len(),
    );
    let steps = fleet.steps;
    let t = Duration::from_secs(120);
    for c in [&cfg, &reference] {
        assert_eq!(
            await_ch_count(c, "SELECT count() FROM {db}.steps FINAL", steps, t).await,
            steps
        );
        assert_eq!(
            await_ch_count(c, "SELECT count() FROM {db}.runs FINAL", runs as u64, t).await,
            runs as u64
        );
    }
    for (table, order) in [
        ("steps", "project_id, run_id, step_index"),
        ("runs", "project_id, run_id"),
        ("signals", "project_id, run_id, event_id"),
        ("rollup_minute", "project_id, bucket, run_id"),
    ] {
        let a = table_dump(&cfg, &cfg.clickhouse.database, table, order).await;
        let b = table_dump(&cfg, &reference.clickhouse.database, table, order).await;
        assert!(
            a == b,
            "ClickHouse {table} differs from the undisturbed worker's ({} vs {} bytes)",
            a.len(),
            b.len()
        );
    }
    for mut w in [victim, w2, w3, w_ref] {
        stop_gracefully(&mut w);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_at_least_once() {
    chaos(Delivery::AtLeastOnce).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_exactly_once() {
    chaos(Delivery::ExactlyOnce).await;
}
