//! Engine throughput: every detector on (default `EngineConfig`), simulated fleet traffic.
//!
//!   cargo bench --bench engine                       # full run (criterion)
//!   cargo bench --bench engine -- --test             # smoke: each benchmark once, no timing
//!   EDDY_BENCH_RUNS=500 cargo bench --bench engine   # smaller trace
//!   EDDY_BENCH_SEED=11 cargo bench --bench engine    # another fleet (scripts/build-pgo trains on one)
//!
//! One iteration replays the whole trace (runs interleaved by event time, as `eddy simulate`
//! writes them) through a fresh `PartitionEngine`, so per-run state is built, grows and is torn
//! down exactly as in a worker; criterion reports the throughput in events (elements) per second
//! on one core, and the time per iteration divided by the event count is ns/event.
//!
//! The trace is the simulator's default profile: thoughts and tool calls of every scenario, the
//! optional per-step fields agent SDKs send (`tokens_in_context`, `tool_latency_ms`, multi-agent
//! `agent`/`caller`), fresh payloads per step, about 400 bytes per event.
//!
//! Three measures: `apply` (events decoded beforehand), `decode` alone, and `decode+apply` (what
//! `eddy replay` and the worker do per message).
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use eddy::contract::{decode, Event};
use eddy::engine::{EngineConfig, PartitionEngine};
use std::hint::black_box;
use std::sync::Arc;

// The allocator the `eddy` binary ships with, so the figures are the binary's.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn trace(runs: usize, seed: Option<u64>) -> Vec<String> {
    // The default profile, as `eddy simulate --runs N` writes it.
    let defaults = eddy::simulate::SimulateArgs::default();
    let args = eddy::simulate::SimulateArgs {
        runs,
        seed: seed.unwrap_or(defaults.seed),
        ..defaults
    };
    eddy::simulate::generate(&args)
        .into_iter()
        .map(|(_, _, l)| l)
        .collect()
}

fn replay_decoded(cfg: &Arc<EngineConfig>, events: &[Event]) -> usize {
    let mut engine = PartitionEngine::new(cfg.clone());
    let mut out = Vec::new();
    let mut n = 0;
    for ev in events {
        engine.apply(ev, &mut out);
        n += out.len();
        out.clear();
    }
    n
}

fn replay_raw(cfg: &Arc<EngineConfig>, lines: &[String]) -> usize {
    let mut engine = PartitionEngine::new(cfg.clone());
    let mut out = Vec::new();
    let mut n = 0;
    for l in lines {
        let ev = decode(l.as_bytes()).expect("valid event");
        engine.apply(&ev, &mut out);
        n += out.len();
        out.clear();
    }
    n
}

fn bench(c: &mut Criterion) {
    let runs: usize = std::env::var("EDDY_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000);
    let seed = std::env::var("EDDY_BENCH_SEED")
        .ok()
        .map(|s| s.parse().expect("EDDY_BENCH_SEED is a number"));
    let cfg = Arc::new(EngineConfig::default());
    let raw = trace(runs, seed);
    let (name, lines) = ("sim", &raw);
    let events: Vec<Event> = lines
        .iter()
        .map(|l| decode(l.as_bytes()).expect("valid event"))
        .collect();
    let bytes: usize = lines.iter().map(|l| l.len()).sum();
    let outputs = replay_decoded(&cfg, &events);
    eprintln!(
        "trace {name}: {runs} runs, {} events, {:.0} bytes/event, {outputs} output events",
        events.len(),
        bytes as f64 / events.len() as f64
    );
    let mut g = c.benchmark_group(format!("engine/{name}"));
    g.throughput(Throughput::Elements(events.len() as u64));
    g.sample_size(20);
    g.bench_function(BenchmarkId::from_parameter("apply"), |b| {
        b.iter(|| black_box(replay_decoded(&cfg, black_box(&events))))
    });
    g.bench_function(BenchmarkId::from_parameter("decode"), |b| {
        b.iter(|| {
            for l in lines.iter() {
                black_box(decode(black_box(l.as_bytes())).expect("valid"));
            }
        })
    });
    g.bench_function(BenchmarkId::from_parameter("decode+apply"), |b| {
        b.iter(|| black_box(replay_raw(&cfg, black_box(lines))))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
