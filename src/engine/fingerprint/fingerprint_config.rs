//! What counts as volatile or secret in a payload: the `[detectors.fingerprint]`
//! configuration and its defaults, apart from the code that applies it.
use serde::{Deserialize, Serialize};

/// How volatile data is recognised. Defaults follow the union of what the peers strip
/// (loopcanary's request ids/timestamps, OpenClaw's message ids, OpenHands' ids).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FingerprintConfig {
    /// Keys removed at every depth of tool input and output. Matched case-insensitively with
    /// `_`/`-` ignored, so `request_id`, `requestId` and `Request-Id` are one entry.
    pub(crate) volatile_keys: Vec<String>,
    /// Also drop keys ending in `_at`/`At` (`created_at`, `sentAt`) or `timestamp`, keys ending
    /// in `request_id` / `trace_id` (any vendor's: `X-GitHub-Request-Id`), header-style
    /// rate-limit counters (`x-ratelimit-remaining`), and inside a headers object (a key ending
    /// in `headers`) the response headers that change on every response (`Date`, `ETag`, `Age`,
    /// `X-Cache`, CDN ids, timings, rate limits).
    pub(crate) volatile_key_suffixes: bool,
    /// Normalise volatile values inside strings (UUIDs, ISO date-times, clock times, 16+ char
    /// hex ids, epoch timestamps, fractional durations such as `0.53s`).
    pub(crate) normalize_values: bool,
    /// Tool input/output (and message `content`) larger than this many bytes is not parsed:
    /// it is fingerprinted by its length and the SHA-256 of its first `max_field_bytes` bytes,
    /// without normalisation, and detectors see only that summary. Bounds the work and memory
    /// per step whatever the message size. 0 = no limit.
    pub max_field_bytes: usize,
    /// Keys whose values are masked (`"<redacted>"`) at every depth of tool input and output
    /// before any detector, evidence or pattern sees them. Matched like `volatile_keys`
    /// (case-insensitive, `_`/`-` ignored). HTTP dump header lines with these names are masked
    /// too. The raw fingerprint of record still hashes the bytes as they arrived.
    pub(crate) redact_keys: Vec<String>,
}

/// Default `redact_keys`.
pub(crate) const REDACT_KEYS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "client_secret",
    "api_key",
    "apikey",
    "x_api_key",
    "access_token",
    "refresh_token",
    "id_token",
    "auth_token",
    "token",
    "authorization",
    "proxy_authorization",
    "cookie",
    "set_cookie",
    "private_key",
    "credentials",
];

/// What a masked value becomes.
pub(crate) const REDACTED: &str = "<redacted>";

impl Default for FingerprintConfig {
    fn default() -> Self {
        let keys = [
            "request_id",
            "trace_id",
            "span_id",
            "parent_span_id",
            "correlation_id",
            "idempotency_key",
            "nonce",
            "uuid",
            "timestamp",
            "ts",
            "created_at",
            "updated_at",
            "modified_at",
            "message_id",
            "tool_call_id",
            "call_id",
            "llm_response_id",
            "action_id",
            "elapsed",
            "elapsed_ms",
            "duration_ms",
            "latency_ms",
            "took",
            "took_ms",
            "response_time",
            "server_time",
            "receipt",
            "cache_buster",
            "_t",
            // Progress-tracking parameters that change on every call whatever the call does
            // (Cline strips `task_progress` before comparing calls; agents add turn and
            // attempt counters): the same call with a new counter is still the same call.
            "task_progress",
            "turn",
            "turn_count",
            "turn_number",
            "turn_index",
            "iteration",
            "attempt",
            "attempt_number",
            "retry_count",
            // Gymnasium's TimeLimit step counter, in RL observations: a counter, not a state.
            "elapsed_steps",
        ];
        Self {
            volatile_keys: keys.iter().map(|s| s.to_string()).collect(),
            volatile_key_suffixes: true,
            normalize_values: true,
            max_field_bytes: 256 * 1024,
            redact_keys: REDACT_KEYS.iter().map(|s| s.to_string()).collect(),
        }
    }
}
