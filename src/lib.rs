//! eddy: catches AI agents stuck in loops, fleet-wide.
//!
//! The modules mirror the pipeline stages (see DESIGN.md):
//! `source` (Kafka in) → `contract` (decode) → `engine` (pure detectors) →
//! `emit` (signals, dead letters, changelog to Kafka; `changelog` is its records' schema) and
//! `sink` (ClickHouse) →
//! `worker` (per-partition ownership and the commit rule). `ingest` is keelwave's ingest API and
//! the OTLP receiver in front of the input topic, `verdict` reads signals back for guards
//! (`agent`), the bridge and `ui`; `fleet` alerts on fleet regressions through `notify`;
//! `daemon` and `admin` are what every daemon shares (signals, grace period, health and
//! metrics); `query` is the analyst's query pack. `replay` runs the engine offline, `local`
//! inside an agent's process. `auth` checks the secrets HTTP clients present (ingest API keys,
//! UI tokens).
//!
//! Without the default `server` feature only the engine, the contract, `changelog` (whose record
//! shapes also give signals their evidence), `replay`, `eval` and `local` are compiled: no Kafka,
//! ClickHouse, HTTP or async runtime (what the in-process bindings build).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(feature = "server")]
pub mod admin;
#[cfg(feature = "server")]
pub mod agent;
#[cfg(feature = "server")]
pub(crate) mod auth;
pub mod changelog;
#[cfg(feature = "server")]
pub mod config;
pub mod contract;
#[cfg(feature = "server")]
pub mod daemon;
#[cfg(feature = "server")]
pub mod emit;
pub mod engine;
pub mod eval;
#[cfg(feature = "server")]
pub mod fleet;
#[cfg(feature = "server")]
pub mod ingest;
pub mod local;
#[cfg(feature = "server")]
pub(crate) mod notify;
#[cfg(feature = "server")]
pub mod query;
pub mod replay;
#[cfg(feature = "server")]
pub mod simulate;
#[cfg(feature = "server")]
pub mod sink;
#[cfg(feature = "server")]
pub mod source;
#[cfg(feature = "server")]
pub mod ui;
#[cfg(feature = "server")]
pub mod verdict;
#[cfg(feature = "server")]
pub mod worker;
