//! Heap allocations per event in the engine: the default profile's fleet through one
//! `PartitionEngine`, events decoded beforehand (what criterion's `engine/sim/apply` times).
//!
//!   cargo bench --bench allocs -- 2000        # runs in the simulated fleet (default 2000)
//!
//! Counts what the global allocator (the binary's, mimalloc) is asked for while the engine
//! applies the events: allocations, reallocations and bytes requested, per event, and the
//! allocations by size. A fresh block and its free cost tens of nanoseconds each, against a
//! few microseconds per event, so this is where per-step garbage shows first.
use eddy::contract::{decode, Event};
use eddy::engine::{EngineConfig, PartitionEngine};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static REALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
/// Allocations by size: bucket `i` holds sizes in [2^(i-1), 2^i).
static BY_SIZE: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];

// SAFETY: every call is passed on unchanged to mimalloc; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.load(Relaxed) {
            ALLOCS.fetch_add(1, Relaxed);
            BYTES.fetch_add(l.size() as u64, Relaxed);
            let bucket = (usize::BITS - l.size().leading_zeros()) as usize;
            BY_SIZE[bucket.min(BY_SIZE.len() - 1)].fetch_add(1, Relaxed);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { mimalloc::MiMalloc.alloc(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { mimalloc::MiMalloc.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTING.load(Relaxed) {
            REALLOCS.fetch_add(1, Relaxed);
            BYTES.fetch_add(n.saturating_sub(l.size()) as u64, Relaxed);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { mimalloc::MiMalloc.realloc(p, l, n) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn main() {
    let runs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2_000);
    let args = eddy::simulate::SimulateArgs {
        runs,
        ..Default::default()
    };
    let events: Vec<Event> = eddy::simulate::generate(&args)
        .into_iter()
        .map(|(_, _, l)| decode(l.as_bytes()).expect("the simulator writes valid events"))
        .collect();
    let mut engine = PartitionEngine::new(Arc::new(EngineConfig::default()));
    let mut out = Vec::new();
    let mut outputs = 0;
    COUNTING.store(true, Relaxed);
    for ev in &events {
        engine.apply(ev, &mut out);
        outputs += out.len();
        out.clear();
    }
    COUNTING.store(false, Relaxed);
    let n = events.len().max(1) as f64;
    let per = |c: &AtomicU64| c.load(Relaxed) as f64 / n;
    println!(
        "{runs} runs, {} events, {outputs} output events",
        events.len()
    );
    println!("| per event | count |");
    println!("|---|---|");
    println!("| allocations | {:.2} |", per(&ALLOCS));
    println!("| reallocations | {:.2} |", per(&REALLOCS));
    println!("| bytes requested | {:.0} |", per(&BYTES));
    println!();
    println!("| allocation size, bytes | per event |");
    println!("|---|---|");
    for (i, c) in BY_SIZE.iter().enumerate() {
        if c.load(Relaxed) > 0 {
            let lo = if i == 0 { 0 } else { 1u64 << (i - 1) };
            println!("| {lo}–{} | {:.3} |", (1u64 << i) - 1, per(c));
        }
    }
}
