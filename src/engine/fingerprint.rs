//! Fingerprints of a step.
//!
//! `raw` is keelwave's fingerprint of record (server formula): `sha256(tool_name || 0x00 ||
//! raw tool_input bytes)`, the bytes exactly as they arrived, so `/loops` answers match keelwave.
//!
//! `canonical_input` / `canonical_output` are eddy's own canonical JSON (keys sorted at every
//! depth by UTF-8 bytes, numbers normalised so `1.0 == 1`, strings re-escaped one way) after
//! removing volatile keys and normalising volatile values. It resembles RFC 8785 but is not it;
//! docs/fingerprints.md defines it exactly, versioned, with test vectors. Two calls that differ
//! only by key order, a request id or a timestamp get the same canonical fingerprint.
use super::json::{Json, Object};
use super::text::normalize_volatile_cow;
use crate::contract::{JsonText, Step};
use rustc_hash::FxHasher;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

pub type Fp = [u8; 32];

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepFingerprints {
    /// keelwave's fingerprint of record; `None` when the step has no tool_name.
    pub raw: Option<Fp>,
    /// Canonical tool + input; `None` when the step has no tool_name.
    pub canonical_input: Option<Fp>,
    /// Canonical output + success flag; `None` when the step has no tool_name.
    pub canonical_output: Option<Fp>,
}

/// How volatile data is recognised. Defaults follow the union of what the peers strip
/// (loopcanary's request ids/timestamps, OpenClaw's message ids, OpenHands' ids).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FingerprintConfig {
    /// Keys removed at every depth of tool input and output. Matched case-insensitively with
    /// `_`/`-` ignored, so `request_id`, `requestId` and `Request-Id` are one entry.
    pub volatile_keys: Vec<String>,
    /// Also drop keys ending in `_at`/`At` (`created_at`, `sentAt`) or `timestamp`.
    pub volatile_key_suffixes: bool,
    /// Normalise volatile values inside strings (UUIDs, ISO date-times, clock times, 16+ char
    /// hex ids, epoch timestamps, fractional durations such as `0.53s`).
    pub normalize_values: bool,
    /// Tool input/output (and message `content`) larger than this many bytes is not parsed:
    /// it is fingerprinted by its length and the SHA-256 of its first `max_field_bytes` bytes,
    /// without normalisation, and detectors see only that summary. Bounds the work and memory
    /// per step whatever the message size. 0 = no limit.
    pub max_field_bytes: usize,
    /// Keys whose values are masked (`"<redacted>"`) at every depth of tool input and output
    /// before any detector, evidence or pattern sees them. Matched like `volatile_keys`
    /// (case-insensitive, `_`/`-` ignored). HTTP dump header lines with these names are masked
    /// too. The raw fingerprint of record still hashes the bytes as they arrived.
    pub redact_keys: Vec<String>,
}

