//! Engine configuration. Every default is documented in `eddy.example.toml`.
use super::detectors::DetectorConfig;
use serde::{Deserialize, Serialize};

/// The engine's settings (`[engine]`): memory bounds, time rules and the detectors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// A run with no event for this long in event time (against its partition's watermark)
    /// ends with `termination_reason = timeout`. 0 disables.
    pub idle_timeout_ms: i64,
    /// How many ended runs per partition are remembered so late events cannot reopen them.
    pub ended_runs_remembered: usize,
    /// Open runs per partition. A new run beyond it first evicts the least recently active run
    /// (fewest events since; ties by key), which ends with `run_terminated` status `abandoned`,
    /// termination_reason `evicted`. 0 = unlimited.
    pub max_open_runs: usize,
    /// Disjoint ranges of seen step indices kept per run (a run of contiguous steps is one
    /// range). Beyond it the two oldest ranges are merged: a never-seen step inside the merged
    /// gap then counts as a redelivery. 0 = unlimited.
    pub max_seen_ranges: usize,
    /// An event more than this far ahead of its partition's watermark does not move it (the
    /// event is still processed), unless `watermark_jump_quorum` distinct runs report such a
    /// jump; then the watermark moves to the earliest of their times. 0 = no guard.
    pub max_future_skew_ms: i64,
    /// How many distinct runs must jump past `max_future_skew_ms` before the watermark follows.
    pub watermark_jump_quorum: usize,
    /// The detectors' settings.
    pub detectors: DetectorConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            idle_timeout_ms: 30 * 60 * 1000,
            ended_runs_remembered: 100_000,
            max_open_runs: 100_000,
            max_seen_ranges: 1024,
            max_future_skew_ms: 60 * 60 * 1000,
            watermark_jump_quorum: 3,
            detectors: DetectorConfig::default(),
        }
    }
}
