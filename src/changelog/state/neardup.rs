//! The near-duplicate detector's record: every window entry whole (step, tool, action, kind,
//! result, signature), written from the shared history and the packed window, and read back
//! into them; and the signature forms as records write them.
use crate::engine::detectors::history::{self, History, NEARDUP};
use crate::engine::detectors::neardup::signature::{encode, Call, Sig};
use crate::engine::detectors::neardup::NearDupState;
use crate::engine::detectors::{Latch, OutKind};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// JSON records (versions 2 to 4) tell the forms apart by their shape.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum SigJson<V, F> {
    Full(V),
    Features { f: F },
}

/// Binary records name the form: reading an untagged enum buffers every entry's signature
/// to try each form in turn, the costliest part of a restore.
#[derive(Serialize, Deserialize)]
enum SigBinary<V, F> {
    Full(V),
    Features(F),
}

impl Serialize for Sig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        type Json<'a> = SigJson<&'a [u32], &'a [u64]>;
        type Binary<'a> = SigBinary<&'a [u32], &'a [u64]>;
        match (self, s.is_human_readable()) {
            (Sig::Full(v), true) => Json::Full(v).serialize(s),
            (Sig::Features { f }, true) => Json::Features { f }.serialize(s),
            (Sig::Full(v), false) => Binary::Full(v).serialize(s),
            (Sig::Features { f }, false) => Binary::Features(f).serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Sig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(if d.is_human_readable() {
            match SigJson::<Vec<u32>, Vec<u64>>::deserialize(d)? {
                SigJson::Full(v) => Sig::Full(v),
                SigJson::Features { f } => Sig::Features { f },
            }
        } else {
            match SigBinary::<Vec<u32>, Vec<u64>>::deserialize(d)? {
                SigBinary::Full(v) => Sig::Full(v),
                SigBinary::Features(f) => Sig::Features { f },
            }
        })
    }
}

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
pub(super) struct Record {
    window: VecDeque<CallRecord>,
    latch: Latch,
}

impl Record {
    pub(super) fn restore(self, h: &mut History) -> NearDupState {
        let mut state = NearDupState::default();
        state.latch = self.latch;
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
pub(super) struct Ser<'a>(pub(super) &'a NearDupState, pub(super) &'a History);

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

/// Written by name, in snake case.
#[derive(Serialize, Deserialize)]
#[serde(remote = "OutKind", rename = "OutKind", rename_all = "snake_case")]
enum OutKindDef {
    NoTool,
    Failure,
    Empty,
    Ack,
    Data,
}

through_remote!(OutKind, OutKindDef);
