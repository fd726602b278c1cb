//! Output events published to the signals topic (key = run_id), one JSON object each.
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Ordered: a loop counts as *caught* at `Alert` or `Stop`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth recording, not acting on.
    #[default]
    Info,
    /// Looks like a loop forming.
    Warn,
    /// A loop: caught, the run should be looked at.
    Alert,
    /// A loop bad enough that a guard should halt the agent.
    Stop,
}

impl Severity {
    /// The name on the wire and in ClickHouse.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Alert => "alert",
            Severity::Stop => "stop",
        }
    }
    /// Whether this severity counts as a caught loop (`Alert` or `Stop`).
    pub fn is_caught(self) -> bool {
        self >= Severity::Alert
    }
}

/// A detector's finding about one run (`loop_warning` or `loop_detected`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signal {
    /// Deterministic id, so a redelivered signal is recognised as the same one.
    pub event_id: String,
    /// The run's project.
    pub project_id: String,
    /// The run the signal is about.
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) agent_name: Option<String>,
    /// The step that triggered the signal.
    pub step_index: u64,
    /// Event time of the triggering step, RFC 3339 UTC.
    pub(crate) ts: String,
    /// The detector that fired.
    pub detector: String,
    /// How strongly it fired.
    pub severity: Severity,
    /// Stable, human-readable description of what repeats (e.g. `web_search(q=...)`).
    pub pattern: String,
    /// Hex fingerprint of the repeating thing (detector-specific).
    pub fingerprint: String,
    pub(crate) hits: u32,
    /// The steps that make up the pattern.
    pub step_indices: Vec<u64>,
    /// Where the pattern began.
    pub first_step_index: u64,
    pub(crate) evidence: serde_json::Value,
    /// The corrective message a guard hands the agent (what repeats, since which step, the
    /// evidence, what to try instead), built once from the finding (`engine::advice`). Absent
    /// from signals of workers that predate it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub advice: String,
}

/// The run's totals as eddy counted them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Steps seen.
    pub steps: u64,
    pub(crate) tool_calls: u64,
    /// Tokens used.
    pub tokens: u64,
    pub(crate) cost_usd: f64,
    pub(crate) duration_ms: i64,
}

/// A run's end as eddy saw it (`run_terminated`): its verdict, reasons and totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunTerminated {
    /// Deterministic id, so a redelivered event is recognised as the same one.
    pub event_id: String,
    /// The run's project.
    pub project_id: String,
    /// The run that ended.
    pub run_id: String,
    /// The agent that ran it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<String>,
    /// Event time of the event that ended the run (run_finished, or the watermark at timeout).
    pub ts: String,
    pub(crate) started_at: String,
    /// `completed` | `failed` as reported; `abandoned` when the run went idle without finishing.
    pub status: String,
    /// As reported by the run, else eddy's inference.
    pub termination_reason: String,
    /// True when the run reported its own reason, false when eddy inferred it.
    pub termination_reason_reported: bool,
    /// eddy's verdict: any alert or stop fired for the run.
    pub loop_detected: bool,
    /// Where the repetition began.
    pub loop_step_index: Option<u64>,
    /// Step index at which the loop was first caught (alert or stop).
    pub loop_caught_step_index: Option<u64>,
    /// The same two steps as the run's step numbers (1: its first step, in step order), apart
    /// from the indices, which need not count steps (OTLP's are start times). Absent when there
    /// is no loop, or from workers that predate them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_step_number: Option<u64>,
    /// The step number of `loop_caught_step_index`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_caught_step_number: Option<u64>,
    /// The loop flag the agent reported itself, when it did (keelwave bridge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_loop_detected: Option<bool>,
    pub(crate) signals: u32,
    pub(crate) redeliveries: u64,
    /// What eddy counted over the run.
    pub totals: Totals,
    /// The step at which a guard first steered the run (its first `steer` step); absent when
    /// no guard steered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steered_step_index: Option<u64>,
    /// How many `steer` steps the run reported.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub steers: u32,
    /// For a steered run: `recovered` when no alert or stop fired after its first steer,
    /// `looped_again` when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steer_outcome: Option<SteerOutcome>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What followed a steer: did the run get caught again?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SteerOutcome {
    /// No alert or stop fired after the run was first steered.
    Recovered,
    /// An alert or stop fired after it.
    LoopedAgain,
}

impl SteerOutcome {
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SteerOutcome::Recovered => "recovered",
            SteerOutcome::LoopedAgain => "looped_again",
        }
    }
}

/// One event on the signals topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OutputEvent {
    /// A signal below `Alert`.
    LoopWarning(Signal),
    /// A signal at `Alert` or `Stop`: a caught loop.
    LoopDetected(Signal),
    /// The run ended.
    RunTerminated(RunTerminated),
}

impl OutputEvent {
    /// Wraps a signal in the variant its severity calls for.
    pub fn signal(s: Signal) -> Self {
        if s.severity.is_caught() {
            OutputEvent::LoopDetected(s)
        } else {
            OutputEvent::LoopWarning(s)
        }
    }
    /// The event's deterministic id.
    pub fn event_id(&self) -> &str {
        match self {
            OutputEvent::LoopWarning(s) | OutputEvent::LoopDetected(s) => &s.event_id,
            OutputEvent::RunTerminated(t) => &t.event_id,
        }
    }
    /// The run the event is about.
    pub fn run_id(&self) -> &str {
        match self {
            OutputEvent::LoopWarning(s) | OutputEvent::LoopDetected(s) => &s.run_id,
            OutputEvent::RunTerminated(t) => &t.run_id,
        }
    }
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            OutputEvent::LoopWarning(_) => "loop_warning",
            OutputEvent::LoopDetected(_) => "loop_detected",
            OutputEvent::RunTerminated(_) => "run_terminated",
        }
    }
}

/// Deterministic id: a function of the run and what triggered the event only, never of
/// partition, offset or wall clock, so a replay after a crash reproduces the same ids.
pub(crate) fn event_id(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    h.update(b"eddy.v1");
    for p in parts {
        // Length-prefix each part so ("ab","c") and ("a","bc") never collide.
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    hex::encode(&h.finalize()[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_are_prefix_free() {
        assert_ne!(event_id(&["ab", "c"]), event_id(&["a", "bc"]));
        assert_eq!(event_id(&["a", "b"]), event_id(&["a", "b"]));
        assert_eq!(event_id(&["a"]).len(), 32);
    }

    #[test]
    fn kind_follows_severity() {
        let mk = |sev| Signal {
            event_id: "x".into(),
            project_id: "p".into(),
            run_id: "r".into(),
            agent_name: None,
            step_index: 1,
            ts: "t".into(),
            detector: "d".into(),
            severity: sev,
            pattern: "p".into(),
            fingerprint: "f".into(),
            hits: 2,
            step_indices: vec![0, 1],
            first_step_index: 0,
            evidence: serde_json::Value::Null,
            advice: String::new(),
        };
        assert_eq!(
            OutputEvent::signal(mk(Severity::Warn)).kind(),
            "loop_warning"
        );
        assert_eq!(
            OutputEvent::signal(mk(Severity::Alert)).kind(),
            "loop_detected"
        );
        let json = serde_json::to_value(OutputEvent::signal(mk(Severity::Stop))).unwrap();
        assert_eq!(json["kind"], "loop_detected");
        assert_eq!(json["severity"], "stop");
    }
}
