//! eddy against a three-broker Kafka cluster (replication factor 3, min.insync.replicas 2,
//! acks=all): under steady load one broker is SIGKILLed and brought back, then every partition
//! of eddy's topics gets a new leader. The output topic must equal the undisturbed replay and
//! ClickHouse must equal an undisturbed worker's, in both delivery modes (exactly_once: no
//! duplicate for a read_committed reader).
//!
//! The cluster comes from `scripts/stack kafka-cluster up` (started here, stopped at the end);
//! the undisturbed reference runs on the single-node stack (`scripts/stack up`), which also holds
//! both ClickHouse databases. Size: `EDDY_CLUSTER_RUNS` runs per mode (default 500).
#[path = "common/cluster.rs"]
mod cluster;
mod common;

use cluster::{await_rows, dump, runs, Cluster, TABLES};
use common::*;
use eddy::config::{Config, Delivery};
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn mode_env(d: Delivery) -> Vec<(&'static str, String)> {
    let mode = match d {
        Delivery::AtLeastOnce => "at_least_once",
        Delivery::ExactlyOnce => "exactly_once",
    };
    vec![("EDDY_DELIVERY", mode.to_string())]
}

/// Per partition of `topic`: (leader, replicas in preference order).
fn placement(brokers: &str, topic: &str) -> BTreeMap<i32, (i32, Vec<i32>)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .expect("metadata client");
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    md.topics()
        .iter()
        .flat_map(|t| t.partitions())
        .map(|p| (p.id(), (p.leader(), p.replicas().to_vec())))
        .collect()
}

async fn topic_config(brokers: &str, topic: &str, key: &str) -> Option<String> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .expect("admin");
    let res = admin
        .describe_configs(&[ResourceSpecifier::Topic(topic)], &AdminOptions::new())
        .await
        .expect("describe configs");
    res.into_iter()
        .next()
        .and_then(|r| r.ok())
        .and_then(|c| c.get(key).and_then(|e| e.value.clone()))
}

