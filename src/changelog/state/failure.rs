//! The repeated-failure detector's state ([`FailureState`]): its failure streaks by operation
//! and by error, and its latch.
use crate::engine::detectors::failure::{FailureState, Streak};
use crate::engine::detectors::{FailClass, Latch, VecMap};
use serde::{Deserialize, Serialize};
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

through_remote!(Streak, StreakDef);

#[derive(Serialize, Deserialize)]
#[serde(remote = "FailureState", rename = "FailureState")]
struct FailureStateDef {
    by_op: VecMap<u64, Streak>,
    by_error: VecMap<u64, Streak>,
    latch: Latch,
}

through_remote!(FailureState, FailureStateDef);

/// Written by name, in snake case.
#[derive(Serialize, Deserialize)]
#[serde(remote = "FailClass", rename = "FailClass", rename_all = "snake_case")]
enum FailClassDef {
    Permanent,
    Retryable,
    Recoverable,
    Other,
}

through_remote!(FailClass, FailClassDef);
