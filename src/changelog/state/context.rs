//! The context-pressure detector's record: its samples, its window of outputs (written from
//! the run's shared history and read back into it), its latch and what its stale-growth and
//! compaction rules remember.
use super::window::Members;
use crate::engine::detectors::context::{ContextState, Samples, Stale};
use crate::engine::detectors::history::{Call, History, CONTEXT};
use crate::engine::detectors::Latch;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// [`Stale`] as records hold it (8 bytes in memory, a struct of its fields here).
#[derive(Serialize, Deserialize)]
#[serde(remote = "Stale", rename = "Stale", default = "Stale::default")]
struct StaleDef {
    mark: u16,
    base_kilotokens: u16,
    steps: u8,
    compactions: u8,
    compaction_mark: u16,
}

through_remote!(Stale, StaleDef);

/// Written as the (step, tokens) pairs the samples hold, whichever form holds them.
impl Serialize for Samples {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// The state as records hold it: with its window of outputs.
#[derive(Deserialize)]
pub(super) struct Record {
    samples: VecDeque<(u64, u64)>,
    outputs: VecDeque<u64>,
    latch: Latch,
    /// Absent from records written before the stale and compaction rules.
    #[serde(default)]
    stale: Stale,
}

impl Record {
    pub(super) fn restore(self, h: &mut History) -> ContextState {
        for output in self.outputs {
            h.restore(Call::new(0, 0, 0, output, 0, false), CONTEXT);
        }
        let mut samples = Samples::default();
        for s in self.samples {
            samples.push(s, usize::MAX);
        }
        ContextState {
            samples,
            latch: self.latch,
            stale: self.stale,
        }
    }
}

/// Serialises the state with its window, as [`Record`] reads it.
pub(super) struct Ser<'a>(pub(super) &'a ContextState, pub(super) &'a History);

impl Serialize for Ser<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let outputs = Members(self.1, CONTEXT, |c: &Call| c.output);
        let mut st = s.serialize_struct("ContextState", 4)?;
        st.serialize_field("samples", &self.0.samples)?;
        st.serialize_field("outputs", &outputs)?;
        st.serialize_field("latch", &self.0.latch)?;
        st.serialize_field("stale", &self.0.stale)?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples are written as the pairs they hold, narrow or wide.
    #[test]
    fn samples_are_written_as_their_pairs() {
        let mut s = Samples::default();
        s.push((1, 10), 4);
        assert!(matches!(s, Samples::Narrow(_)));
        assert_eq!(serde_json::to_string(&s).unwrap(), "[[1,10]]");
        s.push((u64::MAX, 1 << 40), 4);
        assert!(matches!(s, Samples::Wide(_)));
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            format!("[[1,10],[{},{}]]", u64::MAX, 1u64 << 40)
        );
    }

    /// Every field of the stale-growth memory is written, in declaration order, and a record
    /// without some reads them as zero.
    #[test]
    fn stale_is_written_field_by_field() {
        let st: Stale = serde_json::from_str(r#"{"mark":3,"steps":2}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&st).unwrap(),
            r#"{"mark":3,"base_kilotokens":0,"steps":2,"compactions":0,"compaction_mark":0}"#
        );
    }
}
