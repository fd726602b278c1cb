//! keelwave's rule: the second occurrence of a raw fingerprint in a run, with the first
//! occurrence as its start. Kept for parity with keelwave's `/loops`, as an `info` signal only:
//! on its own it would call every healthy poll and retry a loop, so it never decides
//! `loop_detected` (and never corroborates other detectors).
use super::{Finding, VecMap};
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
#[serde(from = "KeelwaveRecord")]
pub struct KeelwaveState {
    /// First 8 bytes of the fingerprint -> first step index (16 bytes per entry instead of a
    /// 64-char hex string; a 64-bit prefix collision is negligible at 4096 entries).
    first: VecMap<u64, u64>,
    fired: bool,
}

/// What a record holds, including `first_seen` (hex keys) from records written before `first`
/// existed: converted on reading, so the state carries no field for them.
#[derive(Deserialize)]
struct KeelwaveRecord {
    #[serde(default)]
    first: VecMap<u64, u64>,
    #[serde(default)]
    first_seen: BTreeMap<String, u64>,
    #[serde(default)]
    fired: bool,
}

impl From<KeelwaveRecord> for KeelwaveState {
    fn from(r: KeelwaveRecord) -> Self {
        let mut first = r.first;
        for (hexkey, step) in r.first_seen {
            if let Ok(b) = hex::decode(&hexkey) {
                if let Ok(fp) = <[u8; 32]>::try_from(b.as_slice()) {
                    first.insert(prefix(&fp), step);
                }
            }
        }
        Self {
            // Records written before a fired run dropped its fingerprints still hold them.
            first: if r.fired { VecMap::default() } else { first },
            fired: r.fired,
        }
    }
}

fn prefix(fp: &[u8; 32]) -> u64 {
    u64::from_be_bytes([fp[0], fp[1], fp[2], fp[3], fp[4], fp[5], fp[6], fp[7]])
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
        // Like keelwave's client: only the first duplicate of the run marks it, so after it
        // the fingerprints seen are of no use and are not kept.
        if self.fired {
            return;
        }
        let key = prefix(&fp);
        match self.first.get(&key) {
            Some(&first) => {
                self.fired = true;
                self.first = VecMap::default();
                out.push(Finding {
                    detector: "keelwave_fingerprint",
                    severity: cfg.severity,
                    pattern: format!("{tool}(same input)"),
                    fingerprint: hex::encode(fp),
                    hits: 2,
                    step_indices: vec![first, step.step_index],
                    first_step_index: first,
                    evidence: serde_json::json!({"rule": "second occurrence of sha256(tool_name || 0x00 || tool_input)"}),
                    stop_reason: None,
                    corroborating: false,
                });
            }
            None => {
                if self.first.len() < cfg.max_fingerprints {
                    self.first.insert(key, step.step_index);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::detectors::view::tests::step;
    use crate::engine::detectors::DetectorConfig;

    /// Only the first duplicate marks a run; after it no fingerprint is kept, and a record of
    /// a fired run that still lists some (written before) restores without them.
    #[test]
    fn a_fired_run_keeps_no_fingerprints() {
        let (cfg, dcfg) = (KeelwaveConfig::default(), DetectorConfig::default());
        let mut st = KeelwaveState::default();
        let mut out = Vec::new();
        let inputs = [
            r#"{"a":1}"#,
            r#"{"a":2}"#,
            r#"{"a":1}"#,
            r#"{"a":3}"#,
            r#"{"a":2}"#,
        ];
        for (i, input) in inputs.iter().enumerate() {
            let mut s = step("search", input, "null", Some(true));
            s.step_index = i as u64;
            st.on_step(&cfg, &s, &StepFingerprints::compute(&s, &dcfg), &mut out);
            assert_eq!(st.first.len(), if i < 2 { i + 1 } else { 0 }, "{i}");
        }
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].step_indices, vec![0, 2]);
        assert!(st.fired);
        let r: KeelwaveState =
            serde_json::from_str(r#"{"first":{"1":0,"2":1},"fired":true}"#).unwrap();
        assert!(r.fired && r.first.is_empty());
        let r: KeelwaveState =
            serde_json::from_str(r#"{"first":{"1":0,"2":1},"fired":false}"#).unwrap();
        assert_eq!(r.first.len(), 2);
    }
}
