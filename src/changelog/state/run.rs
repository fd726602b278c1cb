//! A run's record: [`RunState`] as the changelog holds it. Its optional numbers, which the
//! engine keeps as presence bits in `set`, are written and read as options; the detectors'
//! state is the record of [`super::detectors`].
use crate::contract::input::TerminationReason;
use crate::engine::detectors::RunDetectors;
use crate::engine::rollup::Minute;
use crate::engine::run::{AgentName, RunState, LOOP_CAUGHT, LOOP_STEP, STARTED};
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
            steps: r.steps,
            tool_calls: r.tool_calls,
            tokens: r.tokens,
            cost_usd: r.cost_usd,
            signals: r.signals,
            redeliveries: r.redeliveries,
            loop_detected: r.loop_detected,
            set: bit(r.started_ms, STARTED)
                | bit(r.loop_step_index, LOOP_STEP)
                | bit(r.loop_caught_step_index, LOOP_CAUGHT),
            loop_step: r.loop_step_index.unwrap_or(0),
            loop_caught: r.loop_caught_step_index.unwrap_or(0),
            inferred_reason: r.inferred_reason,
            detectors: r.detectors,
            last_seq: r.last_seq,
            minute: r.minute,
        }
    }
}

/// Read as [`RunStateIn`], then converted.
impl<'de> Deserialize<'de> for RunState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RunStateIn::deserialize(d).map(RunState::from)
    }
}

/// Written as a derived `Serialize` of [`RunStateIn`] would: the presence bits in `set` become
/// options again, and an absent open minute is no field at all.
impl Serialize for RunState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        // The length counts only the fields written: binary records declare it up front.
        let fields = 17 + usize::from(self.minute.is_some());
        let mut st = s.serialize_struct("RunState", fields)?;
        st.serialize_field("agent_name", &self.agent_name())?;
        st.serialize_field("started_ms", &self.reported_start())?;
        st.serialize_field("first_ms", &self.first_ms)?;
        st.serialize_field("last_ts", &self.last_ts)?;
        st.serialize_field("seen", &self.seen)?;
        st.serialize_field("steps", &self.steps)?;
        st.serialize_field("tool_calls", &self.tool_calls)?;
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
        match &self.minute {
            Some(m) => st.serialize_field("minute", m)?,
            None => st.skip_field("minute")?,
        }
        st.end()
    }
}
