//! The detectors' configuration (`[engine.detectors]`): per-tool policies, the words that
//! make a tool repeatable, each detector's own settings, and the per project / agent overrides
//! resolved into one configuration per run. Apart from the state and the step logic, which
//! read it but never change it.
use super::class::ToolClass;
use super::levels::Levels;
use super::{budget, content, context, cycle, failure, handoff, history, keelwave, neardup};
use super::{policy, repeat, stall};
use crate::contract::Step;
use crate::engine::fingerprint::{Canonical, FingerprintConfig, KeySets};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Per-tool policy (`[engine.detectors.tools."<tool_name>"]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ToolPolicy {
    /// `normal`, `poll`, `step`, `scroll` (repeatable: much higher thresholds) or `exempt`
    /// (never counted). Unset: inferred from the tool name and its action argument.
    pub(crate) class: Option<ToolClass>,
    /// JSON pointer to the argument that identifies the operation (e.g. `/path`); unset: the
    /// whole canonical input.
    pub(crate) primary: Option<String>,
    /// Extra volatile keys for this tool's input and output.
    pub(crate) volatile_keys: Vec<String>,
    /// Extra recoverable-error phrases for this tool (word-level match).
    pub(crate) recoverable_errors: Vec<String>,
    /// Repeated-operation thresholds for this tool.
    pub(crate) repeat: Option<Levels>,
}

/// Words that make a tool (or its `action`/`command` argument) a repeatable one.
///
/// The lists are private (to the detectors, whose step view reads them) so that a word set
/// never changes under its key: the step view's tool-name memo is keyed by it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(from = "ClassLists", into = "ClassLists")]
pub(crate) struct ClassWords {
    pub(super) poll: Vec<String>,
    pub(super) step: Vec<String>,
    pub(super) scroll: Vec<String>,
    /// A hash of the three lists: equal lists, equal keys.
    key: u64,
}

/// [`ClassWords`] as configured (a list left out keeps its default).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ClassLists {
    poll: Vec<String>,
    step: Vec<String>,
    scroll: Vec<String>,
}

impl From<ClassLists> for ClassWords {
    fn from(l: ClassLists) -> Self {
        Self::new(l.poll, l.step, l.scroll)
    }
}

impl From<ClassWords> for ClassLists {
    fn from(w: ClassWords) -> Self {
        Self {
            poll: w.poll,
            step: w.step,
            scroll: w.scroll,
        }
    }
}

impl Default for ClassLists {
    fn default() -> Self {
        ClassWords::default().into()
    }
}

impl PartialEq for ClassWords {
    fn eq(&self, other: &Self) -> bool {
        (&self.poll, &self.step, &self.scroll) == (&other.poll, &other.step, &other.scroll)
    }
}

impl ClassWords {
    pub(crate) fn new(poll: Vec<String>, step: Vec<String>, scroll: Vec<String>) -> Self {
        let mut parts: Vec<&[u8]> = Vec::new();
        for (tag, list) in [("poll", &poll), ("step", &step), ("scroll", &scroll)] {
            parts.push(tag.as_bytes());
            parts.extend(list.iter().map(|w| w.as_bytes()));
        }
        let key = crate::engine::text::key64("class_words", &parts);
        Self {
            poll,
            step,
            scroll,
            key,
        }
    }

    /// Equal for equal word lists (the memos of tool names key on it).
    pub(crate) fn key(&self) -> u64 {
        self.key
    }
}

impl Default for ClassWords {
    fn default() -> Self {
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect();
        Self::new(
            v(&[
                "poll",
                "status",
                "wait",
                "sleep",
                "progress",
                "health",
                "healthcheck",
                "ping",
                "watch",
                "tail",
                "await",
                "heartbeat",
                "monitor",
                "log",
                "logs",
            ]),
            v(&[
                "step",
                "next",
                "stepi",
                "nexti",
                "continue",
                "cont",
                "finish",
                "until",
                "step_over",
                "step_into",
                "step_out",
            ]),
            v(&[
                "scroll",
                "scroll_down",
                "scroll_up",
                "page_down",
                "page_up",
                "pagedown",
                "pageup",
            ]),
        )
    }
}

/// Per project / agent overrides: `set` is a partial `[engine.detectors]` table merged over the
/// defaults for runs that match (`project` and/or `agent`; later entries win).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Override {
    #[serde(default)]
    pub(crate) project: Option<String>,
    #[serde(default)]
    pub(crate) agent: Option<String>,
    pub(crate) set: serde_json::Value,
}

/// Every detector's settings (`[engine.detectors]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DetectorConfig {
    /// How steps are fingerprinted (which keys are volatile, how much is read).
    pub fingerprint: FingerprintConfig,
    pub(crate) tools: BTreeMap<String, ToolPolicy>,
    pub(crate) classes: ClassWords,
    /// Recoverable-error phrases for every tool (loopctl's "old text not found" family).
    pub(crate) recoverable_errors: Vec<String>,
    /// keelwave's exact-repeat rule.
    pub keelwave: keelwave::KeelwaveConfig,
    pub(crate) repeat: repeat::RepeatConfig,
    pub(crate) stall: stall::StallConfig,
    pub(crate) failure: failure::FailureConfig,
    pub(crate) cycle: cycle::CycleConfig,
    pub(crate) handoff: handoff::HandoffConfig,
    pub(crate) neardup: neardup::NearDupConfig,
    pub(crate) content: content::ContentConfig,
    pub(crate) context: context::ContextConfig,
    /// Hard limits on a run's steps.
    pub budget: budget::BudgetConfig,
    pub(crate) policy: policy::PolicyConfig,
    pub(crate) overrides: Vec<Override>,
}

impl DetectorConfig {
    /// The key sets of this configuration's volatile and redacted keys.
    pub(crate) fn key_sets(&self) -> KeySets {
        let tools = self.tools.iter();
        KeySets::new(
            &self.fingerprint,
            tools.map(|(t, p)| (t.as_str(), p.volatile_keys.as_slice())),
        )
    }

    /// A step's canonical form under this configuration, for one-off use (tests, tools): the
    /// engine keeps the key sets per resolved configuration and calls
    /// `Canonical::compute_in`.
    pub fn canonical<'s>(&self, step: &'s Step) -> Canonical<'s> {
        Canonical::compute_with(step, &self.fingerprint, &self.key_sets())
    }
}

