//! All detector state of one run as records hold it. The windows of recent tool calls that
//! several detectors keep are one shared history in memory; records still hold each
//! detector's own window (written from the history by each detector's `Ser`, read into it by
//! its `Record`), so they are what they were before the history was shared.
use super::{context, cycle, neardup, repeat, stall};
use crate::engine::detectors::history::History;
use crate::engine::detectors::{budget, content, failure, handoff, keelwave, policy};
use crate::engine::detectors::{context::ContextState, Lazy, Progress, RunDetectors};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Deserialize)]
struct DetectorsRecord {
    keelwave: keelwave::KeelwaveState,
    progress: Progress,
    repeat: repeat::Record,
    stall: stall::Record,
    failure: Lazy<failure::FailureState>,
    cycle: cycle::Record,
    handoff: handoff::HandoffState,
    neardup: neardup::Record,
    content: Lazy<content::ContentState>,
    context: context::Record,
    budget: budget::BudgetState,
    policy: Lazy<policy::PolicyState>,
}

impl From<DetectorsRecord> for RunDetectors {
    fn from(r: DetectorsRecord) -> Self {
        let mut history = History::default();
        let repeat = r.repeat.restore(&mut history);
        let stall = r.stall.restore(&mut history);
        let cycle = r.cycle.restore(&mut history);
        let neardup = r.neardup.restore(&mut history);
        let context = Lazy::new(r.context.restore(&mut history));
        history.restored();
        Self {
            keelwave: r.keelwave,
            progress: r.progress,
            repeat,
            stall,
            failure: r.failure,
            cycle,
            handoff: r.handoff,
            neardup,
            content: r.content,
            context,
            budget: r.budget,
            policy: r.policy,
            history,
        }
    }
}

/// Read as [`DetectorsRecord`], each window restored into the shared history.
impl<'de> Deserialize<'de> for RunDetectors {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        DetectorsRecord::deserialize(d).map(RunDetectors::from)
    }
}

/// The detectors as records hold them (each detector's window written from the history).
impl Serialize for RunDetectors {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let d = self;
        let h = &d.history;
        let mut st = s.serialize_struct("RunDetectors", 12)?;
        st.serialize_field("keelwave", &d.keelwave)?;
        st.serialize_field("progress", &d.progress)?;
        st.serialize_field("repeat", &repeat::Ser(&d.repeat, h))?;
        st.serialize_field("stall", &stall::Ser(&d.stall, h))?;
        st.serialize_field("failure", &d.failure)?;
        st.serialize_field("cycle", &cycle::Ser(&d.cycle, h))?;
        st.serialize_field("handoff", &d.handoff)?;
        st.serialize_field("neardup", &neardup::Ser(&d.neardup, h))?;
        st.serialize_field("content", &d.content)?;
        let no_context = ContextState::default();
        let context = d.context.get().unwrap_or(&no_context);
        st.serialize_field("context", &context::Ser(context, h))?;
        st.serialize_field("budget", &d.budget)?;
        st.serialize_field("policy", &d.policy)?;
        st.end()
    }
}
