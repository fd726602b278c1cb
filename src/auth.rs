//! Secrets presented by HTTP clients (ingest API keys, UI tokens), checked without leaking them.
//!
//! The table keeps only SHA-256 digests, not the plaintext. A lookup
//! compares the presented secret's digest with every stored digest in constant time and visits
//! all of them, so how long it takes says nothing about how close a guess came.
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Secret → what it grants (a project id, a user name).
pub(crate) struct SecretTable<V> {
    entries: Vec<([u8; 32], V)>,
}

impl<V> Default for SecretTable<V> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

/// Shows how many secrets, not their digests.
impl<V> std::fmt::Debug for SecretTable<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretTable({} secrets)", self.entries.len())
    }
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

impl<V> SecretTable<V> {
    pub(crate) fn new(pairs: impl IntoIterator<Item = (String, V)>) -> Self {
        Self {
            entries: pairs
                .into_iter()
                .map(|(secret, v)| (digest(&secret), v))
                .collect(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// What `secret` grants, if it is one of the table's.
    pub(crate) fn find(&self, secret: &str) -> Option<&V> {
        let d = digest(secret);
        let mut hit = None;
        for (stored, v) in &self.entries {
            // No early exit: every entry is compared, whichever matches.
            if bool::from(stored.ct_eq(&d)) {
                hit = Some(v);
            }
        }
        hit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_exactly_the_stored_secrets() {
        let t = SecretTable::new([
            ("kw_first".to_string(), "a"),
            ("kw_second".to_string(), "b"),
        ]);
        assert_eq!(t.len(), 2);
        assert_eq!(t.find("kw_first"), Some(&"a"));
        assert_eq!(t.find("kw_second"), Some(&"b"));
        for miss in ["", "kw_firs", "kw_first ", "KW_FIRST", "kw_firstx"] {
            assert_eq!(t.find(miss), None, "{miss:?}");
        }
        assert!(SecretTable::<()>::default().find("").is_none());
    }
}
