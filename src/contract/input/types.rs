//! The decoded events, owned: what the engine and the encoder work with once a message passed
//! every check. Kept apart from the decoders so that readers of the event shape need not wade
//! through how it is parsed.
use serde::Deserialize;
use serde_json::value::RawValue;

/// A JSON value's text exactly as it arrived (keelwave's fingerprint of record hashes these
/// bytes), known to be valid JSON. serde_json's `Box<RawValue>` would do, but it can only be
/// built by parsing the text again, and the fast path's scan has already checked it by
/// serde_json's own rules: that second parse was 3 % of a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonText(Box<str>);

impl JsonText {
    /// Checks `text` as serde_json reads a `RawValue` (surrounding whitespace trimmed).
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str::<&RawValue>(text).map(Self::from)
    }

    /// Text the scanner has checked, without surrounding whitespace.
    pub(super) fn scanned(text: &str) -> Self {
        Self(text.into())
    }

    /// The JSON text as it arrived.
    pub fn get(&self) -> &str {
        &self.0
    }
}

impl From<&RawValue> for JsonText {
    fn from(r: &RawValue) -> Self {
        Self(r.get().into())
    }
}

/// A run is identified by (project_id, run_id); run ids are only unique within a project.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, Deserialize,
)]
pub struct RunKey {
    /// The tenant the run belongs to.
    pub project_id: String,
    /// The run's id, unique within its project.
    pub run_id: String,
}

/// One decoded input event.
#[derive(Debug, Clone)]
pub enum Event {
    /// A run began.
    RunStarted(RunStarted),
    /// The run took one step (a tool call, a message, a thought).
    Step(Step),
    /// The run ended, as the agent reports it.
    RunFinished(RunFinished),
}

impl Event {
    /// The run the event belongs to (its partitioning key).
    pub fn key(&self) -> &RunKey {
        match self {
            Event::RunStarted(e) => &e.key,
            Event::Step(e) => &e.key,
            Event::RunFinished(e) => &e.key,
        }
    }
    /// Event time, in Unix milliseconds.
    pub fn ts_ms(&self) -> i64 {
        match self {
            Event::RunStarted(e) => e.ts_ms,
            Event::Step(e) => e.ts_ms,
            Event::RunFinished(e) => e.ts_ms,
        }
    }
}

/// A `run_started` event.
#[derive(Debug, Clone)]
pub struct RunStarted {
    pub(crate) key: RunKey,
    pub(crate) ts_ms: i64,
    /// The agent running, carried onto the run's rows and signals.
    pub agent_name: String,
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) input: Option<String>,
    /// Free-form metadata, kept as the agent sent it.
    pub metadata: Option<JsonText>,
}

/// `Default` gives an empty step for agents to fill (`Step { step_type: .., ..Default::default() }`).
#[derive(Debug, Clone, Default)]
pub struct Step {
    /// The run the step belongs to.
    pub key: RunKey,
    /// Event time, in Unix milliseconds.
    pub ts_ms: i64,
    /// The step's position in the run (redeliveries repeat it).
    pub step_index: u64,
    /// What the step is (`think`, `tool_call`, `tool_result`, ..., or a guard's `steer`).
    pub step_type: String,
    /// The step's text (a thought, a message, a result).
    pub content: Option<String>,
    /// The tool called, if any.
    pub tool_name: Option<String>,
    /// Exactly the bytes that arrived: keelwave's fingerprint of record hashes them unchanged.
    pub tool_input: Option<JsonText>,
    /// What the tool returned, as it arrived.
    pub tool_output: Option<JsonText>,
    /// Whether the tool call succeeded, if the agent said.
    pub tool_success: Option<bool>,
    /// How long the tool call took.
    pub tool_latency_ms: Option<f64>,
    /// Tokens the step used.
    pub tokens: Option<u64>,
    /// What the step cost, in USD.
    pub cost_usd: Option<f64>,
    /// The size of the model's context at this step.
    pub tokens_in_context: Option<u64>,
    /// The sub-agent that took the step, in multi-agent runs.
    pub agent: Option<String>,
    /// The agent that handed control to it (hand-off cycles).
    pub caller: Option<String>,
    /// Free-form metadata, kept as the agent sent it.
    pub metadata: Option<JsonText>,
    /// On a `steer` step: the `event_id` of the signal the guard steered on.
    pub signal_event_id: Option<String>,
}

/// The `step_type` of a guard's report that it steered the agent (handed it a signal's
/// `advice`). Such a step is the guard's, not the agent's: detectors never see it.
pub(crate) const STEER_STEP_TYPE: &str = "steer";

impl Step {
    /// A guard's report that it steered the agent ([`STEER_STEP_TYPE`]).
    pub(crate) fn is_steer(&self) -> bool {
        self.step_type == STEER_STEP_TYPE
    }
}

/// How the agent says the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The run finished its task.
    Completed,
    /// The run gave up or crashed.
    Failed,
}

/// A `run_finished` event.
#[derive(Debug, Clone)]
pub struct RunFinished {
    pub(crate) key: RunKey,
    pub(crate) ts_ms: i64,
    pub(crate) status: RunStatus,
    pub(crate) termination_reason: Option<TerminationReason>,
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) output: Option<String>,
    /// The loop flag the agent computed itself (keelwave's finish `loop_detected`), if reported.
    pub reported_loop_detected: Option<bool>,
    /// Where the agent says its loop began (keelwave's `loop_step_index`).
    pub reported_loop_step_index: Option<u64>,
    /// Totals the agent counted itself (keelwave's finish totals).
    pub reported_totals: Option<ReportedTotals>,
}

/// Run totals as reported by the agent (optional `reported_totals` on `run_finished`), under
/// keelwave's finish-call names. eddy keeps its own totals; these are recorded for comparison.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, Deserialize)]
pub struct ReportedTotals {
    /// The agent's own count of the run's steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_steps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) total_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) total_cost_usd: Option<f64>,
    /// How long the run took, by the agent's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TerminationReason {
    Clean,
    MaxStepsReached,
    ContextLimit,
    Error,
    LoopDetected,
    Timeout,
    /// Output only: eddy closed the run to stay within `engine.max_open_runs`.
    Evicted,
}

impl TerminationReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TerminationReason::Clean => "clean",
            TerminationReason::MaxStepsReached => "max_steps_reached",
            TerminationReason::ContextLimit => "context_limit",
            TerminationReason::Error => "error",
            TerminationReason::LoopDetected => "loop_detected",
            TerminationReason::Timeout => "timeout",
            TerminationReason::Evicted => "evicted",
        }
    }
}
