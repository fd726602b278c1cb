//! keelwave's rule: the second occurrence of a raw fingerprint in a run, with the first
//! occurrence as its start. Kept for parity with keelwave's `/loops`, as an `info` signal only:
//! on its own it would call every healthy poll and retry a loop, so it never decides
//! `loop_detected` (and never corroborates other detectors).
use super::{grow_exact_thin, Finding, VecMap};
use crate::contract::{Severity, Step};
use crate::engine::fingerprint::StepFingerprints;
use serde::{Deserialize, Serialize};
use thin_vec::ThinVec;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeelwaveConfig {
    pub(crate) enabled: bool,
    pub(crate) severity: Severity,
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

/// Record shape in `changelog::state::keelwave`; fields are crate-visible for it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeelwaveState {
    pub(crate) first: First,
}

/// First 8 bytes of the fingerprint -> first step index, in fingerprint order (8 bytes of
/// prefix instead of a 64-char hex string; a 64-bit prefix collision is negligible at 4096
/// entries).
#[derive(Debug, Clone)]
pub(crate) enum First {
    /// While every step kept fits in 32 bits (every real run's): 12 bytes an entry, as
    /// (prefix high, prefix low, step) words, where a (u64, u64) pair takes 16.
    Narrow(ThinVec<[u32; 3]>),
    /// From the first step that does not fit.
    Wide(VecMap<u64, u64>),
    /// The run was marked: like keelwave's client, only the first duplicate of a run marks
    /// it, so the fingerprints seen are of no use after it and none is kept.
    Fired,
}

impl Default for First {
    fn default() -> Self {
        First::Narrow(ThinVec::new())
    }
}

fn narrow_key(e: &[u32; 3]) -> u64 {
    u64::from(e[0]) << 32 | u64::from(e[1])
}

impl First {
    fn len(&self) -> usize {
        match self {
            First::Narrow(v) => v.len(),
            First::Wide(m) => m.len(),
            First::Fired => 0,
        }
    }

    fn get(&self, key: u64) -> Option<u64> {
        match self {
            First::Narrow(v) => v
                .binary_search_by_key(&key, narrow_key)
                .ok()
                .map(|i| u64::from(v[i][2])),
            First::Wide(m) => m.get(&key).copied(),
            First::Fired => None,
        }
    }

    /// Keeps `step` as `key`'s first, unless it has one.
    pub(crate) fn insert(&mut self, key: u64, step: u64) {
        if let First::Narrow(v) = self {
            let Err(at) = v.binary_search_by_key(&key, narrow_key) else {
                return;
            };
            if let Ok(s) = u32::try_from(step) {
                grow_exact_thin(v);
                v.insert(at, [(key >> 32) as u32, key as u32, s]);
                return;
            }
            *self = First::Wide(self.entries().collect());
        }
        if let First::Wide(m) = self {
            m.get_or_insert_with(key, || step);
        }
    }

    /// (prefix, first step), in prefix order.
    pub(crate) fn entries(&self) -> Box<dyn Iterator<Item = (u64, u64)> + '_> {
        match self {
            First::Narrow(v) => Box::new(v.iter().map(|e| (narrow_key(e), u64::from(e[2])))),
            First::Wide(m) => Box::new(m.iter().map(|(k, s)| (*k, *s))),
            First::Fired => Box::new(std::iter::empty()),
        }
    }
}

/// Compared as the entries they hold, whichever form holds them.
impl PartialEq for First {
    fn eq(&self, other: &Self) -> bool {
        matches!(self, First::Fired) == matches!(other, First::Fired)
            && self.entries().eq(other.entries())
    }
}

/// The 8-byte prefix a fingerprint is kept by.
pub(crate) fn prefix(fp: &[u8; 32]) -> u64 {
    u64::from_be_bytes([fp[0], fp[1], fp[2], fp[3], fp[4], fp[5], fp[6], fp[7]])
}

impl KeelwaveState {
    pub(crate) fn on_step(
        &mut self,
        cfg: &KeelwaveConfig,
        step: &Step,
        fps: &StepFingerprints,
        out: &mut Vec<Finding>,
    ) {
        let (true, Some(fp), Some(tool)) = (cfg.enabled, fps.raw, step.tool_name.as_deref()) else {
            return;
        };
        if matches!(self.first, First::Fired) {
            return;
        }
        let key = prefix(&fp);
        match self.first.get(key) {
            Some(first) => {
                self.first = First::Fired;
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

    /// Only the first duplicate marks a run; after it no fingerprint is kept.
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
            st.on_step(&cfg, &s, &dcfg.canonical(&s).fps, &mut out);
            assert_eq!(st.first.len(), if i < 2 { i + 1 } else { 0 }, "{i}");
        }
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].step_indices, vec![0, 2]);
        assert_eq!(st.first, First::Fired);
    }

    /// Steps past 32 bits widen the map, exactly; both forms of the same entries are equal.
    #[test]
    fn steps_past_32_bits_are_kept_whole() {
        let (cfg, dcfg) = (KeelwaveConfig::default(), DetectorConfig::default());
        let steps = [5, u64::from(u32::MAX) + 9, 7, u64::MAX - 1];
        let mut st = KeelwaveState::default();
        let mut out = Vec::new();
        for (i, at) in steps.iter().enumerate() {
            let mut s = step("search", &format!(r#"{{"a":{i}}}"#), "null", Some(true));
            s.step_index = *at;
            st.on_step(&cfg, &s, &dcfg.canonical(&s).fps, &mut out);
            assert_eq!(matches!(st.first, First::Wide(_)), i >= 1, "{i}");
        }
        let mut kept: Vec<u64> = st.first.entries().map(|(_, s)| s).collect();
        kept.sort_unstable();
        assert_eq!(kept, vec![5, 7, u64::from(u32::MAX) + 9, u64::MAX - 1]);
        // The duplicate of the wide step reports it exactly.
        let mut s = step("search", r#"{"a":1}"#, "null", Some(true));
        s.step_index = u64::MAX;
        st.on_step(&cfg, &s, &dcfg.canonical(&s).fps, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].step_indices, vec![u64::from(u32::MAX) + 9, u64::MAX]);
        // Narrow and wide forms of the same entries are equal.
        let mut narrow = First::default();
        narrow.insert(3, 1);
        let wide = First::Wide([(3, 1)].into_iter().collect());
        assert_eq!(narrow, wide);
    }
}
