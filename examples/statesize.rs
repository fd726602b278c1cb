//! Where an open run's memory goes: live heap bytes per open run after replaying a trace of
//! never-finishing runs, split by component. Complements `bench/memory.sh` (which measures RSS,
//! allocator overhead included) by saying *which* state to shrink.
//!
//!   eddy simulate --runs 20000 --seed 100 --unfinished-rate 1 --out open.jsonl
//!   cargo run --release --example statesize -- open.jsonl
//!
//! Components are measured by cloning them (a clone allocates exactly `len`, so spare capacity
//! shows up only in the total), in malloc chunks: glibc rounds every block up to 16 bytes plus
//! an 8-byte header, 32 at least, which is what RSS pays (this total tracks `bench/memory.sh`'s
//! slope within a few percent). The live-byte count is printed too.
use eddy::contract::decode;
use eddy::engine::{EngineConfig, PartitionEngine, RunState};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::sync::Arc;

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
/// Live allocations, and their bytes as glibc's malloc rounds them (16-byte chunks with an
/// 8-byte header, 32 at least): what RSS pays beyond the bytes asked for.
static COUNT: AtomicIsize = AtomicIsize::new(0);
static CHUNKS: AtomicIsize = AtomicIsize::new(0);

fn chunk(n: usize) -> isize {
    ((n + 8 + 15) & !15).max(32) as isize
}

// SAFETY: forwards to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Relaxed);
        COUNT.fetch_add(1, Relaxed);
        CHUNKS.fetch_add(chunk(l.size()), Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Relaxed);
        COUNT.fetch_sub(1, Relaxed);
        CHUNKS.fetch_sub(chunk(l.size()), Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as isize - l.size() as isize, Relaxed);
        CHUNKS.fetch_add(chunk(n) - chunk(l.size()), Relaxed);
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Malloc-chunk bytes a clone of `x` allocates.
fn heap<T: Clone>(x: &T) -> isize {
    let a = CHUNKS.load(Relaxed);
    let c = x.clone();
    let b = CHUNKS.load(Relaxed);
    drop(c);
    b - a
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: statesize TRACE.jsonl (see the header of examples/statesize.rs)")?;
    let data = std::fs::read(&path)?;
    let cfg = EngineConfig {
        max_open_runs: 0,
        ..EngineConfig::default()
    };
    let before = LIVE.load(Relaxed);
    let (count0, chunks0) = (COUNT.load(Relaxed), CHUNKS.load(Relaxed));
    let mut e = PartitionEngine::new(Arc::new(cfg));
    let mut out = Vec::new();
    for line in data.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        if let Ok(ev) = decode(line) {
            e.apply(&ev, &mut out);
            out.clear();
        }
    }
    let total = LIVE.load(Relaxed) - before;
    let (count, chunks) = (COUNT.load(Relaxed) - count0, CHUNKS.load(Relaxed) - chunks0);
    let n = (e.open_runs() as isize).max(1);
    let steps: u64 = e.runs().map(|(_, r)| u64::from(r.steps)).sum();
    let per = |f: &dyn Fn(&RunState) -> isize| e.runs().map(|(_, r)| f(r)).sum::<isize>() / n;
    println!(
        "{} open runs, {:.1} steps each; live heap {} B/run",
        n,
        steps as f64 / n as f64,
        total / n
    );
    println!(
        "{:.1} allocations per run; {} B/run in malloc chunks (what RSS pays)",
        count as f64 / n as f64,
        chunks / n
    );
    println!(
        "{:<22} {:>6} B/run (inline {} B)",
        "run state (boxed)",
        per(&|r| heap(&Box::new(r.clone()))),
        std::mem::size_of::<RunState>()
    );
    println!(
        "{:<22} {:>6} B/run",
        "keys, indexes, slack",
        chunks / n - per(&|r| heap(&Box::new(r.clone())))
    );
    let d = |f: fn(&RunState) -> isize| per(&f);
    // Agent names are shared by the partition's runs (`Names`): no row of their own.
    let rows: [(&str, isize); 14] = [
        ("seen", d(|r| heap(&r.seen))),
        ("minute", d(|r| heap(&r.minute))),
        ("keelwave", d(|r| heap(&r.detectors.keelwave))),
        ("progress", d(|r| heap(&r.detectors.progress))),
        ("repeat", d(|r| heap(&r.detectors.repeat))),
        ("stall", d(|r| heap(&r.detectors.stall))),
        ("failure", d(|r| heap(&r.detectors.failure))),
        ("cycle", d(|r| heap(&r.detectors.cycle))),
        ("handoff", d(|r| heap(&r.detectors.handoff))),
        ("neardup", d(|r| heap(&r.detectors.neardup))),
        ("content", d(|r| heap(&r.detectors.content))),
        ("context", d(|r| heap(&r.detectors.context))),
        ("budget", d(|r| heap(&r.detectors.budget))),
        ("policy", d(|r| heap(&r.detectors.policy))),
    ];
    for (k, v) in rows {
        println!("  {k:<20} {v:>6} B/run heap");
    }
    // The shared call history is private to the detectors: it is what the boxed state holds
    // beyond its own block and the rows above.
    let boxed = per(&|r| heap(&Box::new(r.clone())));
    let own = heap(&Box::new(RunState::new(0)));
    let listed: isize = rows.iter().map(|(_, v)| v).sum();
    println!(
        "  {:<20} {:>6} B/run heap",
        "call history",
        boxed - own - listed
    );
    Ok(())
}
