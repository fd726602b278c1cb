//! examples/python/rollout_producer.py against the real broker: a standard Python Kafka client
//! (confluent-kafka) produces v1 events that eddy decodes, keyed by run id, on the partition
//! eddy expects (Kafka's murmur2, as `eddy replay --partitions N` computes it).
//!
//! Needs python3 with `confluent-kafka`; without it the test fails and says how to install it.
mod common;

use common::*;
use eddy::contract::{decode, Event};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread")]
async fn python_rollout_worker_produces_v1_events_keyed_by_run_id() {
    match Command::new("python3")
        .args(["-c", "import confluent_kafka"])
        .output()
    {
        Err(e) => panic!(
            "python3 is required ({e}): install Python 3, then `pip install confluent-kafka`"
        ),
        Ok(o) if !o.status.success() => panic!(
            "python3 cannot import confluent_kafka: run `pip install confluent-kafka`\n{}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Ok(_) => {}
    }
    let ep = endpoints().await;
    let cfg = test_config(&ep, "pyexample");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");

    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/python/rollout_producer.py"
        ))
        .args(["--brokers", &cfg.kafka.brokers])
        .args(["--topic", &cfg.kafka.topics.input])
        .args(["--project", "rl-test", "--episodes", "6"])
        .output()
        .expect("run python3 examples/python/rollout_producer.py");
    assert!(
        out.status.success(),
        "rollout_producer.py failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // run_id -> (events, stuck), as the example reports them.
    let runs: BTreeMap<String, (usize, bool)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("one JSON line per episode");
            (
                v["run_id"].as_str().expect("run_id").to_string(),
                (
                    v["events"].as_u64().expect("events") as usize,
                    v["stuck"].as_bool().expect("stuck"),
                ),
            )
        })
        .collect();
    assert_eq!(runs.len(), 6);
    let want: usize = runs.values().map(|(n, _)| n).sum();

    // Read the topic back, with partitions.
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &cfg.kafka.brokers)
        .set("group.id", "eddy-test-reader")
        .set("enable.auto.commit", "false")
        .create()
        .expect("reader");
    let mut tpl = TopicPartitionList::new();
    for p in 0..cfg.kafka.topics.partitions {
        tpl.add_partition_offset(&cfg.kafka.topics.input, p, Offset::Beginning)
            .expect("tpl");
    }
    c.assign(&tpl).expect("assign");
    let start = Instant::now();
    let mut seen: BTreeMap<String, Vec<Event>> = BTreeMap::new();
    let mut total = 0;
    while total < want {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "read {total} of {want} events"
        );
        let Some(m) = c.poll(Duration::from_millis(200)) else {
            continue;
        };
        let m = m.expect("consume");
        let event = decode(m.payload().expect("payload")).expect("a valid v1 event");
        let run_id = event.key().run_id.clone();
        assert_eq!(m.key(), Some(run_id.as_bytes()), "key = run_id");
        assert_eq!(
            m.partition() as u32,
            eddy::engine::partition_for(&run_id, cfg.kafka.topics.partitions as u32),
            "murmur2 partitioning, as Kafka's Java clients and eddy replay"
        );
        assert_eq!(event.key().project_id, "rl-test");
        seen.entry(run_id).or_default().push(event);
        total += 1;
    }
    assert_eq!(seen.len(), runs.len());
    for (run_id, events) in &seen {
        let (n, _) = runs[run_id];
        assert_eq!(events.len(), n, "{run_id}");
        assert!(matches!(events.first(), Some(Event::RunStarted(_))));
        assert!(matches!(events.last(), Some(Event::RunFinished(_))));
        let indices: Vec<u64> = events
            .iter()
            .filter_map(|e| match e {
                Event::Step(s) => Some(s.step_index),
                _ => None,
            })
            .collect();
        assert_eq!(
            indices,
            (1..=(n as u64 - 2)).collect::<Vec<_>>(),
            "in order"
        );
    }
    assert!(runs.values().any(|(_, stuck)| *stuck));
}
