//! The compact containers of run state ([`VecMap`], [`Lazy`], [`Latch`], [`SeenSteps`]) as
//! records hold them: each exactly as the standard type it stands for, so the records written
//! before these containers existed read back unchanged, and are written the same.
use crate::contract::Severity;
use crate::engine::detectors::{Latch, Lazy, VecMap};
use crate::engine::seen::SeenSteps;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::collections::BTreeMap;

/// Like a `BTreeMap`: a map in key order (a JSON object, a MessagePack map).
impl<K: Serialize, V: Serialize> Serialize for VecMap<K, V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl<'de, K: Deserialize<'de> + Ord, V: Deserialize<'de>> Deserialize<'de> for VecMap<K, V> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = BTreeMap::<K, V>::deserialize(d)?;
        Ok(Self(m.into_iter().collect()))
    }
}

/// As the state itself: a default one when absent.
impl<T: Default + Serialize> Serialize for Lazy<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_deref() {
            Some(t) => t.serialize(s),
            None => T::default().serialize(s),
        }
    }
}

impl<'de, T: Default + PartialEq + Deserialize<'de>> Deserialize<'de> for Lazy<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Self::new)
    }
}

/// Like a `BTreeMap` under `fired`, as before the latch was a sorted vector.
impl Serialize for Latch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Fired<'a>(&'a [(u64, Severity)]);
        impl Serialize for Fired<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
            }
        }
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Latch", 1)?;
        st.serialize_field("fired", &Fired(&self.fired[..]))?;
        st.end()
    }
}

impl<'de> Deserialize<'de> for Latch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Record {
            fired: BTreeMap<u64, Severity>,
        }
        let r = Record::deserialize(d)?;
        Ok(Self {
            fired: r.fired.into_iter().collect(),
        })
    }
}

/// The vector of ranges, as when the set was a `Vec` of them.
#[derive(Serialize, Deserialize)]
#[serde(remote = "SeenSteps", rename = "SeenSteps")]
struct SeenStepsDef {
    ranges: SmallVec<[(u64, u64); 1]>,
}

through_remote!(SeenSteps, SeenStepsDef);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_the_vector_of_ranges_they_were() {
        for steps in [vec![], vec![0, 1, 2], vec![0, 1, 5, 9, 10]] {
            let mut s = SeenSteps::default();
            let mut ranges: Vec<(u64, u64)> = Vec::new();
            for i in steps {
                s.insert(i);
                match ranges.last_mut() {
                    Some(r) if r.1 == i => r.1 += 1,
                    _ => ranges.push((i, i + 1)),
                }
            }
            let json = serde_json::json!({ "ranges": ranges });
            assert_eq!(serde_json::to_value(&s).ok(), Some(json.clone()));
            assert_eq!(serde_json::from_value::<SeenSteps>(json).ok(), Some(s));
        }
    }
}
