//! Compact state keys: SHA-256 with a domain tag, cut to 64 bits, and a memo of the keys of
//! names that recur on every step.
use crate::engine::memo::Memo;
use sha2::{Digest, Sha256};

/// [`key64`] of short names (agents'; the step view memoises tool names with their classes),
/// memoised: a fleet has few names and they recur on every step, so a lookup replaces a
/// SHA-256.
pub(crate) struct NameKeys(Memo<(&'static str, Box<str>, u64)>);

impl Default for NameKeys {
    fn default() -> Self {
        Self(Memo::new(4096))
    }
}

impl NameKeys {
    /// `key64(domain, &[name])`, whatever the memo holds.
    pub(crate) fn get(&mut self, domain: &'static str, name: &str) -> u64 {
        use std::hash::BuildHasher;
        let hash = |d: &str, n: &str| rustc_hash::FxBuildHasher.hash_one((d, n));
        // The domains are a few literals: usually the same pointer, compared before the bytes.
        let same_domain = |d: &str| std::ptr::eq(d, domain) || d == domain;
        self.0
            .get_or_insert_with(
                hash(domain, name),
                |e| same_domain(e.0) && *e.1 == *name,
                || (domain, name.into(), key64(domain, &[name.as_bytes()])),
                |e| hash(e.0, &e.1),
            )
            .2
    }
}

/// First 8 bytes of SHA-256 with a domain tag, as a compact state key.
pub(crate) fn key64(domain: &str, parts: &[&[u8]]) -> u64 {
    let mut h = Sha256::new();
    h.update(domain.as_bytes());
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    let d = h.finalize();
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_key_is_key64_whatever_the_memo_holds() {
        let mut keys = NameKeys::default();
        for round in 0..2 {
            for i in 0..5000 {
                let n = format!("tool_{i}");
                assert_eq!(
                    keys.get("tool", &n),
                    key64("tool", &[n.as_bytes()]),
                    "{round}"
                );
                assert_eq!(keys.get("agent", &n), key64("agent", &[n.as_bytes()]));
            }
        }
        assert_ne!(keys.get("tool", "a"), keys.get("agent", "a"));
    }
}
