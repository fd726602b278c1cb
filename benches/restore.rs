//! Changelog restore time for N live runs on one partition, against the real broker.
//!
//!   eval "$(scripts/stack env)"; cargo bench --bench restore -- 100000
//!
//! Builds N realistic open runs by replaying simulated traffic through a PartitionEngine, writes
//! their changelog records exactly as the worker does, then times decoding them alone, and
//! `source::restore::restore` (reading the partition to its end and decoding every record),
//! three times each, and prints min/median/max.
use eddy::changelog;
use eddy::config::Config;
use eddy::engine::{EngineConfig, PartitionEngine};
use eddy::source::restore;
use std::sync::Arc;
use std::time::Instant;

// The allocator `eddy run` uses: a restore is mostly allocating the runs' vectors.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    let brokers = std::env::var("EDDY_KAFKA_BROKERS")
        .expect("set EDDY_KAFKA_BROKERS (eval \"$(scripts/stack env)\")");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut cfg = Config::default().kafka;
    cfg.brokers = brokers.clone();
    cfg.group_id = format!("bench-restore-{}", std::process::id());
    cfg.topics.input = format!("bench.restore.{}.steps", std::process::id());
    cfg.topics.output = format!("bench.restore.{}.signals", std::process::id());
    cfg.topics.dlq = format!("bench.restore.{}.dlq", std::process::id());
    cfg.topics.partitions = 1;
    rt.block_on(eddy::source::ensure_topics(&cfg))
        .expect("topics");

    // Open runs: the simulator's runs, cut before their run_finished, some steps in.
    let sim = eddy::simulate::SimulateArgs {
        runs: n,
        loop_rate: 0.3,
        seed: 5,
        projects: 10,
        start_ms: 1_767_225_600_000,
        out: None,
        unfinished_rate: 1.0,
        ..Default::default()
    };
    let mut engine = PartitionEngine::new(Arc::new(EngineConfig {
        idle_timeout_ms: 0,
        ..EngineConfig::default()
    }));
    let mut outs = Vec::new();
    for (_, _, line) in eddy::simulate::generate(&sim) {
        if let Ok(ev) = eddy::contract::decode(line.as_bytes()) {
            engine.apply(&ev, &mut outs);
            outs.clear();
        }
    }
    assert_eq!(engine.open_runs(), n, "every run is open");
    let topic = cfg.changelog_topic();
    let mut bytes = 0usize;
    let records: Vec<_> = engine
        .take_changes()
        .iter()
        .map(|c| changelog::encode(c, 1))
        .collect();
    let mut decode_times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        for (_, v) in &records {
            let state = changelog::decode_run(v.as_deref().expect("a value")).expect("decodes");
            std::hint::black_box(state);
        }
        decode_times.push(t.elapsed().as_secs_f64());
    }
    decode_times.sort_by(f64::total_cmp);
    println!(
        "decode only: min {:.2}s median {:.2}s max {:.2}s",
        decode_times[0], decode_times[1], decode_times[2]
    );
    let n_records = records.len() + 1;
    rt.block_on(async {
        let mut em = eddy::emit::Producer::plain(&cfg).expect("producer");
        for (k, v) in &records {
            bytes += k.len() + v.as_ref().map_or(0, Vec::len);
            em.send_changelog(&topic, 0, k, v.as_deref()).expect("send");
        }
        let meta = changelog::encode_meta(1, engine.meta());
        em.send_changelog(&topic, 0, changelog::META_KEY, Some(&meta))
            .expect("send");
        em.flush().await.expect("delivered");
    });
    let mut fetch_times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let props = [("bootstrap.servers".to_string(), brokers.clone())];
        let n = eddy::source::compacted::read_to_end::<eddy::source::SourceError>(
            &props,
            &topic,
            0,
            std::time::Duration::from_secs(60),
            |_| Ok(()),
        )
        .expect("read");
        fetch_times.push(t.elapsed().as_secs_f64());
        assert_eq!(n as usize, n_records);
    }
    fetch_times.sort_by(f64::total_cmp);
    println!(
        "read only: min {:.2}s median {:.2}s max {:.2}s",
        fetch_times[0], fetch_times[1], fetch_times[2]
    );
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let r = restore::restore(&brokers, &topic, 0).expect("restore");
        times.push(t.elapsed().as_secs_f64());
        assert_eq!(r.runs.len(), n);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "restore of {n} live runs ({:.1} MiB, {:.0} B/run on the changelog): min {:.2}s median {:.2}s max {:.2}s",
        bytes as f64 / 1048576.0,
        bytes as f64 / n as f64,
        times[0],
        times[1],
        times[2]
    );
}
