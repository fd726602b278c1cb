//! Version 5: binary run records.
//!
//! A record is a two-byte frame, [`MAGIC`] then the version, followed by the MessagePack
//! encoding of `(offset, state)`, the state `None` for an ended run. The magic byte can start
//! no JSON text, so one look tells a binary record from the JSON of versions 1 to 4.
//!
//! MessagePack is JSON's data model in binary: integers and byte slots in one to nine bytes
//! instead of up to twenty digits, and no number parsing on reading. Structs are written as
//! arrays of their fields in declaration order (no field names), read back by the same serde
//! impls that read the JSON versions. So the order of a persisted type's fields is part of
//! this format: a new field goes last, with a default (older records then read without it),
//! and fields only JSON records carry are declared after every binary one.
use super::{RecordError, RunRecord};
use crate::engine::RunState;

/// `0xED` ("eddy"): not a byte any JSON text starts with.
pub(crate) const MAGIC: u8 = 0xED;
pub(crate) const VERSION: u32 = 5;

pub(crate) fn is_binary(value: &[u8]) -> bool {
    value.first() == Some(&MAGIC)
}

pub(crate) fn encode_run(offset: i64, state: Option<&RunState>) -> Vec<u8> {
    let mut out = vec![MAGIC, VERSION as u8];
    // Writing into a vector fails only for values MessagePack cannot represent (none of the
    // run state's: the round-trip tests cover every persisted type).
    rmp_serde::encode::write(&mut out, &(offset, state)).expect("run state encodes");
    out
}

pub(crate) fn decode_run(value: &[u8]) -> Result<RunRecord, RecordError> {
    let [MAGIC, v, body @ ..] = value else {
        return Err(RecordError::Binary("no binary frame".into()));
    };
    match u32::from(*v) {
        VERSION => {}
        v if v > VERSION => return Err(RecordError::Newer(v)),
        v => return Err(RecordError::Binary(format!("no binary version {v}"))),
    }
    let mut rest = body;
    let (offset, state): (i64, Option<RunState>) =
        serde::Deserialize::deserialize(&mut rmp_serde::Deserializer::new(&mut rest))
            .map_err(|e| RecordError::Binary(e.to_string()))?;
    if !rest.is_empty() {
        return Err(RecordError::Binary(format!(
            "{} bytes after the run state",
            rest.len()
        )));
    }
    Ok(RunRecord {
        offset: Some(offset),
        state,
    })
}
