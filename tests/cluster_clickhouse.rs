//! eddy against a ClickHouse cluster of two shards x two replicas (Debian's 18.16 with one
//! ZooKeeper): `eddy migrate` creates the replicated locals and Distributed tables `ON CLUSTER`,
//! three workers write through three different nodes while a fourth node (a replica of shard 1)
//! is stopped and brought back. `FINAL` results and the analyst query pack must equal a single
//! server's (an undisturbed worker on the single-node stack, same events), and both replicas of
//! each shard must end up holding the same rows.
//!
//! The cluster comes from `scripts/stack clickhouse-cluster up` (started here, stopped at the
//! end); Kafka and the reference ClickHouse are the single-node stack's. Size:
//! `EDDY_CLUSTER_RUNS` runs (default 500).
#[path = "common/cluster.rs"]
mod cluster;
mod common;

use cluster::{await_rows, dump, runs, Cluster, TABLES};
use common::*;
use eddy::contract::OutputEvent;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

fn node(url: &str) -> clickhouse::Client {
    clickhouse::Client::default()
        .with_url(url)
        .with_validation(false)
}

/// The query pack's parameters: one project's day, five-minute buckets, one looping run.
fn pack_params(run_id: &str) -> BTreeMap<String, String> {
    [
        ("project_id", "proj-0"),
        ("from", "2026-01-01T00:00:00Z"),
        ("to", "2026-01-02T00:00:00Z"),
        ("bucket_seconds", "300"),
        ("run_id", run_id),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_through_a_sharded_replicated_cluster_match_one_server() {
    let ep = endpoints().await;
    let Some(chc) = Cluster::up("clickhouse-cluster") else {
        return;
    };
    let t0 = Instant::now();
    // s1r1, s1r2, s2r1, s2r2
    let urls: Vec<String> = chc
        .var("EDDY_TEST_CLICKHOUSE_CLUSTER_URLS")
        .split(',')
        .map(String::from)
        .collect();
    assert_eq!(urls.len(), 4, "{urls:?}");
    let cluster_name = chc.var("EDDY_CLICKHOUSE_CLUSTER").to_string();
    let mut cfg = test_config(&ep, "cch");
    cfg.clickhouse.url = urls[0].clone();
    cfg.clickhouse.cluster = Some(cluster_name.clone());
    cfg.worker.batch_max_messages = 500;
    let db = cfg.clickhouse.database.clone();
    let fleet = Fleet::new(&cfg, runs(), 77, 3);

    // `eddy migrate` through one node creates everything on all four.
    let out = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .arg("migrate")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("EDDY_CLICKHOUSE_URL", &urls[0])
        .env("EDDY_CLICKHOUSE_DATABASE", &db)
        .env("EDDY_CLICKHOUSE_CLUSTER", &cluster_name)
        .output()
        .expect("run eddy migrate");
    assert!(
        out.status.success(),
        "eddy migrate on the cluster failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut want_tables = String::new();
    for (t, _) in TABLES {
        want_tables.push_str(&format!("{t}\tDistributed\n"));
        want_tables.push_str(&format!("{t}_local\tReplicatedReplacingMergeTree\n"));
    }
    want_tables.push_str("schema_migrations\tReplicatedReplacingMergeTree\n");
    let mut want_sorted: Vec<&str> = want_tables.lines().collect();
    want_sorted.sort_unstable();
    for u in &urls {
        let got = dump(
            &node(u),
            &format!(
                "SELECT name, engine FROM system.tables WHERE database = '{db}' ORDER BY name"
            ),
        )
        .await;
        assert_eq!(
            got.lines().collect::<Vec<_>>(),
            want_sorted,
            "tables on {u}"
        );
    }

    // The single-server reference: same input topic, its own group, output and database.
    let mut reference = cfg.clone();
    reference.clickhouse.url = ep.clickhouse.clone();
    reference.clickhouse.cluster = None;
    reference.clickhouse.database = format!("{db}_ref");
    reference.kafka.group_id = format!("{}.ref", cfg.kafka.group_id);
    reference.kafka.topics.output = format!("{}.ref", cfg.kafka.topics.output);
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let mut w_ref = spawn_worker(&reference, &[]);

    // Three workers, each through its own node; none may run DDL, so each must find the
    // migrations that went through s1r1 in its own node's (replicated) ledger.
    let via = |url: &str| {
        vec![
            ("EDDY_CLICKHOUSE_URL", url.to_string()),
            ("EDDY_CLICKHOUSE_CLUSTER", cluster_name.clone()),
            ("EDDY_MIGRATE_ON_START", "false".to_string()),
        ]
    };
    let mut workers: Vec<Worker> = [0, 2, 3]
        .iter()
        .map(|&i| spawn_worker(&cfg, &via(&urls[i])))
        .collect();

    // Input over time; s1r2, which no worker talks to, is stopped after a quarter and started
    // again after three quarters: Distributed inserts for shard 1 must fail over to s1r1.
    let chunks: Vec<&[(String, String)]> = fleet.lines.chunks(fleet.lines.len() / 20 + 1).collect();
    let n = chunks.len();
    for (i, chunk) in chunks.into_iter().enumerate() {
        if i == n / 4 {
            chc.run(&["stop-replica", "1", "2"]);
            eprintln!("s1r2 stopped at {:.1}s", t0.elapsed().as_secs_f64());
        }
        if i == 3 * n / 4 {
            chc.run(&["start-replica", "1", "2"]);
            eprintln!("s1r2 back at {:.1}s", t0.elapsed().as_secs_f64());
        }
        produce(&cfg, chunk).await;
        for w in workers.iter_mut() {
            assert!(w.try_wait().expect("wait").is_none(), "a worker died");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    let got = read_all_expected(
        &cfg,
        &fleet.want,
        Duration::from_secs(300),
        Some(&mut workers[0]),
    );
    assert_exact_or_duplicate(&got, &fleet.want);
    read_all_expected(
        &reference,
        &fleet.want,
        Duration::from_secs(300),
        Some(&mut w_ref),
    );
    await_rows(&[&cfg, &reference], fleet.steps, fleet.runs as u64).await;
    eprintln!(
        "{} events through the cluster in {:.1}s",
        fleet.lines.len(),
        t0.elapsed().as_secs_f64()
    );

    // Every replica has caught up with its shard's replication log, so reads through any node
    // are deterministic.
    for u in &urls {
        for (t, _) in TABLES {
            node(u)
                .query(&format!("SYSTEM SYNC REPLICA {db}.{t}_local"))
                .execute()
                .await
                .unwrap_or_else(|e| panic!("sync {t}_local on {u}: {e}"));
        }
    }

    // FINAL through the Distributed tables (read via the node that was down) equals the single
    // server, row for row; each shard holds part of it, identically on both replicas.
    let single = node(&ep.clickhouse);
    for (table, order) in TABLES {
        let all = |d: &str| format!("SELECT * FROM {d}.{table} FINAL ORDER BY {order}");
        let a = dump(&node(&urls[1]), &all(&db)).await;
        let b = dump(&single, &all(&reference.clickhouse.database)).await;
        assert!(
            a == b,
            "{table}: the cluster's FINAL rows differ from the single server's ({} vs {} bytes)",
            a.len(),
            b.len()
        );
        let local = format!("SELECT * FROM {db}.{table}_local FINAL ORDER BY {order}");
        let mut shard_rows = 0;
        for (r1, r2) in [(0, 1), (2, 3)] {
            let x = dump(&node(&urls[r1]), &local).await;
            let y = dump(&node(&urls[r2]), &local).await;
            assert!(
                x == y,
                "{table}: the replicas {} and {} differ ({} vs {} bytes)",
                urls[r1],
                urls[r2],
                x.len(),
                y.len()
            );
            assert!(
                !x.is_empty(),
                "{table}: shard of {} holds no rows",
                urls[r1]
            );
            shard_rows += x.lines().count();
        }
        assert_eq!(shard_rows, b.lines().count(), "{table}: shards overlap");
    }

    // The analyst query pack: the same answers from the cluster (through a node no worker
    // wrote through either) as from one server.
    // run_loops lists exact repeats only: a looping run that has some, found on the single server.
    let on_single = node(&ep.clickhouse).with_database(&reference.clickhouse.database);
    let mut looping = None;
    for o in fleet.want.values() {
        let OutputEvent::RunTerminated(r) = o else {
            continue;
        };
        if !(r.loop_detected && r.project_id == "proj-0") {
            continue;
        }
        let p: BTreeMap<String, String> = [("project_id", "proj-0"), ("run_id", &r.run_id)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let t = eddy::query::execute(&on_single, "run_loops", &p)
            .await
            .expect("run_loops");
        if !t.rows.is_empty() {
            looping = Some(r.run_id.clone());
            break;
        }
    }
    let looping = looping.expect("the fleet has a run with exact repeats in proj-0");
    let params = pack_params(&looping);
    let on_cluster = eddy::sink::ClickHouseSink::from_client(node(&urls[1]), &cfg.clickhouse)
        .client()
        .clone()
        .with_database(&db);
    let mut empty = Vec::new();
    for name in eddy::query::names() {
        let declared = eddy::query::params(eddy::query::sql_for(name, "99").expect("sql"));
        let mut params = params.clone();
        params.retain(|k, _| declared.iter().any(|(d, _)| d == k));
        let a = eddy::query::execute(&on_cluster, name, &params)
            .await
            .unwrap_or_else(|e| panic!("{name} on the cluster: {e}"));
        let b = eddy::query::execute(&on_single, name, &params)
            .await
            .unwrap_or_else(|e| panic!("{name} on one server: {e}"));
        // Ties in a query's ORDER BY may come in another order from two shards.
        let rows = |t: &eddy::query::Table| {
            let mut r = t.rows.clone();
            r.sort();
            r
        };
        assert_eq!(a.columns, b.columns, "{name}: columns");
        assert_eq!(rows(&a), rows(&b), "{name}: the cluster's answer differs");
        if b.rows.is_empty() {
            empty.push(name);
        }
    }
    assert!(
        empty.is_empty(),
        "pack queries without rows to compare on this fleet: {empty:?}"
    );

    for mut w in workers.into_iter().chain([w_ref]) {
        stop_gracefully(&mut w);
    }
}
