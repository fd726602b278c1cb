//! A run's record: [`RunState`] as the changelog holds it. Its optional numbers, which the
//! engine keeps as presence bits in `set`, are written and read as options; the detectors'
//! state is the record of [`super::detectors`].
use crate::contract::input::TerminationReason;
use crate::engine::detectors::RunDetectors;
use crate::engine::rollup::Minute;
use crate::engine::run::{
    AgentName, RunState, LOOPED_AGAIN, LOOP_CAUGHT, LOOP_STEP, STARTED, STEERED,
};
use crate::engine::seen::SeenSteps;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A run record as read: [`RunState`] with its options as options.
#[derive(Deserialize)]
struct RunStateIn {
    agent_name: Option<AgentName>,
    started_ms: Option<i64>,
    first_ms: i64,
    last_ts: i64,
    seen: SeenSteps,
    steps: u64,
    tool_calls: u64,
    tokens: u64,
    cost_usd: f64,
    signals: u32,
    redeliveries: u64,
    loop_detected: bool,
    loop_step_index: Option<u64>,
    loop_caught_step_index: Option<u64>,
    inferred_reason: Option<TerminationReason>,
    detectors: RunDetectors,
    #[serde(default)]
    last_seq: u64,
    #[serde(default)]
    minute: Option<Box<Minute>>,
    // Steering, recorded since eddy had guards steer; older records read without it (a run
    // restored from one was not steered). Written only for steered runs, after a `minute`
    // that is then written even when absent (binary records are arrays in field order).
    #[serde(default)]
    steered_step_index: Option<u64>,
    #[serde(default)]
    steers: u8,
    #[serde(default)]
    steer_looped_again: bool,
}

impl From<RunStateIn> for RunState {
    fn from(r: RunStateIn) -> Self {
        fn bit<T>(o: Option<T>, b: u8) -> u8 {
            if o.is_some() {
                b
            } else {
                0
            }
        }
        Self {
            agent: r.agent_name,
            started_ms: r.started_ms.unwrap_or(0),
            first_ms: r.first_ms,
            last_ts: r.last_ts,
            seen: r.seen,
            steps: u32::try_from(r.steps).unwrap_or(u32::MAX),
            tool_calls: u32::try_from(r.tool_calls).unwrap_or(u32::MAX),
            tokens: r.tokens,
            cost_usd: r.cost_usd,
            signals: r.signals,
            redeliveries: r.redeliveries,
            loop_detected: r.loop_detected,
            set: bit(r.started_ms, STARTED)
                | bit(r.loop_step_index, LOOP_STEP)
                | bit(r.loop_caught_step_index, LOOP_CAUGHT)
                | bit(r.steered_step_index, STEERED)
                | bit(
                    (r.steered_step_index.is_some() && r.steer_looped_again).then_some(()),
                    LOOPED_AGAIN,
                ),
            loop_step: r.loop_step_index.unwrap_or(0),
            loop_caught: r.loop_caught_step_index.unwrap_or(0),
            steered_step: r.steered_step_index.unwrap_or(0),
            steers: r.steers,
            inferred_reason: r.inferred_reason,
            detectors: r.detectors,
            last_seq: r.last_seq,
            minute: r.minute,
        }
    }
}

/// Read as `RunStateIn`, then converted.
impl<'de> Deserialize<'de> for RunState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RunStateIn::deserialize(d).map(RunState::from)
    }
}

/// Written as a derived `Serialize` of `RunStateIn` would: the presence bits in `set` become
/// options again, and an absent open minute is no field at all, unless the steering fields
/// follow it (only a steered run writes them, so other runs keep their earlier shape).
impl Serialize for RunState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let steered = self.steered_step_index();
        // The length counts only the fields written: binary records declare it up front.
        let fields = 17
            + usize::from(self.minute.is_some() || steered.is_some())
            + if steered.is_some() { 3 } else { 0 };
        let mut st = s.serialize_struct("RunState", fields)?;
        st.serialize_field("agent_name", &self.agent_name())?;
        st.serialize_field("started_ms", &self.reported_start())?;
        st.serialize_field("first_ms", &self.first_ms)?;
        st.serialize_field("last_ts", &self.last_ts)?;
        st.serialize_field("seen", &self.seen)?;
        st.serialize_field("steps", &u64::from(self.steps))?;
        st.serialize_field("tool_calls", &u64::from(self.tool_calls))?;
        st.serialize_field("tokens", &self.tokens)?;
        st.serialize_field("cost_usd", &self.cost_usd)?;
        st.serialize_field("signals", &self.signals)?;
        st.serialize_field("redeliveries", &self.redeliveries)?;
        st.serialize_field("loop_detected", &self.loop_detected)?;
        st.serialize_field("loop_step_index", &self.loop_step_index())?;
        st.serialize_field("loop_caught_step_index", &self.loop_caught_step_index())?;
        st.serialize_field("inferred_reason", &self.inferred_reason)?;
        st.serialize_field("detectors", &self.detectors)?;
        st.serialize_field("last_seq", &self.last_seq)?;
        match (&self.minute, steered) {
            (Some(m), _) => st.serialize_field("minute", m)?,
            (None, Some(_)) => st.serialize_field("minute", &None::<Box<Minute>>)?,
            (None, None) => st.skip_field("minute")?,
        }
        match steered {
            Some(step) => {
                st.serialize_field("steered_step_index", &Some(step))?;
                st.serialize_field("steers", &self.steers())?;
                st.serialize_field(
                    "steer_looped_again",
                    &(self.steer_outcome() == Some(crate::contract::SteerOutcome::LoopedAgain)),
                )?;
            }
            None => {
                st.skip_field("steered_step_index")?;
                st.skip_field("steers")?;
                st.skip_field("steer_looped_again")?;
            }
        }
        st.end()
    }
}
