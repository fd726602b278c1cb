//! Engine configuration. Every default is documented in `eddy.example.toml`.
use super::detectors::DetectorConfig;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// A run with no event for this long in event time (against its partition's watermark)
    /// ends with `termination_reason = timeout`. 0 disables.
    pub idle_timeout_ms: i64,
    /// How many ended runs per partition are remembered so late events cannot reopen them.
    pub ended_runs_remembered: usize,
    pub detectors: DetectorConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            idle_timeout_ms: 30 * 60 * 1000,
            ended_runs_remembered: 100_000,
            detectors: DetectorConfig::default(),
        }
    }
}
