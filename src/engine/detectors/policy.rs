//! The policy layer: one weak signal warns, corroborated evidence alerts or stops.
//! A `warn` becomes `alert`, and an `alert` becomes `stop`, when a *different* detector
//! reported corroborating evidence in the same step or within the last `window` steps
//! (LoopGuard: repetition, cycle or semantic evidence plus no-progress → stop).
use super::Finding;
use crate::contract::Severity;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::VecDeque;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct PolicyConfig {
    pub(crate) enabled: bool,
    /// In steps of the run.
    pub(crate) window: u64,
    pub(crate) escalate_alert_to_stop: bool,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            window: 12,
            escalate_alert_to_stop: true,
        }
    }
}

/// Record shape in `changelog::state::policy`; fields are crate-visible for it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyState {
    /// Detector names are static; one read from a record is mapped back to its static name (see
    /// `changelog::state::policy`), so entries own no string (only a name this version does not
    /// know would).
    pub(crate) recent: VecDeque<(Cow<'static, str>, u64)>,
}

impl PolicyState {
    /// Drops what `detector` reported from the corroborating evidence.
    pub(crate) fn forget(&mut self, detector: &str) {
        self.recent.retain(|(d, _)| d != detector);
    }

    pub(crate) fn apply(&mut self, cfg: &PolicyConfig, seq: u64, findings: &mut [Finding]) {
        if !cfg.enabled {
            return;
        }
        self.recent
            .retain(|(_, s)| seq.saturating_sub(*s) <= cfg.window);
        let now: Vec<&'static str> = findings
            .iter()
            .filter(|f| f.corroborating && f.severity >= Severity::Warn)
            .map(|f| f.detector)
            .collect();
        for f in findings.iter_mut() {
            if !f.corroborating || f.severity < Severity::Warn || f.severity == Severity::Stop {
                continue;
            }
            let by: Vec<String> = self
                .recent
                .iter()
                .map(|(d, _)| d.as_ref())
                .chain(now.iter().copied())
                .filter(|d| *d != f.detector)
                .map(str::to_string)
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            if by.is_empty() {
                continue;
            }
            let to = match f.severity {
                Severity::Warn => Severity::Alert,
                Severity::Alert if cfg.escalate_alert_to_stop => Severity::Stop,
                s => s,
            };
            if to != f.severity {
                if let serde_json::Value::Object(m) = &mut f.evidence {
                    m.insert("detector_severity".into(), serde_json::json!(f.severity));
                    m.insert("corroborated_by".into(), serde_json::json!(by));
                }
                f.severity = to;
            }
        }
        for d in now {
            self.recent.push_back((Cow::Borrowed(d), seq));
        }
        while self.recent.len() > 32 {
            self.recent.pop_front();
        }
    }
}
