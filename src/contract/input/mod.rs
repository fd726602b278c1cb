//! Decoding of input events (JSON, one object per Kafka message, key = run_id).
//!
//! Decoding is two-step on purpose: a flat, borrowed wire struct first (fast, and it keeps
//! `tool_input` as the exact bytes that arrived, which keelwave's fingerprint of record hashes),
//! then validation per `kind` into an owned [`Event`]. Every failure carries a machine-readable
//! reason so the dead-letter topic can say what to fix.
//!
//! Every message goes first through a fast path (`contract::scan`, then `decode_fast`): one pass
//! that locates the wire fields without serde and builds the event with the same checks. It
//! takes only well-formed input it is sure serde would read the same way, and only when the
//! event is valid; for anything else it declines and the serde path (`decode_serde`) decides,
//! so results and error texts are the serde path's, byte for byte. The tests hold the two paths
//! against each other on generated input.
//!
//! The files follow those steps: `types` holds the owned events, `error` the reasons a
//! message is refused, `fast` and `serde_path` the two decoders, `checks` and `number`
//! the field checks both decoders share (so that they cannot drift apart), and `ts` the
//! timestamp text of the contract, read and written.
mod checks;
mod error;
mod fast;
mod number;
mod serde_path;
mod ts;
mod types;

use fast::decode_fast;
use serde_path::decode_serde;

pub use super::limits::{MAX_DEPTH, MAX_ID_BYTES, MAX_TS_MS};
pub use error::DecodeError;
// `scan`'s tests check its field table against the wire struct's string fields.
#[cfg(test)]
pub(super) use serde_path::STRING_FIELDS;
pub(crate) use ts::format_ts;
#[cfg(feature = "server")]
pub(crate) use types::ReportedTotals;
pub(crate) use types::TerminationReason;
#[cfg(feature = "server")]
pub(crate) use types::STEER_STEP_TYPE;
pub use types::{Event, JsonText, RunFinished, RunKey, RunStarted, RunStatus, Step};

/// The checks the worker applies before [`decode`]: a payload must be present, at most
/// `max_bytes` long and UTF-8. Then the message is decoded.
pub fn decode_bounded(payload: Option<&[u8]>, max_bytes: usize) -> Result<Event, DecodeError> {
    let bytes = match payload {
        None => return Err(DecodeError::EmptyPayload),
        Some([]) => return Err(DecodeError::EmptyPayload),
        Some(b) => b,
    };
    if bytes.len() > max_bytes {
        return Err(DecodeError::TooLarge {
            size: bytes.len(),
            limit: max_bytes,
        });
    }
    decode(bytes)
}

/// Decode one message payload.
pub fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
    let text = utf8(bytes)?;
    if let Some(event) = decode_fast(text) {
        return Ok(event);
    }
    decode_serde(bytes, text)
}

fn utf8(bytes: &[u8]) -> Result<&str, DecodeError> {
    if bytes.is_empty() {
        return Err(DecodeError::EmptyPayload);
    }
    // The SIMD check says only valid or not; std's says where it breaks, for the reason.
    match simdutf8::basic::from_utf8(bytes) {
        Ok(t) => Ok(t),
        Err(_) => match std::str::from_utf8(bytes) {
            Ok(t) => Ok(t),
            Err(e) => Err(DecodeError::InvalidUtf8(e.valid_up_to())),
        },
    }
}

#[cfg(test)]
mod tests;
