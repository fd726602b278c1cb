//! The no-progress detector's record: its latch and its window of (step, action, output),
//! written from the run's shared history and read back into it.
use super::window::Members;
use crate::engine::detectors::history::{Call, History, STALL};
use crate::engine::detectors::stall::StallState;
use crate::engine::detectors::Latch;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The state as records hold it: with its window of (step, action, output).
#[derive(Deserialize)]
pub(super) struct Record {
    window: VecDeque<(u64, u64, u64)>,
    latch: Latch,
}

impl Record {
    pub(super) fn restore(self, h: &mut History) -> StallState {
        for (step, action, output) in self.window {
            h.restore(Call::new(step, action, 0, output, 0, false), STALL);
        }
        StallState { latch: self.latch }
    }
}

/// Serialises the state with its window, as [`Record`] reads it.
pub(super) struct Ser<'a>(pub(super) &'a StallState, pub(super) &'a History);

impl Serialize for Ser<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let window = Members(self.1, STALL, |c: &Call| (c.step, c.action, c.output));
        let mut st = s.serialize_struct("StallState", 2)?;
        st.serialize_field("window", &window)?;
        st.serialize_field("latch", &self.0.latch)?;
        st.end()
    }
}
