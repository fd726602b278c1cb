//! Why a message is refused: one variant per reason, each with a stable code for the
//! dead-letter record and a sentence for the human who has to fix the producer.
use crate::contract::limits::MAX_DEPTH;

/// Why a message was rejected. `reason()` is the stable, machine-readable code that goes into
/// the dead-letter record; `Display` is the sentence for humans.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecodeError {
    /// The payload is not JSON.
    #[error("message is not valid JSON: {0}")]
    InvalidJson(String),
    /// The payload is JSON but not an object (the JSON type found).
    #[error("message is a JSON {0}, expected an object")]
    NotAnObject(&'static str),
    /// No `v` field.
    #[error("field `v` is missing: every event must carry \"v\":1")]
    MissingVersion,
    /// A `v` other than 1.
    #[error("unsupported contract version {0}: this eddy reads v=1")]
    UnsupportedVersion(String),
    /// No `kind` field.
    #[error("field `kind` is missing: expected run_started, step or run_finished")]
    MissingKind,
    /// A `kind` this contract does not define.
    #[error("unknown kind `{0}`: expected run_started, step or run_finished")]
    UnknownKind(String),
    /// A field the kind requires is absent.
    #[error("required field `{0}` is missing")]
    MissingField(&'static str),
    /// A field is present but its value is not allowed.
    #[error("field `{field}` is invalid: {why}")]
    InvalidField {
        /// The field.
        field: &'static str,
        /// What is wrong with its value.
        why: String,
    },
    /// A null or empty Kafka message.
    #[error("message has no payload (null or zero bytes)")]
    EmptyPayload,
    /// The message exceeds `max_message_bytes`.
    #[error("message is {size} bytes, above the limit of {limit} (max_message_bytes)")]
    TooLarge {
        /// The message's size in bytes.
        size: usize,
        /// The limit it exceeds.
        limit: usize,
    },
    /// The payload is not UTF-8 (offset of the first bad byte).
    #[error("message is not UTF-8 text: invalid byte at offset {0}")]
    InvalidUtf8(usize),
    /// The JSON nests deeper than the decoder allows.
    #[error("JSON nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// A field appears twice in one object.
    #[error("field `{0}` appears more than once")]
    DuplicateField(String),
}

impl DecodeError {
    /// A stable machine-readable code for the error (the dead-letter record's `reason`).
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
