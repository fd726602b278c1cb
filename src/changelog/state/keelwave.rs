//! The keelwave detector's state ([`KeelwaveState`]): the first step of each fingerprint seen,
//! whichever form the state keeps them in.
use crate::engine::detectors::keelwave::{prefix, First, KeelwaveState};
use crate::engine::detectors::VecMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Records hold `first` as a map and `fired`, as they did before the forms existed.
impl Serialize for KeelwaveState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        struct Map<'a>(&'a First);
        impl Serialize for Map<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_map(self.0.entries())
            }
        }
        let mut st = s.serialize_struct("KeelwaveState", 2)?;
        st.serialize_field("first", &Map(&self.first))?;
        st.serialize_field("fired", &matches!(self.first, First::Fired))?;
        st.end()
    }
}

/// What a record holds, including `first_seen` (hex keys) from records written before `first`
/// existed: converted on reading, so the state carries no field for them.
#[derive(Deserialize)]
struct KeelwaveRecord {
    #[serde(default)]
    first: VecMap<u64, u64>,
    #[serde(default)]
    fired: bool,
    /// Last: binary records (fields by position) hold only the two above.
    #[serde(default)]
    first_seen: BTreeMap<String, u64>,
}

impl From<KeelwaveRecord> for KeelwaveState {
    fn from(r: KeelwaveRecord) -> Self {
        // Records written before a fired run dropped its fingerprints still hold them.
        if r.fired {
            return Self {
                first: First::Fired,
            };
        }
        let mut first = First::default();
        for (k, step) in r.first.iter() {
            first.insert(*k, *step);
        }
        for (hexkey, step) in r.first_seen {
            if let Ok(b) = hex::decode(&hexkey) {
                if let Ok(fp) = <[u8; 32]>::try_from(b.as_slice()) {
                    first.insert(prefix(&fp), step);
                }
            }
        }
        Self { first }
    }
}

impl<'de> Deserialize<'de> for KeelwaveState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        KeelwaveRecord::deserialize(d).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of a fired run that still lists fingerprints (written before a fired run
    /// dropped them) restores without them.
    #[test]
    fn a_fired_record_restores_no_fingerprints() {
        let r: KeelwaveState =
            serde_json::from_str(r#"{"first":{"1":0,"2":1},"fired":true}"#).unwrap();
        assert_eq!(r.first, First::Fired);
        let r: KeelwaveState =
            serde_json::from_str(r#"{"first":{"1":0,"2":1},"fired":false}"#).unwrap();
        assert_eq!(r.first.entries().count(), 2);
    }

    /// Records are the same map in either form, steps past 32 bits kept whole.
    #[test]
    fn both_forms_are_written_as_one_map() {
        let wide = KeelwaveState {
            first: First::Wide([(3, 1), (9, u64::from(u32::MAX) + 9)].into_iter().collect()),
        };
        let back: KeelwaveState =
            serde_json::from_value(serde_json::to_value(&wide).unwrap()).unwrap();
        assert_eq!(back, wide);
        let mut narrow = First::default();
        narrow.insert(3, 1);
        let (n, w) = (
            KeelwaveState { first: narrow },
            KeelwaveState {
                first: First::Wide([(3, 1)].into_iter().collect()),
            },
        );
        assert_eq!(
            serde_json::to_string(&n).ok(),
            serde_json::to_string(&w).ok()
        );
        assert_eq!(
            serde_json::to_string(&n).ok().as_deref(),
            Some(r#"{"first":{"3":1},"fired":false}"#)
        );
    }
}
