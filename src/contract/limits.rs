//! The decode limits both decoding paths (`input`'s serde path and `scan`'s one-pass scan)
//! apply, in one place so the two cannot drift apart.

/// JSON nesting deeper than this is rejected (`too_deep`) before serde_json's own recursion
/// limit (128) would report it as a generic syntax error.
pub const MAX_DEPTH: usize = 64;

/// Identifiers (`project_id`, `run_id`, `agent_name`, `step_type`, `tool_name`, `agent`,
/// `caller`) longer than this are rejected (`invalid_field`): they are kept in memory per open
/// run and stored in ClickHouse, so their size must be bounded whatever the message size.
pub const MAX_ID_BYTES: usize = 256;

/// Latest accepted event time: 9999-12-31T23:59:59.999Z (what RFC 3339 and ClickHouse can show).
pub const MAX_TS_MS: i64 = 253_402_300_799_999;
