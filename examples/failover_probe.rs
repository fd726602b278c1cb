//! Kafka helper for `bench/failover.sh` (the failover pause): no Python Kafka client is assumed.
//!
//!   failover_probe lag BROKERS GROUP TOPIC
//!       prints the group's total lag on TOPIC (end offset - committed offset, summed over
//!       partitions; a partition without a commit counts whole), without joining the group
//!
//!   failover_probe probe BROKERS INPUT OUTPUT TAG TS_MS TIMEOUT_S
//!       assigns every OUTPUT partition at its current end, then produces to each INPUT partition
//!       one fresh run (run id chosen so that `partition_for` maps it there, as the producer's
//!       murmur2 partitioner does) whose identical tool calls make the detectors fire at once
//!       (a loop_warning at the 2nd, loop_detected at the 3rd), event time TS_MS on; then
//!       prints, per input partition, when its run's first signal was read:
//!         sent <partition> <run_id> <wall_ms>
//!         signal <partition> <run_id> <read_wall_ms> <kafka_timestamp_ms> <kind>
//!         missing <partition> <run_id>          (none within TIMEOUT_S)
use eddy::engine::partition_for;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const T: Duration = Duration::from_secs(10);

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn consumer(brokers: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "10")
        .create()
        .expect("consumer")
}

fn partitions(c: &BaseConsumer, topic: &str) -> Vec<i32> {
    let md = c.fetch_metadata(Some(topic), T).expect("metadata");
    let t = &md.topics()[0];
    assert!(
        !t.partitions().is_empty(),
        "topic {topic} has no partitions"
    );
    t.partitions().iter().map(|p| p.id()).collect()
}

fn lag(brokers: &str, group: &str, topic: &str) {
    let c = consumer(brokers, group);
    let parts = partitions(&c, topic);
    let mut tpl = TopicPartitionList::new();
    for &p in &parts {
        tpl.add_partition(topic, p);
    }
    let committed = c.committed_offsets(tpl, T).expect("committed offsets");
    let mut total = 0i64;
    for &p in &parts {
        let (lo, hi) = c.fetch_watermarks(topic, p, T).expect("watermarks");
        let at = match committed.find_partition(topic, p).map(|e| e.offset()) {
            Some(Offset::Offset(o)) => o,
            _ => lo,
        };
        total += (hi - at).max(0);
    }
    println!("{total}");
}

fn step(run: &str, i: u32, ts: i64) -> String {
    serde_json::json!({
        "v": 1, "kind": "step", "project_id": "proj-failover", "run_id": run,
        "step_index": i, "step_type": "tool_call", "tool_name": "read_file",
        "tool_input": {"path": "src/lib.rs"}, "tool_output": {"content": "fn main() {}"},
        "tool_success": true, "tokens": 10, "cost_usd": 0.0001, "ts": ts + i64::from(i) * 1000,
    })
    .to_string()
}

fn probe(brokers: &str, input: &str, output: &str, tag: &str, ts: i64, timeout: Duration) {
    let c = consumer(brokers, &format!("failover-probe-{tag}"));
    // Read from each output partition's end as of now: the runs below are new, so all their
    // signals come after.
    let mut tpl = TopicPartitionList::new();
    for p in partitions(&c, output) {
        let (_, hi) = c.fetch_watermarks(output, p, T).expect("watermarks");
        tpl.add_partition_offset(output, p, Offset::Offset(hi))
            .unwrap();
    }
    c.assign(&tpl).expect("assign");
    let in_parts = partitions(&c, input);
    let n = in_parts.len() as u32;
    let mut runs: HashMap<String, i32> = HashMap::new();
    let mut i = 0;
    while runs.len() < in_parts.len() {
        let id = format!("failover-{tag}-{i}");
        let p = partition_for(&id, n) as i32;
        if !runs.values().any(|&q| q == p) {
            runs.insert(id, p);
        }
        i += 1;
    }
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "0")
        .set("acks", "all")
        .create()
        .expect("producer");
    let mut order: Vec<(&String, &i32)> = runs.iter().collect();
    order.sort_by_key(|(_, p)| **p);
    for (run, &p) in &order {
        let mut msgs = vec![serde_json::json!({
            "v": 1, "kind": "run_started", "project_id": "proj-failover", "run_id": run,
            "agent_name": "failover-probe", "input": "failover probe", "ts": ts,
        })
        .to_string()];
        msgs.extend((1..=4).map(|i| step(run, i, ts)));
        for m in &msgs {
            producer
                .send(
                    BaseRecord::to(input)
                        .key(run.as_str())
                        .payload(m)
                        .partition(p),
                )
                .expect("enqueue");
        }
    }
    producer.flush(T).expect("flush");
    let sent = wall_ms();
    for (run, p) in &order {
        println!("sent {p} {run} {sent}");
    }
    let start = Instant::now();
    let mut left = runs.clone();
    while !left.is_empty() && start.elapsed() < timeout {
        let Some(m) = c.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = m.expect("consume");
        let read = wall_ms();
        let Some(payload) = m.payload() else { continue };
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(payload) else {
            continue;
        };
        let Some(run) = v.get("run_id").and_then(|r| r.as_str()) else {
            continue;
        };
        if let Some(p) = left.remove(run) {
            let kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or("?");
            let kts = m.timestamp().to_millis().unwrap_or(-1);
            println!("signal {p} {run} {read} {kts} {kind}");
        }
    }
    for (run, p) in left {
        println!("missing {p} {run}");
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    match a.get(1).map(String::as_str) {
        Some("lag") if a.len() == 5 => lag(&a[2], &a[3], &a[4]),
        Some("probe") if a.len() == 8 => probe(
            &a[2],
            &a[3],
            &a[4],
            &a[5],
            a[6].parse().expect("TS_MS"),
            Duration::from_secs(a[7].parse().expect("TIMEOUT_S")),
        ),
        _ => {
            eprintln!("usage: failover_probe lag BROKERS GROUP TOPIC");
            eprintln!("       failover_probe probe BROKERS INPUT OUTPUT TAG TS_MS TIMEOUT_S");
            std::process::exit(2);
        }
    }
}
