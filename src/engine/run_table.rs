//! The run table's entries and their keys: a run's key packed into one heap block, shared by
//! the table and the idle / eviction / changed-runs indexes, and the hash every table probe
//! uses. Kept apart from the engine's logic, which only needs keys that hash, compare and
//! order as `RunKey` does.
use super::RunState;
use crate::contract::RunKey;
use rustc_hash::FxBuildHasher;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use triomphe::ThinArc;

/// A run's key as the engine holds it: project and run id end to end, shared by the run table
/// and the idle/eviction/dirty indexes. A thin pointer to one heap block (count, header and
/// bytes together), where an `Arc` of a boxed string took two blocks and 24 more bytes per open
/// run.
#[derive(Clone)]
pub(super) struct PackedKey(ThinArc<KeyHeader, u8>);

struct KeyHeader {
    /// Where the run id starts (the project id's length).
    split: usize,
    /// The run's slot is listed in `PartitionEngine::dirty` (it changed since the last
    /// changelog flush). Kept here rather than in the slot, whose 16 bytes (two pointers) are
    /// then all of a run table entry; each open run has its own key, created with its slot.
    listed: AtomicBool,
}

impl PackedKey {
    pub(super) fn new(k: &RunKey) -> Self {
        let header = KeyHeader {
            split: k.project_id.len(),
            listed: AtomicBool::new(false),
        };
        // Written straight into the key's block (an exact-size iterator), with no copy between.
        let (p, r) = (k.project_id.as_bytes(), k.run_id.as_bytes());
        let bytes =
            (0..p.len() + r.len()).map(|i| p.get(i).copied().unwrap_or_else(|| r[i - p.len()]));
        Self(ThinArc::from_header_and_iter(header, bytes))
    }

    /// Project id and run id, as bytes: the key was made from two strings, and compares and
    /// hashes as those do (bytewise), so it never needs to be read back as text but in
    /// [`PackedKey::to_key`].
    fn parts(&self) -> (&[u8], &[u8]) {
        let split = self.0.header.header.split;
        self.0.slice.split_at(split.min(self.0.slice.len()))
    }

    pub(super) fn listed(&self) -> bool {
        self.0.header.header.listed.load(Relaxed)
    }

    pub(super) fn set_listed(&self, on: bool) {
        self.0.header.header.listed.store(on, Relaxed);
    }

    /// On every event's table probe.
    pub(super) fn is(&self, k: &RunKey) -> bool {
        self.parts() == (k.project_id.as_bytes(), k.run_id.as_bytes())
    }

    pub(super) fn hash(&self) -> u64 {
        hash_parts(self.parts())
    }

    pub(super) fn to_key(&self) -> RunKey {
        // Both parts are whole strings' bytes, so the conversion never replaces anything.
        let (p, r) = self.parts();
        RunKey {
            project_id: String::from_utf8_lossy(p).into_owned(),
            run_id: String::from_utf8_lossy(r).into_owned(),
        }
    }
}

impl std::fmt::Debug for PackedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.to_key().fmt(f)
    }
}

/// Ordered as `RunKey` is (project id, then run id; strings order bytewise): ties in the idle
/// order break the same way.
impl Ord for PackedKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl PartialOrd for PackedKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PackedKey {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for PackedKey {}

/// One open run. Its key's `listed` flag stands in for a set of changed runs: marking a run
/// changed on every event is then a load, not a hash-set probe.
pub(super) struct Slot {
    pub(super) key: PackedKey,
    pub(super) state: Box<RunState>,
}

/// The run tables are probed with this, computed once per event (hashing two strings for each
/// of several lookups was a measurable share of an event's cost).
pub(super) fn hash_key(k: &RunKey) -> u64 {
    hash_parts((k.project_id.as_bytes(), k.run_id.as_bytes()))
}

/// Each part as a string hashes (its bytes, then 0xff), so a key hashes the same from its
/// strings and from its packed bytes.
fn hash_parts((p, r): (&[u8], &[u8])) -> u64 {
    let mut h = FxBuildHasher.build_hasher();
    for part in [p, r] {
        h.write(part);
        h.write_u8(0xff);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packed key is its two strings: equal, ordered and hashed as the `RunKey` it came from,
    /// wherever the project id ends.
    #[test]
    fn packed_keys_behave_as_their_run_keys() {
        let key = |p: &str, r: &str| RunKey {
            project_id: p.into(),
            run_id: r.into(),
        };
        let keys = [
            key("ab", "c"),
            key("a", "bc"),
            key("", "abc"),
            key("abc", ""),
            key("proj-1", "run-78b34b2853aad6a1"),
            key("projé", "rün-✓"),
            key("a", "b"),
        ];
        for a in &keys {
            let pa = PackedKey::new(a);
            assert_eq!(pa.to_key(), *a);
            assert_eq!(pa.hash(), hash_key(a));
            assert!(!pa.listed());
            for b in &keys {
                let pb = PackedKey::new(b);
                assert_eq!(pa.is(b), a == b, "{a:?} {b:?}");
                assert_eq!(pa == pb, a == b, "{a:?} {b:?}");
                assert_eq!(pa.cmp(&pb), a.cmp(b), "{a:?} {b:?}");
            }
        }
        // The flag is the key's, shared by its clones.
        let k = PackedKey::new(&keys[0]);
        k.clone().set_listed(true);
        assert!(k.listed());
    }
}