/// Poll `cond` until it holds, failing after `timeout` with `what`.
async fn await_cond(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Rotates every partition's replica list so its preferred leader is another broker than its
/// leader now, then runs a preferred leader election and waits until the leaders moved.
async fn move_leaders(kafka: &Cluster, brokers: &str, topics: &[String]) {
    let dir = std::env::temp_dir().join(format!("eddy-move-leaders-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut assign = Vec::new();
    let mut elect = Vec::new();
    let mut want = Vec::new();
    for t in topics {
        for (p, (leader, mut replicas)) in placement(brokers, t) {
            assert_eq!(replicas.len(), 3, "{t}/{p} has replicas {replicas:?}");
            while replicas[0] == leader {
                replicas.rotate_left(1);
            }
            assign.push(serde_json::json!({"topic": t, "partition": p, "replicas": replicas}));
            elect.push(serde_json::json!({"topic": t, "partition": p}));
            want.push((t.clone(), p, replicas[0]));
        }
    }
    let reassign = dir.join("reassign.json");
    let election = dir.join("election.json");
    std::fs::write(
        &reassign,
        serde_json::json!({"version": 1, "partitions": assign}).to_string(),
    )
    .expect("write");
    std::fs::write(
        &election,
        serde_json::json!({"partitions": elect}).to_string(),
    )
    .expect("write");
    let (reassign, election) = (
        reassign.to_string_lossy().into_owned(),
        election.to_string_lossy().into_owned(),
    );
    // Same replicas, new order: the reassignment only changes the preferred leader.
    kafka.run(&[
        "kafka",
        "reassign-partitions",
        "--bootstrap-server",
        brokers,
        "--reassignment-json-file",
        &reassign,
        "--execute",
    ]);
    let moved = || {
        want.iter()
            .all(|(t, p, l)| placement(brokers, t).get(p).map(|x| x.0) == Some(*l))
    };
    // The election may find some already moved, or a replica still catching up: retried.
    let deadline = Instant::now() + Duration::from_secs(90);
    while !moved() {
        assert!(
            Instant::now() < deadline,
            "partition leaders did not move within 90 s"
        );
        let _ = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/stack"))
            .args([
                "kafka-cluster",
                "kafka",
                "leader-election",
                "--bootstrap-server",
                brokers,
                "--election-type",
                "PREFERRED",
                "--path-to-json-file",
                &election,
            ])
            .status();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

async fn one_mode(ep: &Endpoints, kafka: &Cluster, delivery: Delivery) {
    let t0 = Instant::now();
    let brokers = kafka.var("EDDY_KAFKA_BROKERS").to_string();
    let mut cfg = test_config(ep, "ckafka");
    cfg.kafka.brokers = brokers.clone();
    cfg.kafka.delivery = delivery;
    cfg.worker.batch_max_messages = 500;
    let fleet = Fleet::new(&cfg, runs(), 33, 4);
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    // eddy leaves the replication factor to the brokers' default: the cluster's policy applies.
    for t in [
        &cfg.kafka.topics.input,
        &cfg.kafka.topics.output,
        &cfg.kafka.changelog_topic(),
    ] {
        for (p, (_, replicas)) in placement(&brokers, t) {
            assert_eq!(replicas.len(), 3, "{t}/{p}: replicas {replicas:?}");
        }
        assert_eq!(
            topic_config(&brokers, t, "min.insync.replicas")
                .await
                .as_deref(),
            Some("2"),
            "{t}"
        );
    }

    // The undisturbed reference: single-node Kafka, its own database.
    let mut reference: Config = cfg.clone();
    reference.kafka.brokers = ep.kafka.clone();
    reference.clickhouse.database = format!("{}_ref", cfg.clickhouse.database);
    produce(&reference, &fleet.lines).await;
    let env = mode_env(delivery);
    let mut w_ref = spawn_worker(&reference, &env);

    // Steady load through every disturbance: a chunk every 300 ms, held at three fifths until
    // the killed broker is back and before the last four until the leaders have moved, so that
    // each disturbance happens while records flow.
    let chunks: Vec<Vec<(String, String)>> = fleet
        .lines
        .chunks(fleet.lines.len() / 40 + 1)
        .map(<[_]>::to_vec)
        .collect();
    let n_chunks = chunks.len();
    let sent = Arc::new(AtomicUsize::new(0));
    let phase = Arc::new(AtomicUsize::new(0));
    let producer = {
        let (cfg, sent, phase) = (cfg.clone(), sent.clone(), phase.clone());
        tokio::spawn(async move {
            for (i, chunk) in chunks.into_iter().enumerate() {
                let gate = if i + 4 >= n_chunks {
                    2
                } else if i >= 3 * n_chunks / 5 {
                    1
                } else {
                    0
                };
                while phase.load(Ordering::SeqCst) < gate {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                produce_existing(&cfg, &chunk).await;
                sent.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };
    let mut w1 = spawn_worker(&cfg, &env);
    let mut w2 = spawn_worker(&cfg, &env);
    let progress = |n: usize| {
        let sent = sent.clone();
        move || sent.load(Ordering::SeqCst) >= n
    };

    // 1. SIGKILL the broker leading input partition 0 (it leads others and may be the active
    // controller or a coordinator), then bring it back while the load goes on.
    await_cond(
        "load before the kill",
        Duration::from_secs(120),
        progress(n_chunks / 5),
    )
    .await;
    let victim = placement(&brokers, &cfg.kafka.topics.input)[&0].0;
    assert!((1..=3).contains(&victim), "leader of partition 0: {victim}");
    kafka.run(&["kill", &victim.to_string()]);
    eprintln!(
        "{delivery:?}: killed broker {victim} at {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    await_cond(
        "load while the broker is down",
        Duration::from_secs(120),
        progress(2 * n_chunks / 5),
    )
    .await;
    assert!(w1.try_wait().expect("wait").is_none(), "worker 1 died");
    assert!(w2.try_wait().expect("wait").is_none(), "worker 2 died");
    kafka.run(&["start", &victim.to_string()]);
    eprintln!(
        "{delivery:?}: broker {victim} back at {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    phase.store(1, Ordering::SeqCst);

    // 2. New leaders for every partition of eddy's topics, under load.
    await_cond(
        "load after the restart",
        Duration::from_secs(120),
        progress(3 * n_chunks / 5 + 3),
    )
    .await;
    move_leaders(
        kafka,
        &brokers,
        &[
            cfg.kafka.topics.input.clone(),
            cfg.kafka.topics.output.clone(),
            cfg.kafka.changelog_topic(),
        ],
    )
    .await;
    eprintln!(
        "{delivery:?}: leaders moved at {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    phase.store(2, Ordering::SeqCst);
    producer.await.expect("producer task");

    let got = read_all_expected(&cfg, &fleet.want, Duration::from_secs(300), Some(&mut w1));
    let dupes = assert_exact_or_duplicate(&got, &fleet.want);
    eprintln!(
        "{delivery:?}: {} input events, {} output events expected, {} received, {dupes} exact \
         duplicates, {:.1}s",
        fleet.lines.len(),
        fleet.want.len(),
        got.len(),
        t0.elapsed().as_secs_f64()
    );
    if delivery == Delivery::ExactlyOnce {
        assert_eq!(
            dupes, 0,
            "exactly_once: a read_committed reader sees every event once"
        );
    }

    // ClickHouse: row for row what the undisturbed worker wrote.
    read_all_expected(
        &reference,
        &fleet.want,
        Duration::from_secs(300),
        Some(&mut w_ref),
    );
    await_rows(&[&cfg, &reference], fleet.steps, fleet.runs as u64).await;
    let ch = clickhouse(&cfg);
    for (table, order) in TABLES {
        let sql = |db: &str| format!("SELECT * FROM {db}.{table} FINAL ORDER BY {order}");
        let a = dump(&ch, &sql(&cfg.clickhouse.database)).await;
        let b = dump(&ch, &sql(&reference.clickhouse.database)).await;
        assert!(
            a == b,
            "{delivery:?}: ClickHouse {table} differs from the undisturbed worker's ({} vs {} bytes)",
            a.len(),
            b.len()
        );
    }
    for mut w in [w1, w2, w_ref] {
        stop_gracefully(&mut w);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_loss_and_leader_moves_change_nothing() {
    let ep = endpoints().await;
    let Some(kafka) = Cluster::up("kafka-cluster") else {
        return;
    };
    // One mode after the other: two tests killing brokers at once would take two of three down.
    one_mode(&ep, &kafka, Delivery::AtLeastOnce).await;
    one_mode(&ep, &kafka, Delivery::ExactlyOnce).await;
}
