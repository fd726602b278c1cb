//! eddy: catches AI agents stuck in loops, fleet-wide.
//!
//! The modules mirror the pipeline stages (see DESIGN.md):
//! `source` (Kafka in) → `contract` (decode) → `engine` (pure detectors) →
//! `emit` (signals, dead letters, changelog to Kafka; `changelog` is its records' schema) and
//! `sink` (ClickHouse) →
//! `worker` (per-partition ownership and the commit rule). `ingest` is keelwave's ingest API in
//! front of the input topic, `admin` the health and metrics server of both daemons, `query` the
//! analyst's query pack. `replay` runs the engine offline.
#![forbid(unsafe_code)]

pub mod admin;
pub mod agent;
pub mod changelog;
pub mod config;
pub mod contract;
pub mod emit;
pub mod engine;
pub mod eval;
pub mod fleet;
pub mod ingest;
pub mod query;
pub mod replay;
pub mod simulate;
pub mod sink;
pub mod source;
pub mod ui;
pub mod verdict;
pub mod worker;
