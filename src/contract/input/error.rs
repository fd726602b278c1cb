//! Why a message is refused: one variant per reason, each with a stable code for the
//! dead-letter record and a sentence for the human who has to fix the producer.
use crate::contract::limits::MAX_DEPTH;

/// Why a message was rejected. `reason()` is the stable, machine-readable code that goes into
/// the dead-letter record; `Display` is the sentence for humans.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecodeError {
    #[error("message is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("message is a JSON {0}, expected an object")]
    NotAnObject(&'static str),
    #[error("field `v` is missing: every event must carry \"v\":1")]
    MissingVersion,
    #[error("unsupported contract version {0}: this eddy reads v=1")]
    UnsupportedVersion(String),
    #[error("field `kind` is missing: expected run_started, step or run_finished")]
    MissingKind,
    #[error("unknown kind `{0}`: expected run_started, step or run_finished")]
    UnknownKind(String),
    #[error("required field `{0}` is missing")]
    MissingField(&'static str),
    #[error("field `{field}` is invalid: {why}")]
    InvalidField { field: &'static str, why: String },
    #[error("message has no payload (null or zero bytes)")]
    EmptyPayload,
    #[error("message is {size} bytes, above the limit of {limit} (max_message_bytes)")]
    TooLarge { size: usize, limit: usize },
    #[error("message is not UTF-8 text: invalid byte at offset {0}")]
    InvalidUtf8(usize),
    #[error("JSON nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("field `{0}` appears more than once")]
    DuplicateField(String),
}

impl DecodeError {
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeError::InvalidJson(_) => "invalid_json",
            DecodeError::NotAnObject(_) => "not_an_object",
            DecodeError::MissingVersion => "missing_version",
            DecodeError::UnsupportedVersion(_) => "unsupported_version",
            DecodeError::MissingKind => "missing_kind",
            DecodeError::UnknownKind(_) => "unknown_kind",
            DecodeError::MissingField(_) => "missing_field",
            DecodeError::InvalidField { .. } => "invalid_field",
            DecodeError::EmptyPayload => "empty_payload",
            DecodeError::TooLarge { .. } => "too_large",
            DecodeError::InvalidUtf8(_) => "invalid_utf8",
            DecodeError::TooDeep => "too_deep",
            DecodeError::DuplicateField(_) => "duplicate_field",
        }
    }

    /// Every reason `reason()` can return, for docs, metrics and tests.
    pub const REASONS: &'static [&'static str] = &[
        "empty_payload",
        "too_large",
        "invalid_utf8",
        "invalid_json",
        "too_deep",
        "not_an_object",
        "duplicate_field",
        "missing_version",
        "unsupported_version",
        "missing_kind",
        "unknown_kind",
        "missing_field",
        "invalid_field",
    ];
}
