//! The repeated-failure detector's state ([`FailureState`]): its failure streaks by operation
//! and by error, and its latch.
use crate::engine::detectors::failure::{FailureState, Streak};
use crate::engine::detectors::{FailClass, Latch, VecMap};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::VecDeque;

#[derive(Serialize, Deserialize)]
#[serde(remote = "Streak", rename = "Streak")]
struct StreakDef {
    tool: u64,
    error: u64,
    class: FailClass,
    count: u32,
    steps: VecDeque<u64>,
    inputs: Vec<u64>,
    novel_at: u64,
    last: u64,
}

impl Serialize for Streak {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        StreakDef::serialize(self, s)
    }
}

impl<'de> Deserialize<'de> for Streak {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        StreakDef::deserialize(d)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "FailureState", rename = "FailureState")]
struct FailureStateDef {
    by_op: VecMap<u64, Streak>,
    by_error: VecMap<u64, Streak>,
    latch: Latch,
}

impl Serialize for FailureState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        FailureStateDef::serialize(self, s)
    }
}

impl<'de> Deserialize<'de> for FailureState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        FailureStateDef::deserialize(d)
    }
}