/// Default `redact_keys`.
pub const REDACT_KEYS: &[&str] = &[
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
pub const REDACTED: &str = "<redacted>";

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

/// Response headers that differ on every response, in [`key_norm`] form.
const HTTP_VOLATILE_HEADERS: &[&str] = &[
    "date",
    "expires",
    "lastmodified",
    "age",
    "etag",
    "setcookie",
    "servertiming",
    "xruntime",
    "xresponsetime",
    "xenvoyupstreamservicetime",
    "cfray",
    "xamzcfid",
    "xamzntraceid",
    "xamzrequestid",
    "xservedby",
    "xtimer",
    "reportto",
    "nel",
];

/// Key comparison form: lowercase ASCII alphanumerics only.
pub fn key_norm(k: &str) -> String {
    k.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// [`key_norm`] without allocating for ordinary key lengths: every key of every payload is
/// looked up, so this runs for each of them on every step. As bytes: the form is ASCII, and
/// checking that it is UTF-8 again cost a call per key.
fn with_key_norm<R>(k: &str, f: impl FnOnce(&[u8]) -> R) -> R {
    let mut buf = [0u8; 64];
    let mut n = 0;
    for b in k.bytes() {
        if b.is_ascii_alphanumeric() {
            if n == buf.len() {
                return f(key_norm(k).as_bytes());
            }
            buf[n] = b.to_ascii_lowercase();
            n += 1;
        }
    }
    f(&buf[..n])
}

/// What a [`key_norm`] form is configured as: [`VOLATILE`] and/or [`REDACT`] bits.
#[derive(Debug, Clone, Default)]
struct KeyFlags {
    map: HashMap<Box<[u8]>, u8, BuildHasherDefault<FxHasher>>,
    /// One bit per [`KeyFlags::bucket`] of a configured form. Nearly every key of a payload is
    /// not configured, and this answers for most of them without hashing the key.
    filter: [u64; 8],
}
const VOLATILE: u8 = 1;
const REDACT: u8 = 2;

impl KeyFlags {
    /// 0..512 from the length and the first and last bytes: no loop over the key.
    fn bucket(b: &[u8]) -> usize {
        let (first, last) = (b.first().copied(), b.last().copied());
        let h = (b.len() as u32).wrapping_mul(0x9E37_79B1)
            ^ u32::from(first.unwrap_or(0)).wrapping_mul(0x85EB_CA77)
            ^ u32::from(last.unwrap_or(0)).wrapping_mul(0xC2B2_AE3D);
        (h >> 23) as usize
    }

    fn add(&mut self, norm: String, flag: u8) {
        let i = Self::bucket(norm.as_bytes());
        self.filter[i / 64] |= 1 << (i % 64);
        *self
            .map
            .entry(norm.into_bytes().into_boxed_slice())
            .or_default() |= flag;
    }

    fn get(&self, norm: &[u8]) -> u8 {
        let i = Self::bucket(norm);
        if self.filter[i / 64] & (1 << (i % 64)) == 0 {
            return 0;
        }
        self.map.get(norm).copied().unwrap_or(0)
    }
}

fn add_keys<'a>(set: &mut KeyFlags, keys: impl IntoIterator<Item = &'a String>, flag: u8) {
    for k in keys {
        set.add(key_norm(k), flag);
    }
}

/// The volatile and redact keys of one resolved configuration, in [`key_norm`] form. Built once
/// per configuration (the engine caches it with the resolved detector configuration) rather
/// than per step: normalising the ~50 configured keys on every step was a fifth of the engine's
/// time. One map for both, so each key of a payload costs one lookup.
#[derive(Debug, Clone, Default)]
pub struct KeySets {
    keys: KeyFlags,
    /// Tools with volatile keys of their own: the global keys plus theirs.
    per_tool: HashMap<String, KeyFlags, BuildHasherDefault<FxHasher>>,
    suffixes: bool,
    values: bool,
}

impl KeySets {
    /// The key sets of `fp`, with each tool's own extra volatile keys (`tool_keys`: tool
    /// name, keys; a detector configuration's tool policies).
    pub fn new<'a>(
        fp: &FingerprintConfig,
        tool_keys: impl IntoIterator<Item = (&'a str, &'a [String])>,
    ) -> Self {
        let mut keys = KeyFlags::default();
        add_keys(&mut keys, &fp.volatile_keys, VOLATILE);
        add_keys(&mut keys, &fp.redact_keys, REDACT);
        let per_tool = tool_keys
            .into_iter()
            .filter(|(_, extra)| !extra.is_empty())
            .map(|(t, extra)| {
                let mut own = keys.clone();
                add_keys(&mut own, extra, VOLATILE);
                (t.to_string(), own)
            })
            .collect();
        Self {
            keys,
            per_tool,
            suffixes: fp.volatile_key_suffixes,
            values: fp.normalize_values,
        }
    }

    /// The rule for one step's tool.
    pub fn volatility(&self, tool: Option<&str>) -> Volatility<'_> {
        let keys = tool
            .and_then(|t| self.per_tool.get(t))
            .unwrap_or(&self.keys);
        Volatility {
            keys,
            suffixes: self.suffixes,
            values: self.values,
        }
    }
}

/// The volatile-key rule for one tool: borrowed from [`KeySets`], nothing built per step.
pub struct Volatility<'a> {
    keys: &'a KeyFlags,
    suffixes: bool,
    values: bool,
}

