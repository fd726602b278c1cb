//! Normalisation of a parsed payload: volatile keys dropped and secret keys masked at every
//! depth, volatile values in strings (ids, times, HTTP dump headers) replaced, numbers in one
//! form. The same rules applied while parsing are in `parse`.
use super::fingerprint_config::REDACTED;
use super::key_sets::{holds_headers, key_norm, with_key_norm, Volatility, REDACT, VOLATILE};
use crate::engine::text::normalize_volatile_cow;
use serde_json::Value;
use std::borrow::Cow;

impl Volatility<'_> {
    /// An HTTP response dump (`curl -i`, a raw client log): the values of volatile header
    /// lines (the volatile keys, with or without an `x-` prefix, plus headers that change on
    /// every response: date, age, etag, timings, CDN and request ids, rate-limit counters) are
    /// blanked; the status line and the body are kept.
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
                    if self.is_volatile_header(k.as_bytes())
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

    #[cfg(test)]
    /// The normalised value: volatile keys removed at every depth, strings normalised, numbers
    /// in one form. Keys are sorted on output by [`write_canonical`](super::write_canonical).
    pub(crate) fn normalize(&self, v: &Value) -> Value {
        let mut v = v.clone();
        self.normalize_in_place(&mut v);
        v
    }

    #[cfg(test)]
    /// [`Volatility::normalize`] on a value the caller owns: the parsed payload is edited
    /// where it lies instead of being copied node by node.
    pub(crate) fn normalize_in_place(&self, v: &mut Value) {
        self.normalize_node(v, false);
    }

    /// `headers`: `v` is the value of a header container ([`holds_headers`]), whose volatile
    /// headers go too.
    pub(super) fn normalize_node(&self, v: &mut Value, headers: bool) {
        match v {
            Value::Object(m) => {
                let gone = |k: &str, norm: &[u8], flags: u8| {
                    flags & REDACT == 0
                        && (self.is_volatile_key(k, norm, flags)
                            || (headers && self.is_volatile_header(norm)))
                };
                // Most objects lose no key: edit them in one pass and rebuild only those that do.
                let mut drop = false;
                for (k, x) in m.iter_mut() {
                    with_key_norm(k, |norm| {
                        let flags = self.flags(norm);
                        if flags & REDACT != 0 {
                            *x = Value::String(REDACTED.into());
                        } else if gone(k, norm, flags) {
                            drop = true;
                        } else {
                            self.normalize_node(x, holds_headers(norm));
                        }
                    });
                }
                if drop {
                    m.retain(|k, _| with_key_norm(k, |norm| !gone(k, norm, self.flags(norm))));
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.normalize_node(x, false)),
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
    pub(super) fn normalize_str(&self, s: &str) -> Option<String> {
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
}

/// Whether [`normalize_volatile_cow`] can change `s`: every volatile value it replaces holds
/// an ASCII digit, except a UUID, which holds `-`. A cheaper scan than its per-byte matcher,
/// and most strings (words, paths, queries) hold neither.
pub(super) fn may_hold_volatile(s: &str) -> bool {
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

pub(super) fn normalize_number(n: &serde_json::Number) -> serde_json::Number {
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

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
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
    }
}
