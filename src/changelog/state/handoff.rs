//! The handoff detector's state ([`HandoffState`]): the last agent, and in multi-agent runs the
//! window of handoffs and the latch, as one flat object.
use crate::engine::detectors::handoff::{nonzero, Cycles, Handoff, HandoffState};
use crate::engine::detectors::{Latch, Lazy};
use crate::engine::text::{signature_from, Signature};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::VecDeque;

/// Written as an array in field order (read from that or from the object of version 1
/// records): the changelog then repeats no field names for every window entry.
#[derive(Deserialize)]
#[serde(remote = "Handoff", rename = "Handoff")]
struct HandoffDef {
    step: u64,
    from: u64,
    to: u64,
    payload: u64,
    short: bool,
    /// Short payloads only; written as an empty list for the others.
    #[serde(deserialize_with = "short_sig")]
    sig: Option<Box<Signature>>,
}

/// Records write an empty list for a payload without a signature.
fn short_sig<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Box<Signature>>, D::Error> {
    let v = Vec::<u64>::deserialize(d)?;
    Ok((!v.is_empty()).then(|| Box::new(signature_from(v))))
}

impl Serialize for Handoff {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (
            &self.step,
            &self.from,
            &self.to,
            &self.payload,
            &self.short,
            self.sig.as_ref().map_or(&[][..], |s| s.as_slice()),
        )
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Handoff {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        HandoffDef::deserialize(d)
    }
}

/// One flat object: the cycles (boxed in the state) are written as a default one when absent.
#[derive(Deserialize)]
struct HandoffRecord {
    last_agent: Option<u64>,
    hist: VecDeque<Handoff>,
    latch: Latch,
}

impl From<HandoffRecord> for HandoffState {
    fn from(r: HandoffRecord) -> Self {
        let mut cycles = Lazy::default();
        cycles.with(|c: &mut Cycles| {
            c.hist = r.hist;
            c.latch = r.latch;
        });
        Self {
            last_agent: r.last_agent.map(nonzero),
            cycles,
        }
    }
}

impl Serialize for HandoffState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let empty = Cycles::default();
        let c = self.cycles.get().unwrap_or(&empty);
        let mut st = s.serialize_struct("HandoffState", 3)?;
        st.serialize_field("last_agent", &self.last_agent)?;
        st.serialize_field("hist", &c.hist)?;
        st.serialize_field("latch", &c.latch)?;
        st.end()
    }
}

impl<'de> Deserialize<'de> for HandoffState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        HandoffRecord::deserialize(d).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU64;

    /// Records keep an agent's key; a zero key (in a record, never from the detector's agent
    /// keys) restores as the key it now stands for.
    #[test]
    fn records_keep_agent_keys() {
        let k = 0x1234_5678_9abc_def0_u64;
        let state = HandoffState {
            last_agent: Some(nonzero(k)),
            cycles: Lazy::default(),
        };
        let json = serde_json::to_value(&state).ok();
        assert_eq!(
            json,
            Some(serde_json::json!({"last_agent": k, "hist": [], "latch": {"fired": {}}}))
        );
        let back = json.and_then(|j| serde_json::from_value::<HandoffState>(j).ok());
        assert_eq!(back, Some(state));
        let zero = serde_json::json!({"last_agent": 0, "hist": [], "latch": {"fired": {}}});
        let r = serde_json::from_value::<HandoffState>(zero).ok();
        assert_eq!(r.and_then(|r| r.last_agent), Some(NonZeroU64::MIN));
    }
}
