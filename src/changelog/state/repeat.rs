//! The repeated-operation detector's record: its latch and its window of calls, written from
//! the run's shared history and read back into it.
use super::window::Members;
use crate::engine::detectors::history::{Call, History, REPEAT};
use crate::engine::detectors::repeat::RepeatState;
use crate::engine::detectors::Latch;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Written as an array in field order (read from that or from the object of version 1
/// records): the changelog then repeats no field names for every window entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Entry {
    step: u64,
    primary: u64,
    output: u64,
    repeatable: bool,
    /// `Progress::novel_actions` after this step.
    #[serde(default)]
    work: u64,
}

impl Serialize for Entry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (
            &self.step,
            &self.primary,
            &self.output,
            &self.repeatable,
            &self.work,
        )
            .serialize(s)
    }
}

/// The state as records hold it: with its window.
#[derive(Deserialize)]
pub(super) struct Record {
    window: VecDeque<Entry>,
    latch: Latch,
}

impl Record {
    pub(super) fn restore(self, h: &mut History) -> RepeatState {
        for e in self.window {
            let c = Call::new(e.step, 0, e.primary, e.output, e.work, e.repeatable);
            h.restore(c, REPEAT);
        }
        RepeatState { latch: self.latch }
    }
}

/// Serialises the state with its window, as [`Record`] reads it.
pub(super) struct Ser<'a>(pub(super) &'a RepeatState, pub(super) &'a History);

impl Serialize for Ser<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let window = Members(self.1, REPEAT, |c: &Call| Entry {
            step: c.step,
            primary: c.primary,
            output: c.output,
            repeatable: c.repeatable,
            work: c.work(),
        });
        let mut st = s.serialize_struct("RepeatState", 2)?;
        st.serialize_field("window", &window)?;
        st.serialize_field("latch", &self.0.latch)?;
        st.end()
    }
}