impl Volatility<'_> {
    fn flags(&self, norm: &[u8]) -> u8 {
        self.keys.get(norm)
    }

    /// `norm` is `key_norm(k)`, `flags` its [`Volatility::flags`].
    fn is_volatile_key(&self, k: &str, norm: &[u8], flags: u8) -> bool {
        if flags & VOLATILE != 0 {
            return true;
        }
        if !self.suffixes {
            return false;
        }
        let b = k.as_bytes();
        let n = b.len();
        // `created_at` / `sentAt` (a lowercase letter before `At`) / `...timestamp`.
        (n > 3 && k.ends_with("_at"))
            || (n > 2 && k.ends_with("At") && b[n - 3].is_ascii_lowercase())
            || (n > 9 && norm.ends_with(b"timestamp"))
    }

    /// An HTTP response dump (`curl -i`, a raw client log): the values of volatile header
    /// lines (the volatile keys, with or without an `x-` prefix, plus headers that change on
    /// every response: date, age, etag, timings, CDN ids) are blanked; the status line and the
    /// body are kept.
    fn http_headers<'s>(&self, s: &'s str) -> Cow<'s, str> {
        if !s.trim_start().starts_with("HTTP/") {
            return Cow::Borrowed(s);
        }
        let mut out = String::with_capacity(s.len());
        let mut in_headers = true;
        for (i, line) in s.split('\n').enumerate() {
            if i > 0 {
                out.push('\n');
            }
            if in_headers && i > 0 {
                if line.trim().is_empty() {
                    in_headers = false;
                } else if let Some((name, _)) = line.split_once(':') {
                    let k = key_norm(name);
                    if self.flags(k.as_bytes()) & REDACT != 0 {
                        out.push_str(name);
                        out.push_str(": ");
                        out.push_str(REDACTED);
                        continue;
                    }
                    let bare = k.strip_prefix('x').filter(|_| name.starts_with(['x', 'X']));
                    if HTTP_VOLATILE_HEADERS.contains(&k.as_str())
                        || self.flags(k.as_bytes()) & VOLATILE != 0
                        || bare.is_some_and(|b| self.flags(b.as_bytes()) & VOLATILE != 0)
                    {
                        out.push_str(name);
                        out.push_str(": <volatile>");
                        continue;
                    }
                }
            }
            out.push_str(line);
        }
        Cow::Owned(out)
    }

    /// The normalised value: volatile keys removed at every depth, strings normalised, numbers
    /// in one form. Keys are sorted on output by [`write_canonical`].
    pub fn normalize(&self, v: &Value) -> Value {
        let mut v = v.clone();
        self.normalize_in_place(&mut v);
        v
    }

    /// [`Volatility::normalize`] on a value the caller owns: the parsed payload is edited
    /// where it lies instead of being copied node by node.
    pub fn normalize_in_place(&self, v: &mut Value) {
        match v {
            Value::Object(m) => {
                // Most objects lose no key: edit them in one pass and rebuild only those that do.
                let mut drop = false;
                for (k, x) in m.iter_mut() {
                    with_key_norm(k, |norm| {
                        let flags = self.flags(norm);
                        if flags & REDACT != 0 {
                            *x = Value::String(REDACTED.into());
                        } else if self.is_volatile_key(k, norm, flags) {
                            drop = true;
                        } else {
                            self.normalize_in_place(x);
                        }
                    });
                }
                if drop {
                    m.retain(|k, _| {
                        with_key_norm(k, |norm| {
                            let flags = self.flags(norm);
                            flags & REDACT != 0 || !self.is_volatile_key(k, norm, flags)
                        })
                    });
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.normalize_in_place(x)),
            Value::String(s) => {
                if let Some(c) = self.normalize_str(s) {
                    *s = c;
                }
            }
            Value::Number(n) => *n = normalize_number(n),
            _ => {}
        }
    }

    /// The normalised form of a string value, `None` when it is unchanged.
    fn normalize_str(&self, s: &str) -> Option<String> {
        if !self.values {
            return None;
        }
        match self.http_headers(s) {
            Cow::Borrowed(b) if !may_hold_volatile(b) => None,
            Cow::Borrowed(b) => match normalize_volatile_cow(b) {
                Cow::Borrowed(_) => None,
                Cow::Owned(o) => Some(o),
            },
            Cow::Owned(h) => Some(normalize_volatile_cow(&h).into_owned()),
        }
    }

    /// [`parse_raw`] then [`Volatility::normalize_in_place`], in one pass: volatile keys are
    /// dropped and strings normalised as they are read, so the tree is walked once, and a
    /// string left as it arrived is borrowed from `raw`. Same result, errors included (an
    /// unparsable payload is normalised as a string).
    pub fn parse_normalized<'r>(&self, raw: Option<&'r JsonText>) -> Json<'r> {
        let Some(r) = raw else {
            return Json::Null;
        };
        let mut de = serde_json::Deserializer::from_str(r.get());
        match Normalizing(self)
            .deserialize(&mut de)
            .and_then(|v| de.end().map(|()| v))
        {
            Ok(v) => v,
            Err(_) => Json::String(
                self.normalize_str(r.get())
                    .map_or(Cow::Borrowed(r.get()), Cow::Owned),
            ),
        }
    }
}

/// Whether [`normalize_volatile_cow`] can change `s`: every volatile value it replaces holds
/// an ASCII digit, except a UUID, which holds `-`. A cheaper scan than its per-byte matcher,
/// and most strings (words, paths, queries) hold neither.
fn may_hold_volatile(s: &str) -> bool {
    let hit = |c: u8| c.is_ascii_digit() || c == b'-';
    // A block's bytes are tested without an exit per byte, which the compiler turns into
    // vector compares: the strings that hold neither, read to their end, are most of the cost.
    let mut blocks = s.as_bytes().chunks_exact(32);
    for b in &mut blocks {
        if b.iter().fold(false, |any, &c| any | hit(c)) {
            return true;
        }
    }
    blocks.remainder().iter().any(|&c| hit(c))
}

/// serde_json's `Value` reads an object whose first key is this as the JSON text of its
/// value (its `RawValue` round trip); [`Normalizing`] must read such payloads the same way.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Builds the normalised [`Json`] while deserialising: what serde_json's `Value` visitor does,
/// followed by what [`Volatility::normalize_in_place`] does to each node.
struct Normalizing<'v, 'k>(&'v Volatility<'k>);

impl<'de> DeserializeSeed<'de> for Normalizing<'_, '_> {
    type Value = Json<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Json<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Normalizing<'_, '_> {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Json<'de>, E> {
        Ok(Json::Bool(b))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Json<'de>, E> {
        Ok(Json::Number(i.into()))
    }

