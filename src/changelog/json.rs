//! Versions 1 to 4: JSON run records, read so that an upgrade restores what the previous
//! release wrote; and the meta record, which stays JSON (one per flush, read once per restore).
//!
//! Version 2 keeps the near-duplicate detector's MinHash inputs instead of full signatures
//! where smaller; version 3 writes signatures with 16-bit slots; version 4 writes them with
//! byte slots, keeps at most four feature hashes, the low halves of the progress detector's
//! recent keys, thoughts' information counts in 32 bits and no fingerprints for a run keelwave
//! already marked. The run state's `Deserialize` impls read every one of these shapes.
use super::{RecordError, RunRecord, VERSION};
use crate::engine::{PartitionMeta, RunState};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct RunRecordIn {
    v: u32,
    #[serde(default)]
    offset: Option<i64>,
    #[serde(default)]
    state: Option<RunState>,
    #[serde(default)]
    ended: bool,
}

#[derive(Serialize, Deserialize)]
struct MetaRecord {
    v: u32,
    applied_offset: i64,
    meta: PartitionMeta,
}

pub(crate) fn decode_run(value: &[u8]) -> Result<RunRecord, RecordError> {
    let rec: RunRecordIn = serde_json::from_slice(value)?;
    if rec.v > VERSION {
        return Err(RecordError::Newer(rec.v));
    }
    Ok(RunRecord {
        offset: rec.offset,
        state: if rec.ended { None } else { rec.state },
    })
}

/// The meta record, marked with the version this eddy writes.
pub(crate) fn encode_meta(applied_offset: i64, meta: &PartitionMeta) -> Vec<u8> {
    serde_json::to_vec(&MetaRecord {
        v: VERSION,
        applied_offset,
        meta: meta.clone(),
    })
    .unwrap_or_default()
}

#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) fn decode_meta(value: &[u8]) -> Result<(i64, PartitionMeta), RecordError> {
    let m: MetaRecord = serde_json::from_slice(value)?;
    if m.v > VERSION {
        return Err(RecordError::Newer(m.v));
    }
    Ok((m.applied_offset, m.meta))
}
