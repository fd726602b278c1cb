//! The configured keys in lookup form. Every key of every payload is looked up, so the
//! configuration is compiled once into [`KeySets`] (a hash map behind a bit filter, per tool),
//! and [`Volatility`] borrows the set for one step's tool.
use super::fingerprint_config::FingerprintConfig;
use rustc_hash::FxHasher;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// Key comparison form: lowercase ASCII alphanumerics only.
pub(crate) fn key_norm(k: &str) -> String {
    k.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// [`key_norm`] without allocating for ordinary key lengths: every key of every payload is
/// looked up, so this runs for each of them on every step. As bytes: the form is ASCII, and
/// checking that it is UTF-8 again cost a call per key.
pub(super) fn with_key_norm<R>(k: &str, f: impl FnOnce(&[u8]) -> R) -> R {
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
pub(super) const VOLATILE: u8 = 1;
pub(super) const REDACT: u8 = 2;

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
pub(crate) struct KeySets {
    keys: KeyFlags,
    /// Tools with volatile keys of their own: the global keys plus theirs.
    per_tool: HashMap<String, KeyFlags, BuildHasherDefault<FxHasher>>,
    suffixes: bool,
    values: bool,
}

impl KeySets {
    /// The key sets of `fp`, with each tool's own extra volatile keys (`tool_keys`: tool
    /// name, keys; a detector configuration's tool policies).
    pub(crate) fn new<'a>(
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
    pub(crate) fn volatility(&self, tool: Option<&str>) -> Volatility<'_> {
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
pub(crate) struct Volatility<'a> {
    keys: &'a KeyFlags,
    suffixes: bool,
    pub(super) values: bool,
}

impl Volatility<'_> {
    pub(super) fn flags(&self, norm: &[u8]) -> u8 {
        self.keys.get(norm)
    }

    /// `norm` is `key_norm(k)`, `flags` its [`Volatility::flags`].
    pub(super) fn is_volatile_key(&self, k: &str, norm: &[u8], flags: u8) -> bool {
        if flags & VOLATILE != 0 {
            return true;
        }
        if !self.suffixes {
            return false;
        }
        let b = k.as_bytes();
        let n = b.len();
        // `created_at` / `sentAt` (a lowercase letter before `At`) / `...timestamp`, and the
        // per-request ids of every vendor (`X-GitHub-Request-Id`, `x-amzn-trace-id`).
        (n > 3 && k.ends_with("_at"))
            || (n > 2 && k.ends_with("At") && b[n - 3].is_ascii_lowercase())
            || (n > 9 && norm.ends_with(b"timestamp"))
            || (n > 9 && (norm.ends_with(b"requestid") || norm.ends_with(b"traceid")))
            // A header-style name (`x-ratelimit-remaining`): a counter that moves on every call.
            || (memchr::memchr(b'-', b).is_some() && memchr::memmem::find(norm, b"ratelimit").is_some())
    }

    /// Whether `norm` (a [`key_norm`] form) names a response header whose value changes from
    /// one response to the next whatever the response says: dates, cache ages and verdicts,
    /// ETags, timings, CDN and request ids, rate-limit counters. Read in header containers (a
    /// `headers` object, an HTTP dump's header lines) only: elsewhere `date` or `age` is data.
    pub(super) fn is_volatile_header(&self, norm: &[u8]) -> bool {
        HTTP_VOLATILE_HEADERS.iter().any(|h| h.as_bytes() == norm)
            || [
                &b"xratelimit"[..],
                b"ratelimit",
                b"anthropicratelimit",
                b"xcache",
            ]
            .iter()
            .any(|p| norm.starts_with(p))
            || norm.ends_with(b"requestid")
            || norm.ends_with(b"traceid")
            || norm.ends_with(b"processingms")
    }
}

/// Response headers that differ on every response, in [`key_norm`] form (besides the prefixes
/// and suffixes [`Volatility::is_volatile_header`] reads).
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
    "xamzid2",
    "xservedby",
    "xtimer",
    "reportto",
    "nel",
    "retryafter",
];

/// Whether an object under this key (in [`key_norm`] form) holds HTTP headers: `headers`,
/// `response_headers`, botocore's `HTTPHeaders`.
pub(super) fn holds_headers(norm: &[u8]) -> bool {
    norm.ends_with(b"headers")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::detectors::DetectorConfig;

    proptest::proptest! {
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
}
