//! The near-duplicate state as changelog records hold it: every window entry whole (step,
//! tool, action, kind, result, signature), written from the shared history and the packed
//! window, and read back into them.
use super::signature::{encode, Call, Sig};
use super::NearDupState;
use crate::engine::detectors::history::{self, History, NEARDUP};
use crate::engine::detectors::{Latch, OutKind};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// A window entry as records hold it. Written as an array in field order (read from that or
/// from the object of version 1 records): the changelog then repeats no field names for every
/// window entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct CallRecord {
    step: u64,
    tool: u64,
    action: u64,
    kind: OutKind,
    /// Error key for failures, output key otherwise.
    result: u64,
    sig: Sig,
}

impl Serialize for CallRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (
            &self.step,
            &self.tool,
            &self.action,
            &self.kind,
            &self.result,
            &self.sig,
        )
            .serialize(s)
    }
}

/// The state as records hold it: with whole window entries.
#[derive(Deserialize)]
pub struct Record {
    window: VecDeque<CallRecord>,
    latch: Latch,
}

impl Record {
    pub fn restore(self, h: &mut History) -> NearDupState {
        let mut state = NearDupState {
            latch: self.latch,
            ..NearDupState::default()
        };
        for c in self.window {
            // The call is this window's alone: its output can hold the result.
            h.restore(
                history::Call::new(c.step, c.action, 0, c.result, 0, false),
                NEARDUP,
            );
            let (full, sig) = encode(c.sig);
            let call = Call {
                tool: c.tool,
                result: c.result,
                kind: c.kind,
                full,
                sig: &sig,
            };
            state.push(0, c.result, &call);
        }
        state
    }
}

/// Serialises the state with whole window entries, as [`Record`] reads it.
pub struct Ser<'a>(pub &'a NearDupState, pub &'a History);

impl Serialize for Ser<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        struct Window<'a>(&'a NearDupState, &'a History);
        impl Serialize for Window<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let calls = self.0.entries(self.1);
                s.collect_seq(calls.map(|(h, c)| CallRecord {
                    step: h.step,
                    tool: c.tool,
                    action: h.action,
                    kind: c.kind,
                    result: c.result,
                    sig: c.record_sig(),
                }))
            }
        }
        let mut st = s.serialize_struct("NearDupState", 2)?;
        st.serialize_field("window", &Window(self.0, self.1))?;
        st.serialize_field("latch", &self.0.latch)?;
        st.end()
    }
}
