//! keelwave's rule: the second occurrence of a raw fingerprint in a run, with the first
//! occurrence as its start. Kept for parity with keelwave's `/loops`, as an `info` signal only:
//! on its own it would call every healthy poll and retry a loop, so it never decides
//! `loop_detected` (and never corroborates other detectors).
use super::Finding;
use crate::contract::{Severity, Step};
use crate::engine::fingerprint::StepFingerprints;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeelwaveConfig {
    pub enabled: bool,
    pub severity: Severity,
    /// Distinct fingerprints remembered per run; beyond it new fingerprints are not tracked.
    pub max_fingerprints: usize,
}

impl Default for KeelwaveConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            severity: Severity::Info,
            max_fingerprints: 4096,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KeelwaveState {
    /// fingerprint (hex) -> first step index.
    first_seen: BTreeMap<String, u64>,
    fired: bool,
}

impl KeelwaveState {
    pub fn on_step(
        &mut self,
        cfg: &KeelwaveConfig,
        step: &Step,
        fps: &StepFingerprints,
        out: &mut Vec<Finding>,
    ) {
        let (true, Some(fp), Some(tool)) = (cfg.enabled, fps.raw, step.tool_name.as_deref()) else {
            return;
        };
        let key = hex::encode(fp);
        match self.first_seen.get(&key) {
            Some(&first) if !self.fired => {
                // Like keelwave's client: only the first duplicate of the run marks it.
                self.fired = true;
                out.push(Finding {
                    detector: "keelwave_fingerprint",
                    severity: cfg.severity,
                    pattern: format!("{tool}(same input)"),
                    fingerprint: key,
                    hits: 2,
                    step_indices: vec![first, step.step_index],
                    first_step_index: first,
                    evidence: serde_json::json!({"rule": "second occurrence of sha256(tool_name || 0x00 || tool_input)"}),
                    stop_reason: None,
                    corroborating: false,
                });
            }
            Some(_) => {}
            None => {
                if self.first_seen.len() < cfg.max_fingerprints {
                    self.first_seen.insert(key, step.step_index);
                }
            }
        }
    }
}
