//! Compressed topics: input produced with each codec librdkafka offers (gzip, snappy, lz4, zstd)
//! is consumed, and eddy's own output can be produced with any of them (here zstd).
//!
//! The codecs are read back from the broker's own log segments (Kafka's `DumpLogSegments`), since
//! no client API tells a message's codec: this needs the broker started by `scripts/stack`.
mod common;

use common::*;
use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

/// The codec of every data batch in a topic's log segments, as the broker stored them.
fn stored_codecs(topic: &str, partitions: i32) -> BTreeSet<String> {
    let root = env!("CARGO_MANIFEST_DIR");
    let state = std::env::var("EDDY_STACK_DIR").unwrap_or_else(|_| "/tmp/eddy-stack".into());
    let mut codecs = BTreeSet::new();
    for p in 0..partitions {
        let dir = std::path::Path::new(&state)
            .join("kafka/data")
            .join(format!("{topic}-{p}"));
        let segments: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| {
                panic!(
                    "{}: {e}; this test reads the broker's log segments, so it needs the broker \
                     started by scripts/stack (run it through scripts/test)",
                    dir.display()
                )
            })
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .map(|p| p.display().to_string())
            .collect();
        if segments.is_empty() {
            continue;
        }
        let out = Command::new(format!("{root}/scripts/stack"))
            .args(["kafka", "kafka.tools.DumpLogSegments", "--files"])
            .arg(segments.join(","))
            .output()
            .expect("scripts/stack kafka kafka.tools.DumpLogSegments");
        assert!(out.status.success(), "DumpLogSegments: {out:?}");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if line.contains("isControl: false") {
                if let Some(codec) = line.split("compresscodec: ").nth(1) {
                    codecs.insert(codec.split_whitespace().next().unwrap_or("").to_string());
                }
            }
        }
    }
    codecs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_codec_is_consumed_and_produced() {
    let ep = endpoints().await;
    let cfg = test_config(&ep, "codecs");
    let fleet = Fleet::new(&cfg, 120, 21, 2);
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    // Each run's events all go through one codec's producer, so per-run order is kept.
    let codecs = ["gzip", "snappy", "lz4", "zstd"];
    let codec_of = |run: &str| run.bytes().map(usize::from).sum::<usize>() % codecs.len();
    for (i, codec) in codecs.iter().enumerate() {
        let mut pcfg = cfg.clone();
        pcfg.kafka
            .producer
            .insert("compression.type".into(), (*codec).into());
        let part: Vec<(String, String)> = fleet
            .lines
            .iter()
            .filter(|(k, _)| codec_of(k) == i)
            .cloned()
            .collect();
        assert!(!part.is_empty(), "{codec} carries some runs");
        let mut e = eddy::emit::Producer::plain(&pcfg.kafka).expect("producer");
        for (k, l) in &part {
            e.send_raw(&cfg.kafka.topics.input, k.as_bytes(), l.as_bytes())
                .expect("send");
        }
        e.flush()
            .await
            .unwrap_or_else(|err| panic!("{codec} delivery: {err}"));
    }
    // eddy's own output compressed with zstd: librdkafka keys have dots, so they come from the
    // config file's [kafka_producer] table, not from the environment.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("eddy.toml");
    std::fs::write(&file, "[kafka_producer]\n\"compression.type\" = \"zstd\"\n").expect("write");
    let mut w = spawn_worker(&cfg, &[("EDDY_CONFIG", file.display().to_string())]);
    let got = read_all_expected(&cfg, &fleet.want, Duration::from_secs(120), Some(&mut w));
    let dupes = assert_exact_or_duplicate(&got, &fleet.want);
    assert_eq!(dupes, 0);
    let steps = fleet.steps;
    assert_eq!(
        await_ch_count(
            &cfg,
            "SELECT count() FROM {db}.steps FINAL",
            steps,
            Duration::from_secs(60)
        )
        .await,
        steps
    );
    stop_gracefully(&mut w);

    let parts = cfg.kafka.topics.partitions;
    let want_in: BTreeSet<String> = codecs.iter().map(|c| c.to_string()).collect();
    assert_eq!(stored_codecs(&cfg.kafka.topics.input, parts), want_in);
    assert_eq!(
        stored_codecs(&cfg.kafka.topics.output, parts),
        BTreeSet::from(["zstd".to_string()]),
        "every output batch is zstd, as configured"
    );
}
