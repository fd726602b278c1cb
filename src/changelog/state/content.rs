//! The content-repetition detector's state ([`ContentState`]) and its window of thoughts.
use super::signature::deserialize_signature;
use crate::engine::detectors::content::{ContentState, Thought};
use crate::engine::detectors::Latch;
use crate::engine::text::Signature;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::VecDeque;
use thin_vec::ThinVec;

/// Written as an array in field order (read from that or from the object of version 1
/// records): the changelog then repeats no field names for every window entry.
#[derive(Deserialize)]
#[serde(remote = "Thought", rename = "Thought")]
struct ThoughtDef {
    step: u64,
    key: u64,
    #[serde(deserialize_with = "deserialize_signature")]
    sig: Signature,
    rich: bool,
    /// In 32 bits, saturating: records of version 3 and before hold 64.
    #[serde(deserialize_with = "saturating_u32")]
    novel_at: u32,
    /// Records written before monologues were judged hold none (their streaks start over).
    #[serde(default)]
    flags: u8,
    /// Records written before restated plans were judged hold none (no target).
    #[serde(default)]
    target: u8,
}

fn saturating_u32<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    Ok(u32::try_from(u64::deserialize(d)?).unwrap_or(u32::MAX))
}

impl Serialize for Thought {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (
            &self.step,
            &self.key,
            self.sig.as_slice(),
            &self.rich,
            &self.novel_at,
            &self.flags,
            &self.target,
        )
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Thought {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ThoughtDef::deserialize(d)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "ContentState", rename = "ContentState")]
struct ContentStateDef {
    thoughts: VecDeque<Thought>,
    empty_streak: ThinVec<u64>,
    empty_novel_at: u64,
    novel_messages: u64,
    latch: Latch,
}

through_remote!(ContentState, ContentStateDef);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::detectors::content::same_info;

    /// A thought keeps its information count in 32 bits: counts that fit compare exactly, and
    /// one past them (only a record could hold it) saturates and matches no count.
    #[test]
    fn information_counts_past_32_bits_match_nothing() {
        let sig = vec![0u8; crate::engine::text::MINHASH_K];
        let read = |n: u64| -> Thought {
            serde_json::from_value(serde_json::json!([7, 9, sig, true, n])).unwrap()
        };
        let t = read(5);
        assert!(same_info(&t, 5) && !same_info(&t, 6));
        let t = read(u64::from(u32::MAX) - 1);
        assert!(same_info(&t, u64::from(u32::MAX) - 1));
        let t = read(1 << 40);
        assert_eq!(t.novel_at, u32::MAX);
        assert!(!same_info(&t, 1 << 40) && !same_info(&t, u64::from(u32::MAX)));
    }
}
