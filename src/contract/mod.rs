//! The v1 wire contract: what agents put on the input topic and what eddy publishes.
//!
//! Field names follow keelwave's ingest API so its users can switch without renaming anything.
#[cfg(feature = "server")]
pub(crate) mod encode;
pub mod input;
pub(crate) mod limits;
pub(crate) mod output;
mod scan;

#[cfg(feature = "server")]
pub(crate) use encode::{encode, WireEvent};
pub use input::{
    decode, DecodeError, Event, JsonText, RunFinished, RunKey, RunStarted, RunStatus, Step,
};
#[cfg(feature = "server")]
pub(crate) use input::{ReportedTotals, TerminationReason};
pub(crate) use output::Totals;
pub use output::{OutputEvent, RunTerminated, Severity, Signal, SteerOutcome};
