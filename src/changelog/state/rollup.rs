//! A run's open rollup minute ([`Minute`]), as its run state records it. Every field but the
//! bucket has a default: records written before a field existed read without it.
use crate::engine::rollup::Minute;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
#[serde(remote = "Minute", rename = "Minute")]
struct MinuteDef {
    bucket_ms: i64,
    #[serde(default)]
    started: bool,
    #[serde(default)]
    steps: u32,
    #[serde(default)]
    tool_calls: u32,
    #[serde(default)]
    errors: u32,
    #[serde(default)]
    tokens: u64,
    #[serde(default)]
    cost_usd: f64,
    #[serde(default)]
    loop_steps: u32,
    #[serde(default)]
    loop_cost_usd: f64,
    #[serde(default)]
    caught_after_steps: Option<u64>,
}

through_remote!(Minute, MinuteDef);
