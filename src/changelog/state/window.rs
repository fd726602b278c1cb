//! A detector's window as its record writes it. Live, the windows are one shared call history
//! with a membership bit per detector; records still hold each detector's own window.
use crate::engine::detectors::history::{Call, History};
use serde::Serialize;

/// One detector's window as a record writes it: `bit`'s calls, oldest first, each written as
/// `entry` makes it (each detector's record keeps its own entry layout this way).
pub(super) struct Members<'a, F>(pub(super) &'a History, pub(super) u8, pub(super) F);

impl<F, T> Serialize for Members<'_, F>
where
    F: Fn(&Call) -> T,
    T: Serialize,
{
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.members(self.1).map(|c| (self.2)(&c)))
    }
}