    fn visit_u64<E>(self, u: u64) -> Result<Json<'de>, E> {
        Ok(Json::Number(u.into()))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Json<'de>, E> {
        Ok(serde_json::Number::from_f64(f)
            .map_or(Json::Null, |n| Json::Number(normalize_number(&n))))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::String(
            self.0.normalize_str(s).map_or(Cow::Borrowed(s), Cow::Owned),
        ))
    }

    fn visit_str<E>(self, s: &str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(
            self.0.normalize_str(s).unwrap_or_else(|| s.to_owned()),
        )))
    }

    fn visit_string<E>(self, s: String) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(
            self.0.normalize_str(&s).unwrap_or(s),
        )))
    }

    fn visit_none<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Json<'de>, D::Error> {
        self.deserialize(d)
    }

    fn visit_unit<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = seq.next_element_seed(Normalizing(self.0))? {
            v.push(x);
        }
        Ok(Json::Array(v))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        let vol = self.0;
        let mut out = Vec::new();
        let mut first = true;
        while let Some(k) = map.next_key_seed(KeySeed)? {
            if std::mem::take(&mut first) && k == RAW_VALUE_TOKEN {
                let text: String = map.next_value()?;
                let mut v: Value = serde_json::from_str(&text).map_err(de::Error::custom)?;
                vol.normalize_in_place(&mut v);
                return Ok(Json::from_value(v));
            }
            let (redact, volatile) = with_key_norm(&k, |norm| {
                let flags = vol.flags(norm);
                (
                    flags & REDACT != 0,
                    flags & REDACT == 0 && vol.is_volatile_key(&k, norm, flags),
                )
            });
            if redact || volatile {
                // Read as serde_json would, so a payload it rejects is rejected here too.
                let _: Value = map.next_value()?;
                if redact {
                    out.push((k, Json::String(Cow::Borrowed(REDACTED))));
                }
            } else {
                let v = map.next_value_seed(Normalizing(vol))?;
                out.push((k, v));
            }
        }
        Ok(Json::Object(Object::from_entries(out)))
    }
}

/// An object key, borrowed from the payload when it has no escapes: a dropped key costs no
/// allocation.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(s))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(s))
    }
}

fn normalize_number(n: &serde_json::Number) -> serde_json::Number {
    if n.is_i64() || n.is_u64() {
        return n.clone();
    }
    match n.as_f64() {
        // Integral floats become integers so `1.0 == 1` (RFC 8785 prints both as `1`).
        Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => serde_json::Number::from(f as i64),
        Some(f) => serde_json::Number::from_f64(f).unwrap_or_else(|| n.clone()),
        None => n.clone(),
    }
}

/// eddy's canonical serialisation (docs/fingerprints.md): object keys sorted by UTF-8 bytes at
/// every depth (a [`Json`] object holds them so), no whitespace, strings escaped the way
/// serde_json does.
pub fn write_canonical(v: &Json<'_>, out: &mut String) {
    match v {
        Json::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_canonical(x, out);
            }
            out.push('}');
        }
        Json::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        Json::String(s) => write_string(s, out),
        Json::Number(n) => {
            // Integers (nearly every number) without the formatting machinery: digits as
            // serde_json's `Display` writes them.
            if let Some(u) = n.as_u64() {
                write_u64(u, out);
            } else if let Some(i) = n.as_i64() {
                if i < 0 {
                    out.push('-');
                }
                write_u64(i.unsigned_abs(), out);
            } else {
                use std::fmt::Write;
                // Writing to a String cannot fail.
                let _ = write!(out, "{}", normalize_number(n));
            }
        }
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Null => out.push_str("null"),
    }
}

fn write_u64(mut u: u64, out: &mut String) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or(""));
}

/// A JSON string exactly as serde_json writes it: `"` and `\` escaped, control characters as
/// `\b \t \n \f \r` or `\u00xx` (lowercase hex), everything else (non-ASCII included) as is.
fn write_string(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let b = s.as_bytes();
    let mut start = 0;
    loop {
        let i = start + to_escape(&b[start..]);
        let Some(&c) = b.get(i) else {
            break;
        };
        let esc: &str = match c {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0c => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            _ => "",
        };
        // Escaped bytes are ASCII, so `i` is a character boundary.
        out.push_str(&s[start..i]);
        start = i + 1;
        if esc.is_empty() {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(c >> 4)]));
            out.push(char::from(HEX[usize::from(c & 0xf)]));
        } else {
            out.push_str(esc);
        }
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Where the first byte [`write_string`] escapes (`"`, `\\` or a control character) is in `b`,
/// or `b.len()`. Eight bytes per step: nearly every string has nothing to escape, and this runs
/// over every byte of every payload's canonical text.
fn to_escape(b: &[u8]) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // Whether any byte of `x` is zero; exact as a whole (no false positives), which is all
    // that is asked here: the bytes of a flagged word are then read one by one.
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH != 0;
    let special = |c: u8| c < 0x20 || c == b'"' || c == b'\\';
    let mut chunks = b.chunks_exact(8);
    let mut at = 0;
    for c in chunks.by_ref() {
        let mut w = [0; 8];
        w.copy_from_slice(c);
        let x = u64::from_ne_bytes(w);
        // Whether any byte is below 0x20: exact as a whole, like `has_zero` (bytes from 0x80
        // up, which UTF-8 text has, are cleared by the `!x`).
        let control = x.wrapping_sub(ONES * 0x20) & !x & HIGH != 0;
        if control
            || has_zero(x ^ (ONES * u64::from(b'"')))
            || has_zero(x ^ (ONES * u64::from(b'\\')))
        {
            if let Some(p) = c.iter().position(|&c| special(c)) {
                return at + p;
            }
        }
        at += 8;
    }
    at + chunks
        .remainder()
        .iter()
        .position(|&c| special(c))
        .unwrap_or(chunks.remainder().len())
}