impl Default for DetectorConfig {
    fn default() -> Self {
        let rec = [
            "old text not found",
            "old_string not found",
            "old string not found",
            "string to replace not found",
            "could not find the text",
            "no match found for",
            "did not match any",
            "file has been modified since",
            "file has not been read",
            "read the file first",
            "must read the file",
            "found multiple matches",
            "is not unique",
            "multiple occurrences",
        ];
        Self {
            fingerprint: FingerprintConfig::default(),
            tools: BTreeMap::new(),
            classes: ClassWords::default(),
            recoverable_errors: rec.iter().map(|s| s.to_string()).collect(),
            keelwave: Default::default(),
            repeat: Default::default(),
            stall: Default::default(),
            failure: Default::default(),
            cycle: Default::default(),
            handoff: Default::default(),
            neardup: Default::default(),
            content: Default::default(),
            context: Default::default(),
            budget: Default::default(),
            policy: Default::default(),
            overrides: Vec::new(),
        }
    }
}

fn merge(base: &mut serde_json::Value, over: &serde_json::Value) {
    match (base, over) {
        (serde_json::Value::Object(b), serde_json::Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

impl DetectorConfig {
    /// The configuration for one run: the matching overrides merged in order.
    pub(crate) fn resolve(
        &self,
        project: &str,
        agent: Option<&str>,
    ) -> Result<DetectorConfig, String> {
        let matching: Vec<&Override> = self
            .overrides
            .iter()
            .filter(|o| {
                o.project.as_deref().is_none_or(|p| p == project)
                    && o.agent.as_deref().is_none_or(|a| Some(a) == agent)
            })
            .collect();
        if matching.is_empty() {
            return Ok(self.clone());
        }
        let mut base = serde_json::to_value(self).map_err(|e| e.to_string())?;
        for o in matching {
            merge(&mut base, &o.set);
        }
        let mut cfg: DetectorConfig = serde_json::from_value(base).map_err(|e| e.to_string())?;
        cfg.overrides.clear();
        Ok(cfg)
    }

    /// Check every override once, so a typo fails at start-up instead of being ignored.
    pub(crate) fn validate(&self) -> Result<(), String> {
        self.check_windows()
            .map_err(|e| format!("engine.detectors.{e}"))?;
        for (i, o) in self.overrides.iter().enumerate() {
            let mut base = serde_json::to_value(self).map_err(|e| e.to_string())?;
            merge(&mut base, &o.set);
            serde_json::from_value::<DetectorConfig>(base)
                .map_err(|e| e.to_string())
                .and_then(|c| c.check_windows())
                .map_err(|e| format!("engine.detectors.overrides[{i}]: {e}"))?;
        }
        Ok(())
    }

    /// Windows of recent calls hold at most [`history::MAX_WINDOW`]; a longer one would be
    /// cut silently.
    fn check_windows(&self) -> Result<(), String> {
        let windows = [
            ("repeat.window", self.repeat.window),
            ("repeat.window_repeatable", self.repeat.window_repeatable),
            ("stall.window", self.stall.window),
            ("context.window", self.context.window),
            ("neardup.window", self.neardup.window),
            ("cycle levels x max_len", cycle::window(&self.cycle)),
        ];
        match windows.iter().find(|(_, w)| *w > history::MAX_WINDOW) {
            Some((name, w)) => Err(format!(
                "{name} = {w}: a window holds at most {} calls",
                history::MAX_WINDOW
            )),
            None => Ok(()),
        }
    }
}

/// A run's detector configuration with what is derived from it once per configuration
/// instead of once per step.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub(crate) cfg: DetectorConfig,
    pub(crate) keys: KeySets,
}

impl Resolved {
    pub(crate) fn new(cfg: DetectorConfig) -> Self {
        let keys = cfg.key_sets();
        Self { cfg, keys }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_longer_than_the_history_holds_are_refused() {
        let mut cfg = DetectorConfig::default();
        assert!(cfg.validate().is_ok());
        cfg.repeat.window = history::MAX_WINDOW + 1;
        let err = cfg.validate().unwrap_err();
        assert!(err.contains("engine.detectors.repeat.window"), "{err}");
        let mut cfg = DetectorConfig::default();
        cfg.overrides.push(Override {
            project: Some("p".into()),
            agent: None,
            set: serde_json::json!({"cycle": {"normal": {"stop": 100000}}}),
        });
        let err = cfg.validate().unwrap_err();
        assert!(
            err.contains("overrides[0]") && err.contains("cycle"),
            "{err}"
        );
    }

    #[test]
    fn overrides_merge_per_project_and_agent() {
        let mut cfg = DetectorConfig::default();
        cfg.overrides.push(Override {
            project: Some("p".into()),
            agent: None,
            set: serde_json::json!({"repeat": {"normal": {"warn": 7}}}),
        });
        cfg.overrides.push(Override {
            project: None,
            agent: Some("poller".into()),
            set: serde_json::json!({"repeat": {"normal": {"alert": 9}}}),
        });
        assert!(cfg.validate().is_ok());
        let r = cfg.resolve("p", Some("poller")).unwrap();
        assert_eq!(r.repeat.normal.warn, 7);
        assert_eq!(r.repeat.normal.alert, 9);
        let q = cfg.resolve("q", None).unwrap();
        assert_eq!(q.repeat.normal, repeat::RepeatConfig::default().normal);
        cfg.overrides.push(Override {
            project: None,
            agent: None,
            set: serde_json::json!({"repeat": {"nope": 1}}),
        });
        assert!(cfg.validate().is_err());
    }
}
