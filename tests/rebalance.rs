//! A revoke drains: when a second worker joins, the first flushes and commits what it did for the
//! partitions it gives away before handing them over, so the newcomer starts exactly there and
//! nothing is redone, even in at_least_once mode and even though the first worker's own flush
//! timer never fired.
mod common;

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use std::time::{Duration, Instant};

/// Whether the group's committed offset of every input partition is its end.
fn committed_to_end(cfg: &eddy::config::Config) -> bool {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &cfg.kafka.brokers)
        .set("group.id", &cfg.kafka.group_id)
        .set("enable.auto.commit", "false")
        .create()
        .expect("offset reader");
    let mut tpl = TopicPartitionList::new();
    for p in 0..cfg.kafka.topics.partitions {
        tpl.add_partition(&cfg.kafka.topics.input, p);
    }
    let Ok(committed) = c.committed_offsets(tpl, Duration::from_secs(10)) else {
        return false;
    };
    committed.elements().iter().all(|e| {
        let (_, high) = c
            .fetch_watermarks(
                &cfg.kafka.topics.input,
                e.partition(),
                Duration::from_secs(10),
            )
            .expect("watermarks");
        e.offset() == Offset::Offset(high)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_drains_and_commits_before_the_handover() {
    let ep = endpoints().await;
    let mut cfg = test_config(&ep, "rebalance");
    // The first worker's own flush never comes during the test: only a drain commits. (The
    // flush interval must stay below half the session timeout; nobody is killed here, so a long
    // session costs nothing.)
    cfg.kafka.session_timeout_ms = 240_000;
    cfg.worker.flush_interval_ms = 100_000;
    cfg.worker.batch_max_messages = 1_000_000;
    let fleet = Fleet::new(&cfg, 300, 4242, 2);
    produce(&cfg, &fleet.lines).await;

    let mut first = spawn_worker(&cfg, &[]);
    // at_least_once publishes signals as detected: once all are out, everything was processed.
    read_all_expected(
        &cfg,
        &fleet.want,
        Duration::from_secs(120),
        Some(&mut first),
    );
    assert!(
        !committed_to_end(&cfg),
        "nothing is committed before the rebalance (the flush timer is 100 s)"
    );

    let mut second = spawn_worker(&cfg, &[]);
    let deadline = Instant::now() + Duration::from_secs(90);
    while !committed_to_end(&cfg) {
        assert!(
            Instant::now() < deadline,
            "the revoke did not drain: offsets not committed within 90 s of the second worker joining"
        );
        assert!(
            first.try_wait().expect("wait").is_none(),
            "first worker died"
        );
        assert!(
            second.try_wait().expect("wait").is_none(),
            "second worker died"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Committed means durable: ClickHouse has every step and run already.
    assert_eq!(
        ch_count(&cfg, "SELECT count() FROM {db}.steps FINAL").await,
        fleet.steps
    );
    assert_eq!(
        ch_count(&cfg, "SELECT count() FROM {db}.runs FINAL").await,
        fleet.runs as u64
    );

    stop_gracefully(&mut second);
    stop_gracefully(&mut first);
    let got = read_all_expected(&cfg, &fleet.want, Duration::from_secs(60), None);
    let dupes = assert_exact_or_duplicate(&got, &fleet.want);
    assert_eq!(
        dupes, 0,
        "the newcomer redid work the first worker had done: {dupes} duplicate output events"
    );
}