pub fn canonical_string(v: &Json<'_>) -> String {
    let mut s = String::new();
    write_canonical(v, &mut s);
    s
}

/// Parse raw JSON; an unparsable payload (cannot happen for decoded events) is kept as a string.
#[cfg(test)]
pub(crate) fn parse_raw(raw: Option<&JsonText>) -> Value {
    match raw {
        None => Value::Null,
        Some(r) => {
            serde_json::from_str(r.get()).unwrap_or_else(|_| Value::String(r.get().to_string()))
        }
    }
}

fn digest(domain: &[u8], parts: &[&[u8]]) -> Fp {
    let mut h = Sha256::new();
    h.update(domain);
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().into()
}

pub fn canonical_input_fp(tool: &str, canon_input: &str) -> Fp {
    digest(
        b"eddy.canon.input.v1",
        &[tool.as_bytes(), canon_input.as_bytes()],
    )
}

pub fn canonical_output_fp(success: Option<bool>, canon_output: &str) -> Fp {
    let flag: &[u8] = match success {
        Some(true) => b"1",
        Some(false) => b"0",
        None => b"-",
    };
    digest(b"eddy.canon.output.v1", &[flag, canon_output.as_bytes()])
}

/// The normalised payloads of a step, computed once and shared by all detectors; their
/// strings borrow from the step's.
pub struct Canonical<'s> {
    pub fps: StepFingerprints,
    pub input: Json<'s>,
    pub output: Json<'s>,
    pub input_text: String,
    pub output_text: String,
    /// `max_field_bytes` in effect (detectors read message content up to it).
    pub max_field_bytes: usize,
}

/// Buffers for a step's canonical input and output texts.
#[derive(Debug, Default)]
pub struct TextBufs(String, String);

/// A field above `max_field_bytes`: its length and the SHA-256 of its first `max` bytes. No
/// text of it is kept, so nothing of it (secrets included) can reach evidence.
fn oversized(raw: &str, max: usize) -> Json<'static> {
    let digest: Fp = Sha256::digest(&raw.as_bytes()[..max.min(raw.len())]).into();
    Json::String(Cow::Owned(format!(
        "<oversized {} bytes, prefix sha256 {}>",
        raw.len(),
        hex::encode(&digest[..16])
    )))
}

/// Parse a field, or summarise it when it is above `max` bytes (0 = no limit).
fn parse_bounded(raw: Option<&JsonText>, max: usize) -> Option<Json<'static>> {
    match raw {
        Some(r) if max > 0 && r.get().len() > max => Some(oversized(r.get(), max)),
        _ => None,
    }
}

impl<'s> Canonical<'s> {
    /// `keys` must be the key sets of the configuration `fp` belongs to (see
    /// `DetectorConfig::canonical` for one-off use).
    pub fn compute_with(step: &'s Step, fp: &FingerprintConfig, keys: &KeySets) -> Self {
        Self::compute_in(step, fp, keys, TextBufs::default())
    }

    /// [`Canonical::compute_with`], writing the canonical texts into `bufs` (from
    /// [`Canonical::into_parts`] of an earlier step): two allocations less per step.
    pub fn compute_in(
        step: &'s Step,
        fp: &FingerprintConfig,
        keys: &KeySets,
        bufs: TextBufs,
    ) -> Self {
        let raw = step
            .tool_name
            .as_deref()
            .map(|name| keelwave_raw(name, step.tool_input.as_ref().map(|r| r.get())));
        let vol = keys.volatility(step.tool_name.as_deref());
        let max = fp.max_field_bytes;
        let field = |raw: Option<&'s JsonText>| {
            parse_bounded(raw, max).unwrap_or_else(|| vol.parse_normalized(raw))
        };
        let input = field(step.tool_input.as_ref());
        let output = field(step.tool_output.as_ref());
        let text = |v: &Json<'_>, raw: Option<&JsonText>, mut s: String| {
            s.clear();
            // The canonical form is about as long as the payload: size it once.
            s.reserve(raw.map_or(8, |r| r.get().len() + 8));
            write_canonical(v, &mut s);
            s
        };
        let input_text = text(&input, step.tool_input.as_ref(), bufs.0);
        let output_text = text(&output, step.tool_output.as_ref(), bufs.1);
        let (ci, co) = match step.tool_name.as_deref() {
            Some(t) => (
                Some(canonical_input_fp(t, &input_text)),
                Some(canonical_output_fp(step.tool_success, &output_text)),
            ),
            None => (None, None),
        };
        Self {
            fps: StepFingerprints {
                raw,
                canonical_input: ci,
                canonical_output: co,
            },
            input,
            output,
            input_text,
            output_text,
            max_field_bytes: max,
        }
    }

    /// The fingerprints, and the texts' buffers for the next step's [`Canonical::compute_in`]
    /// (a buffer grown past 64 KiB by a large payload is dropped rather than kept).
    pub fn into_parts(self) -> (StepFingerprints, TextBufs) {
        let keep = |s: String| {
            if s.capacity() > 64 * 1024 {
                String::new()
            } else {
                s
            }
        };
        (
            self.fps,
            TextBufs(keep(self.input_text), keep(self.output_text)),
        )
    }

    /// A step's message content, cut to `max_field_bytes` (at a character boundary).
    pub fn content<'t>(&self, step: &'t Step) -> Option<&'t str> {
        let c = step.content.as_deref()?;
        if self.max_field_bytes == 0 || c.len() <= self.max_field_bytes {
            return Some(c);
        }
        let mut end = self.max_field_bytes;
        while !c.is_char_boundary(end) {
            end -= 1;
        }
        Some(&c[..end])
    }
}

