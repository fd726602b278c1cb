//! The v1 wire contract: what agents put on the input topic and what eddy publishes.
//!
//! Field names follow keelwave's ingest API so its users can switch without renaming anything.
pub mod encode;
pub mod input;
pub mod limits;
pub mod output;
mod scan;

pub use encode::{encode, WireEvent};
pub use input::{
    decode, DecodeError, Event, JsonText, ReportedTotals, RunFinished, RunKey, RunStarted,
    RunStatus, Step, TerminationReason,
};
pub use output::{OutputEvent, RunTerminated, Severity, Signal, SteerOutcome, Totals};
