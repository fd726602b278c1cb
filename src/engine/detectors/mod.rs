//! Detectors. Each one reads a step (through a `StepView` computed once per step) and the
//! run's detector state, and reports `Finding`s; the policy layer (`policy`) combines them
//! and the engine turns them into signals with deterministic ids.
//!
//! All state uses ordered maps only (so its records, written by `changelog::state`, and
//! iteration are deterministic) and is bounded by fixed windows and caps.
//!
//! Besides one module per detector: `config` (what they are configured with), `levels`
//! (thresholds and the rising-edge latch), `compact` (the small containers per-run state is
//! made of), `progress` (the run-wide counters they share), `history` (the shared window of
//! recent calls) and `run_detectors` (all of a run's detector state and the step through it).
//! Their items are re-exported here, so paths stay `detectors::X`.
pub(crate) mod budget;
mod class;
mod compact;
pub(crate) mod content;
pub(crate) mod context;
pub(crate) mod cycle;
mod detector_config;
pub(crate) mod failure;
pub(crate) mod handoff;
pub(crate) mod history;
pub(crate) mod keelwave;
mod levels;
pub(crate) mod neardup;
pub(crate) mod policy;
mod progress;
pub(crate) mod repeat;
mod run_detectors;
pub(crate) mod stall;
pub(crate) mod view;

use crate::contract::input::TerminationReason;
use crate::contract::Severity;
pub(crate) use class::ToolClass;
pub(crate) use compact::{grow_exact_thin, push_bounded, Lazy, VecMap};
#[cfg(test)]
pub(crate) use detector_config::ClassWords;
pub(crate) use detector_config::ToolPolicy;
pub use detector_config::{DetectorConfig, Resolved};
pub(crate) use levels::{Latch, Levels};
pub(crate) use progress::Progress;
pub(crate) use run_detectors::{Caches, RunDetectors};
pub(crate) use view::{FailClass, OutKind, StepView};

/// What a detector found at one step.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finding {
    pub(crate) detector: &'static str,
    pub(crate) severity: Severity,
    pub(crate) pattern: String,
    pub(crate) fingerprint: String,
    pub(crate) hits: u32,
    pub(crate) step_indices: Vec<u64>,
    /// Where the repetition began (becomes the run's `loop_step_index` when caught).
    pub(crate) first_step_index: u64,
    pub(crate) evidence: serde_json::Value,
    /// Termination reason this finding implies if the run reports none (budgets).
    pub(crate) stop_reason: Option<TerminationReason>,
    /// Whether this finding counts as independent evidence for the policy layer. Diagnostics
    /// (keelwave's rule, an absolute context size) do not.
    pub(crate) corroborating: bool,
}

pub(crate) fn hex64(k: u64) -> String {
    format!("{k:016x}")
}