/// `sha256(tool_name || 0x00 || tool_input)`; an omitted input hashes as `sha256(name || 0x00)`.
pub fn keelwave_raw(tool_name: &str, tool_input: Option<&str>) -> Fp {
    let mut h = Sha256::new();
    h.update(tool_name.as_bytes());
    h.update([0u8]);
    if let Some(input) = tool_input {
        h.update(input.as_bytes());
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::detectors::DetectorConfig;

    /// Vectors from keelwave's wire contract (server formula over httpx-serialised bytes).
    #[test]
    fn keelwave_server_vectors() {
        let cases = [
            (
                "web_search",
                Some(r#"{"q":"keelwave"}"#),
                "4f7c82ef6cf35555fcf58350e7d571fb609ea283aeba537b8a890386bd201f23",
            ),
            (
                "web_search",
                Some(r#"{"q":"keelwave","limit":5}"#),
                "360e2b692d686bc778140f529f279b3bc577e92897f2f3e751a9401690d697d5",
            ),
            (
                "web_search",
                Some(r#"{"limit":5,"q":"keelwave"}"#),
                "e4f39d80694868439d3bcaae439f50e8b8b99aa0f8096dd9d000817cfc09af0d",
            ),
            (
                "search",
                Some("{\"q\":\"caf\u{e9}\"}"),
                "342899b6267516f87e92bde0b99a7322c8d78716931c1561034b5073f8e93881",
            ),
            (
                "get_quota",
                Some("{}"),
                "b1242d11109b1c072a3ee6af7661e03c47e18df7d05d496809b5d02f5ffb25c3",
            ),
            (
                "web_search",
                None,
                "37dae15233f41c2974e656fe0ffacb5398ad9a69cacdde6c200d352f4b8c87a5",
            ),
        ];
        for (name, input, want) in cases {
            assert_eq!(
                hex::encode(keelwave_raw(name, input)),
                want,
                "{name} {input:?}"
            );
        }
    }

    fn canon(json: &str) -> String {
        let v: Value = serde_json::from_str(json).unwrap();
        let keys = DetectorConfig::default().key_sets();
        canonical_string(&Json::from_value(keys.volatility(None).normalize(&v)))
    }

    #[test]
    fn strings_are_escaped_like_serde_json() {
        let mut cases: Vec<String> = (0u32..0x80)
            .filter_map(char::from_u32)
            .map(|c| format!("a{c}b"))
            .collect();
        cases.extend(
            ["", "caf\u{e9} \u{1f600} \u{2028}", "\"\\\u{7f}\u{0}\u{1f}"].map(String::from),
        );
        for c in cases {
            let mut out = String::new();
            write_string(&c, &mut out);
            assert_eq!(out, serde_json::to_string(&c).unwrap(), "{c:?}");
        }
    }

    /// The scan reads eight bytes at a time: every ASCII byte at every offset of a word, and
    /// in the tail, next to multi-byte characters, must still be escaped where serde_json does.
    #[test]
    fn long_strings_are_escaped_like_serde_json() {
        for c in (0u32..0x80).filter_map(char::from_u32) {
            for at in 0..19 {
                for filler in ["x", "\u{e9}"] {
                    let mut s: String = filler.repeat(at);
                    s.push(c);
                    s.push_str(&"y".repeat(19 - at));
                    s.push(c);
                    let mut out = String::new();
                    write_string(&s, &mut out);
                    assert_eq!(out, serde_json::to_string(&s).unwrap(), "{s:?}");
                }
            }
        }
    }

    #[test]
    fn http_response_dumps_drop_volatile_headers() {
        let a = canon(
            r#"{"out":"HTTP/1.1 200 OK\ndate: Mon, 11 May 2026 14:35:42 GMT\nx-request-id: 8060c5e0\nx-envoy-upstream-service-time: 11\ncontent-type: application/json\n\n{\"status\":\"Failed\"}"}"#,
        );
        let b = canon(
            r#"{"out":"HTTP/1.1 200 OK\ndate: Tue, 12 May 2026 09:01:02 GMT\nx-request-id: 1b77c36a\nx-envoy-upstream-service-time: 52\ncontent-type: application/json\n\n{\"status\":\"Failed\"}"}"#,
        );
        assert_eq!(a, b);
        let c = canon(
            r#"{"out":"HTTP/1.1 200 OK\ndate: Tue, 12 May 2026 09:01:02 GMT\ncontent-type: application/json\n\n{\"status\":\"Ready\"}"}"#,
        );
        assert_ne!(a, c);
        // Not an HTTP dump: left alone.
        assert!(canon(r#"{"out":"date: 2026"}"#).contains("2026"));
    }

    #[test]
    fn canonical_form_sorts_keys_and_numbers() {
        assert_eq!(
            canon(r#"{"b":1.0,"a":{"y":[1e2,2.5],"x":"s"}}"#),
            r#"{"a":{"x":"s","y":[100,2.5]},"b":1}"#
        );
        assert_eq!(
            canon(r#"{"q":"caf\u00e9"}"#),
            canon("{\"q\":\"caf\u{e9}\"}")
        );
    }

    #[test]
    fn redacted_keys_are_masked_at_every_depth_and_in_http_dumps() {
        let c = canon(
            r#"{"q":"x","auth":{"API-Key":"sk-live-123","nested":[{"password":"hunter2"}]},"out":"HTTP/1.1 401\nAuthorization: Bearer abc.def\n\nno"}"#,
        );
        assert!(
            !c.contains("sk-live-123") && !c.contains("hunter2") && !c.contains("abc.def"),
            "{c}"
        );
        assert!(c.contains(REDACTED), "{c}");
        // Different secrets, same call: same canonical form.
        assert_eq!(
            canon(r#"{"q":1,"token":"a"}"#),
            canon(r#"{"q":1,"token":"b"}"#)
        );
    }

    #[test]
    fn oversized_fields_are_summarised_not_parsed() {
        let mut cfg = DetectorConfig::default();
        cfg.fingerprint.max_field_bytes = 1024;
        let big = format!(r#"{{"data":"{}","api_key":"sk-secret"}}"#, "x".repeat(4000));
        let line = format!(
            r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1,"step_index":1,"step_type":"tool_call","tool_name":"t","tool_input":{{}},"tool_output":{big}}}"#
        );
        let crate::contract::Event::Step(s) = crate::contract::decode(line.as_bytes()).unwrap()
        else {
            panic!()
        };
        let c = cfg.canonical(&s);
        assert!(c.output_text.contains("oversized"), "{}", c.output_text);
        assert!(!c.output_text.contains("sk-secret"));
        assert!(c.output_text.len() < 200);
    }

    #[test]
    fn volatile_keys_and_values_are_removed_at_every_depth() {
        let a = canon(
            r#"{"q":"x","meta":{"requestId":"abc","sentAt":"2024-01-01T00:00:00Z"},"trace_id":"9f8e7d6c5b4a39281706f5e4d3c2b1a0"}"#,
        );
        let b = canon(r#"{"meta":{"Request-Id":"zzz"},"q":"x"}"#);
        assert_eq!(a, b);
        // `format` and `chat` end in `at` but are not `_at`/`At` suffixes.
        assert!(canon(r#"{"format":"csv","chat":"hi"}"#).contains("format"));
        assert_eq!(
            canon(r#"{"msg":"job 3f2b1c9e-1a2b-4c3d-8e9f-0123456789ab queued"}"#),
            r#"{"msg":"job <uuid> queued"}"#
        );
    }

    fn old_path(vol: &Volatility, raw: &str) -> Value {
        let r = JsonText::parse(raw).unwrap();
        let mut v = parse_raw(Some(&r));
        vol.normalize_in_place(&mut v);
        v
    }

    fn new_path(vol: &Volatility, raw: &str) -> Value {
        let r = JsonText::parse(raw).unwrap();
        vol.parse_normalized(Some(&r)).to_value()
    }

    /// Configurations that exercise every branch: defaults, no suffix rule, no value
    /// normalisation, and a tool with volatile keys of its own.
    fn key_sets() -> Vec<KeySets> {
        let mut cfgs = vec![DetectorConfig::default(); 3];
        cfgs[1].fingerprint.volatile_key_suffixes = false;
        cfgs[2].fingerprint.normalize_values = false;
        let mut tooled = DetectorConfig::default();
        tooled.tools.insert(
            "t".into(),
            crate::engine::detectors::ToolPolicy {
                volatile_keys: vec!["cursor".into()],
                ..Default::default()
            },
        );
        cfgs.push(tooled);
        cfgs.iter().map(DetectorConfig::key_sets).collect()
    }

    fn assert_same(raw: &str) {
        for keys in key_sets() {
            for tool in [None, Some("t")] {
                let vol = keys.volatility(tool);
                let (old, new) = (old_path(&vol, raw), new_path(&vol, raw));
                assert_eq!(old, new, "{raw}");
                let r = JsonText::parse(raw).unwrap();
                assert_eq!(
                    canonical_string(&Json::from_value(old)),
                    canonical_string(&vol.parse_normalized(Some(&r))),
                    "{raw}"
                );
            }
        }
    }

    #[test]
    fn one_pass_parse_matches_parse_then_normalize() {
        let cases = [
            "null",
            "{}",
            "[]",
            "true",
            r#""plain""#,
            r#""job 3f2b1c9e-1a2b-4c3d-8e9f-0123456789ab at 2024-01-01T00:00:00Z""#,
            r#""aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee""#,
            r#"{"b":1.0,"a":{"y":[1e2,2.5,-0.0,1e20,-5,18446744073709551615],"x":"s"}}"#,
            r#"{"q":"x","meta":{"requestId":"abc","sentAt":"x"},"trace_id":"9f8e7d6c5b4a39281706f5e4d3c2b1a0"}"#,
            r#"{"token":"a","nested":[{"password":{"deep":[1,2]}}],"Cookie":null}"#,
            r#"{"a":1,"a":"2024-01-01T00:00:00Z","request_id":1,"request_id":2}"#,
            r#"{"request\u005fid":1,"caf\u00e9":"\u00e9\n\t\u0001","\"":"\\"}"#,
            r#"{"out":"HTTP/1.1 200 OK\ndate: Mon\nx-request-id: 8060c5e0\nAuthorization: b\n\nbody 12:30:45 1767225600"}"#,
            r#"{"cursor":"c1","created_at":5,"chat":"hi","format":"f","lastTimestamp":3,"At":1,"xAt":2}"#,
            // serde_json's `Value` fails on these: both paths fall back to the raw text.
            r#"{"a":1e400}"#,
            r#"{"token":1e400}"#,
            r#"{"request_id":[1e400]}"#,
            // serde_json's `Value` reads its own RawValue token as embedded JSON.
            r#"{"$serde_json::private::RawValue":"[1,{\"request_id\":2,\"x\":\"2024-01-01T00:00:00Z\"}]"}"#,
            r#"{"$serde_json::private::RawValue":"not json"}"#,
            r#"{"$serde_json::private::RawValue":5}"#,
            r#"{"$serde_json::private::RawValue":"1","b":2}"#,
            r#"{"b":2,"$serde_json::private::RawValue":"1"}"#,
            r#"[{"$serde_json::private::RawValue":"{\"token\":1}"}]"#,
        ];
        for c in cases {
            assert_same(c);
        }
        // The fallback really is taken for the unparsable ones.
        let keys = DetectorConfig::default().key_sets();
        assert_eq!(
            new_path(&keys.volatility(None), r#"{"a":1e400}"#),
            Value::String(r#"{"a":1e400}"#.into())
        );
        assert_eq!(new_path(&keys.volatility(None), "[]"), Value::Array(vec![]));
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let key = prop::sample::select(vec![
            "q",
            "path",
            "request_id",
            "requestId",
            "sentAt",
            "created_at",
            "format",
            "token",
            "API-Key",
            "cursor",
            "x",
            "timestamp",
            "é",
            "a\"b",
            "ts",
        ]);
        let text = prop::sample::select(vec![
            "",
            "plain words",
            "src/mod1.rs",
            "2024-01-01T00:00:00Z",
            "id 9f8e7d6c5b4a39281706f5e4d3c2b1a0 took 0.53s",
            "HTTP/1.1 200\ndate: x\n\nok",
            "caf\u{e9}\n\u{1}",
        ]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1.0e12f64..1.0e12).prop_map(Value::from),
            text.prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((key.clone(), inner), 0..6).prop_map(|kv| {
                    Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
                }),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn one_pass_parse_matches_on_generated_payloads(v in json_value()) {
            assert_same(&serde_json::to_string(&v).unwrap());
        }

        #[test]
        fn strings_without_digits_or_hyphens_hold_nothing_volatile(
            s in "[a-fA-F xXT:.Zz/_é\\n]{0,48}"
        ) {
            proptest::prop_assert!(!may_hold_volatile(&s));
            proptest::prop_assert!(matches!(normalize_volatile_cow(&s), Cow::Borrowed(_)));
        }

        #[test]
        fn volatile_prefilter_is_a_byte_test(s in "[a-z0-9 -]{0,24}", pad in 0usize..80, at in 0usize..3) {
            // The marker byte lands in a full block, in the tail, or nowhere.
            let filler = "x".repeat(pad);
            let s = match at {
                0 => format!("{filler}{s}"),
                1 => format!("{s}{filler}"),
                _ => filler,
            };
            proptest::prop_assert_eq!(
                may_hold_volatile(&s),
                s.bytes().any(|c| c.is_ascii_digit() || c == b'-')
            );
        }

        #[test]
        fn key_filter_never_hides_a_configured_key(k in "[a-z0-9]{0,20}") {
            let keys = DetectorConfig::default().key_sets();
            proptest::prop_assert_eq!(
                keys.keys.get(k.as_bytes()),
                keys.keys.map.get(k.as_bytes()).copied().unwrap_or(0)
            );
        }
    }

    #[test]
    fn key_filter_finds_every_configured_key() {
        let cfg = DetectorConfig::default();
        let keys = cfg.key_sets();
        for k in cfg.fingerprint.volatile_keys.iter() {
            assert_ne!(keys.keys.get(key_norm(k).as_bytes()) & VOLATILE, 0, "{k}");
        }
        for k in cfg.fingerprint.redact_keys.iter() {
            assert_ne!(keys.keys.get(key_norm(k).as_bytes()) & REDACT, 0, "{k}");
        }
        assert_eq!(keys.keys.get(b"path"), 0);
    }

    #[test]
    fn integers_are_written_like_serde_json() {
        for n in [0i64, 7, -7, 10, -10, 1767225600024, i64::MIN, i64::MAX] {
            assert_eq!(canonical_string(&Json::Number(n.into())), n.to_string());
        }
        assert_eq!(
            canonical_string(&Json::Number(u64::MAX.into())),
            u64::MAX.to_string()
        );
        assert_eq!(canonical_string(&Json::from_value(2.5.into())), "2.5");
    }
}
