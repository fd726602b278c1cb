//! The partition's meta record ([`PartitionMeta`], inside the JSON `__meta__` record of
//! `changelog::json`). Empty jump and behind lists are left out; the ended runs are not in it
//! (each is its own changelog marker, written as the run ends), and read back empty.
use crate::engine::PartitionMeta;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

#[derive(Serialize, Deserialize)]
#[serde(remote = "PartitionMeta", rename = "PartitionMeta")]
struct PartitionMetaDef {
    watermark_ms: Option<i64>,
    #[serde(default)]
    seq: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    jumps: Vec<(u64, i64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    behind: Vec<(u64, i64)>,
    /// Persisted as one changelog marker per run, not inside the meta record.
    #[serde(skip)]
    ended: VecDeque<crate::contract::RunKey>,
}

through_remote!(PartitionMeta, PartitionMetaDef);
