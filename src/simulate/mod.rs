//! `eddy simulate`: a seeded fleet of agent runs, healthy and looping, as v1 events.
//!
//! Runs are interleaved by event time like a real fleet. Each run follows one scenario
//! ([`Kind`]): healthy work of several shapes (research, polling, retries that recover,
//! pagination, multi-agent delegation) or a loop of one kind injected after a productive prefix.
//! Steps mix thoughts and tool calls, and payloads are drawn fresh per step (sentences, file
//! contents, search results, ids), so the trace carries the byte sizes and the variety of real
//! traffic rather than a few templates repeated.
//!
//! Every run carries its ground truth in `metadata` of `run_started`
//! (`{"sim_kind": ..., "sim_loop_from": N or null}`) so demos and tests can score what was caught
//! without a side file; `--labels` also writes it in `eddy eval`'s `labels.jsonl` format.
//!
//! What a run looks like (`kind`, `steps`, `scenarios`) is kept apart from which runs
//! a fleet has (`fleet`) and from the command around it (`args`, `driver`,
//! `progress`): tests and benches generate fleets without touching files, topics or terminals.
mod args;
mod driver;
mod fleet;
mod kind;
mod progress;
mod scenarios;
mod steps;

pub use args::SimulateArgs;
pub use driver::{produce_fleet, summary};
pub use fleet::{generate, Fleet};
pub use kind::Kind;
