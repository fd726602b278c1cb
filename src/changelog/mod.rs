//! The state changelog's records: what a partition's compacted changelog topic holds, in which
//! versions, and how they convert to and from the engine's run state. Kafka is elsewhere
//! (`source::restore` reads a partition back, `emit` sends records): this module is the
//! schema, pure bytes in and out.
//!
//! Keys (unchanged since version 1, so compaction keeps one record per run across upgrades):
//! - `["<project_id>","<run_id>"]` (JSON): one run. Its value is an open run's state, a marker
//!   that the run ended (late events cannot reopen it), or none (tombstone: the ended run was
//!   forgotten);
//! - `"__meta__"`: the partition's meta record, `{"v":N,"applied_offset":N,"meta":PartitionMeta}`
//!   (JSON): the state above covers input offsets `< applied_offset`. Written last in each
//!   flush, after ClickHouse and the output topic acknowledged everything up to it, so a
//!   restore that skips `< applied_offset` loses nothing.
//!
//! Run values:
//! - version 5 (`binary`): a two-byte frame, then the covered input offset and the run state
//!   in MessagePack. Fewer bytes than the JSON and read faster, which is what a new partition
//!   owner waits for before its runs produce signals again.
//! - versions 1 to 4 (`json`): JSON objects, still read so that a rolling upgrade restores the
//!   changelog the previous release wrote. Each version reads the ones before it.
//!
//! `state` writes down the shape of every persisted engine type, for both encodings: its
//! serde impls also accept the older JSON shapes, and a near-duplicate signature names its form
//! only in binary (where shapes cannot tell forms apart). The engine itself holds no serde code
//! for its state.
pub(crate) mod binary;
pub(crate) mod json;
mod state;

use crate::contract::RunKey;
use crate::engine::{Change, PartitionMeta, RunState};

/// The key of a partition's meta record (watermark and applied offset), which no run key
/// can equal.
pub const META_KEY: &[u8] = b"\"__meta__\"";
/// The version this eddy writes; it reads every version up to it.
pub(crate) const VERSION: u32 = binary::VERSION;

/// A changelog record that cannot be read. Restoring stops on one: skipping it would
/// silently reopen or forget a run.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Written by a newer eddy than this one: reading on would lose state.
    #[error(
        "record version {0} is newer than this eddy reads ({VERSION}); roll back the upgrade or finish it"
    )]
    Newer(u32),
    /// A JSON (version 1 to 4) record that does not parse.
    #[error("malformed JSON record: {0}")]
    Json(#[from] serde_json::Error),
    /// A binary (MessagePack) record that does not parse.
    #[error("malformed binary record: {0}")]
    Binary(String),
    /// A record key that is not a run key.
    #[error("malformed key: {0}")]
    Key(String),
}

/// What a run record says.
#[derive(Debug, PartialEq)]
pub struct RunRecord {
    /// The run's input events below this offset are in the record (see
    /// `source::restore::Restored::run_offsets`); records before version 2 do not say.
    pub(crate) offset: Option<i64>,
    /// `None`: the run ended.
    pub(crate) state: Option<RunState>,
}

pub(crate) fn run_key(k: &RunKey) -> Vec<u8> {
    serde_json::to_vec(&(&k.project_id, &k.run_id)).unwrap_or_default()
}

#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) fn parse_run_key(key: &[u8]) -> Result<RunKey, RecordError> {
    let (project_id, run_id): (String, String) =
        serde_json::from_slice(key).map_err(|e| RecordError::Key(e.to_string()))?;
    Ok(RunKey { project_id, run_id })
}

/// Encode one change made while applying input offsets below `offset` as (key, value);
/// `None` value = tombstone.
pub fn encode(change: &Change<'_>, offset: i64) -> (Vec<u8>, Option<Vec<u8>>) {
    match change {
        Change::Upsert(k, s) => (run_key(k), Some(binary::encode_run(offset, Some(s)))),
        Change::Ended(k) => (run_key(k), Some(binary::encode_run(offset, None))),
        Change::Forget(k) => (run_key(k), None),
    }
}

/// A run record's value, of any version up to `VERSION`.
pub fn decode_run(value: &[u8]) -> Result<RunRecord, RecordError> {
    if binary::is_binary(value) {
        binary::decode_run(value)
    } else {
        json::decode_run(value)
    }
}

/// The value of the meta record: the offset the state reflects and the partition's meta.
pub fn encode_meta(applied_offset: i64, meta: &PartitionMeta) -> Vec<u8> {
    json::encode_meta(applied_offset, meta)
}

/// The meta record: (applied offset, partition meta).
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) fn decode_meta(value: &[u8]) -> Result<(i64, PartitionMeta), RecordError> {
    json::decode_meta(value)
}

#[cfg(test)]
mod tests;
