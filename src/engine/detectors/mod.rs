//! Detectors. Each one reads a step (through a [`StepView`] computed once per step) and the
//! run's detector state, and reports [`Finding`]s; the policy layer ([`policy`]) combines them
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
pub mod budget;
mod class;
mod compact;
pub mod content;
pub mod context;
pub mod cycle;
mod detector_config;
pub mod failure;
pub mod handoff;
pub mod history;
pub mod keelwave;
mod levels;
pub mod neardup;
pub mod policy;
mod progress;
pub mod repeat;
mod run_detectors;
pub mod stall;
pub mod view;

use crate::contract::input::TerminationReason;
use crate::contract::Severity;
pub use class::ToolClass;
pub use compact::{grow_exact, grow_exact_thin, push_bounded, Lazy, VecMap};
pub use detector_config::{ClassWords, DetectorConfig, Override, Resolved, ToolPolicy};
pub use levels::{Latch, Levels};
pub use progress::Progress;
pub use run_detectors::{Caches, RunDetectors};
pub use view::{FailClass, OutKind, StepView};

/// What a detector found at one step.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub detector: &'static str,
    pub severity: Severity,
    pub pattern: String,
    pub fingerprint: String,
    pub hits: u32,
    pub step_indices: Vec<u64>,
    /// Where the repetition began (becomes the run's `loop_step_index` when caught).
    pub first_step_index: u64,
    pub evidence: serde_json::Value,
    /// Termination reason this finding implies if the run reports none (budgets).
    pub stop_reason: Option<TerminationReason>,
    /// Whether this finding counts as independent evidence for the policy layer. Diagnostics
    /// (keelwave's rule, an absolute context size) do not.
    pub corroborating: bool,
}

pub fn hex64(k: u64) -> String {
    format!("{k:016x}")
}
