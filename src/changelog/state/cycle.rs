//! The cycle detector's record: its latch and its window of legs, written from the run's
//! shared history and read back into it.
use super::window::Members;
use crate::engine::detectors::cycle::CycleState;
use crate::engine::detectors::history::{Call, History, CYCLE};
use crate::engine::detectors::Latch;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// A window entry as records hold it. Written as an array in field order (read from that or
/// from the object of version 1 records): the changelog then repeats no field names for every
/// window entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Leg {
    step: u64,
    action: u64,
    output: u64,
    repeatable: bool,
}

impl Serialize for Leg {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (&self.step, &self.action, &self.output, &self.repeatable).serialize(s)
    }
}

/// The state as records hold it: with its window.
#[derive(Deserialize)]
pub(super) struct Record {
    hist: VecDeque<Leg>,
    latch: Latch,
}

impl Record {
    pub(super) fn restore(self, h: &mut History) -> CycleState {
        for l in self.hist {
            h.restore(
                Call::new(l.step, l.action, 0, l.output, 0, l.repeatable),
                CYCLE,
            );
        }
        CycleState { latch: self.latch }
    }
}

/// Serialises the state with its window, as [`Record`] reads it.
pub(super) struct Ser<'a>(pub(super) &'a CycleState, pub(super) &'a History);

impl Serialize for Ser<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let hist = Members(self.1, CYCLE, |c: &Call| Leg {
            step: c.step,
            action: c.action,
            output: c.output,
            repeatable: c.repeatable,
        });
        let mut st = s.serialize_struct("CycleState", 2)?;
        st.serialize_field("hist", &hist)?;
        st.serialize_field("latch", &self.0.latch)?;
        st.end()
    }
}
