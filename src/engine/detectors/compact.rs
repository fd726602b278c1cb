//! Compact containers for per-run state. Hundreds of thousands of runs are open at once and
//! nearly all of their maps and windows are small or empty, so these keep what is empty off the
//! heap and grow exactly. Their records (`changelog::state::containers`) are those of the
//! standard types they stand for, so changelog records are unchanged.
use std::collections::VecDeque;
use thin_vec::ThinVec;

/// A small ordered map kept as a sorted vector. Per-run maps hold a handful of entries and
/// there are hundreds of thousands of runs: a B-tree node costs ~200 bytes however few keys it
/// holds, this costs 16 per entry, and a thin vector is 8 bytes inline and nothing on the heap
/// while empty. Recorded exactly like a `BTreeMap` (see `changelog::state::containers`).
/// The field is crate-visible for `changelog::state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VecMap<K, V>(pub(crate) ThinVec<(K, V)>);

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        Self(ThinVec::new())
    }
}

impl<K: Ord + Copy, V> VecMap<K, V> {
    fn find(&self, k: &K) -> Result<usize, usize> {
        self.0.binary_search_by(|(x, _)| x.cmp(k))
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn get(&self, k: &K) -> Option<&V> {
        self.find(k).ok().map(|i| &self.0[i].1)
    }

    pub(crate) fn insert(&mut self, k: K, v: V) -> Option<V> {
        match self.find(&k) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, v)),
            Err(i) => {
                grow_exact_thin(&mut self.0);
                self.0.insert(i, (k, v));
                None
            }
        }
    }

    pub(crate) fn remove(&mut self, k: &K) -> Option<V> {
        let v = self.find(k).ok().map(|i| self.0.remove(i).1);
        if self.0.is_empty() {
            // An emptied map keeps no capacity: most runs' maps empty again and stay so.
            self.0 = ThinVec::new();
        }
        v
    }

    pub(crate) fn get_or_insert_with(&mut self, k: K, v: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(&k) {
            Ok(i) => i,
            Err(i) => {
                grow_exact_thin(&mut self.0);
                self.0.insert(i, (k, v()));
                i
            }
        };
        &mut self.0[i].1
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> + '_ {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl<K: Ord + Copy, V> FromIterator<(K, V)> for VecMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(it: I) -> Self {
        let mut m = Self::default();
        for (k, v) in it {
            m.insert(k, v);
        }
        m
    }
}

/// A detector state that stays at its default for most runs, boxed only once it is not: 8
/// bytes inline instead of the whole state. Compared as the state, and recorded as it (a
/// default one when absent: see `changelog::state::containers`), so equality and records are
/// unchanged. The field is crate-visible for `changelog::state`.
#[derive(Debug, Clone, Default)]
pub struct Lazy<T>(pub(crate) Option<Box<T>>);

impl<T: Default + PartialEq> Lazy<T> {
    pub(crate) fn new(t: T) -> Self {
        Self(if t == T::default() {
            None
        } else {
            Some(Box::new(t))
        })
    }

    /// Runs `f` on the state; a state at its default afterwards is not allocated (or no
    /// longer: a failure streak that ended leaves nothing behind).
    pub(crate) fn with<R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        if let Some(b) = self.0.as_deref_mut() {
            let r = f(b);
            if *b == T::default() {
                self.0 = None;
            }
            return r;
        }
        let mut t = T::default();
        let r = f(&mut t);
        if t != T::default() {
            self.0 = Some(Box::new(t));
        }
        r
    }

    pub(crate) fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }
}

impl<T: Default + PartialEq> PartialEq for Lazy<T> {
    fn eq(&self, other: &Self) -> bool {
        match (self.get(), other.get()) {
            (Some(a), Some(b)) => a == b,
            (None, None) => true,
            (Some(x), None) | (None, Some(x)) => *x == T::default(),
        }
    }
}

/// Make room for one more element, and no more. A run's windows are nearly all it holds and
/// most runs are short, so any slack reserved is a lasting cost of every open run; the
/// allocator already rounds each block up to its size class and grows a block in place within
/// it, so most of these growths are a `realloc` that returns the same block.
pub(crate) fn grow_exact<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact(1);
    }
}

/// [`grow_exact`] for the thin vectors of mostly empty state.
pub(crate) fn grow_exact_thin<T>(v: &mut ThinVec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact(1);
    }
}

pub(crate) fn push_bounded<T>(q: &mut VecDeque<T>, x: T, cap: usize) {
    // Make room first so a full window never grows past its bound; growth is exact, as in
    // [`grow_exact`].
    while cap > 0 && q.len() >= cap {
        q.pop_front();
    }
    if q.len() == q.capacity() {
        q.reserve_exact(1);
    }
    q.push_back(x);
    while q.len() > cap {
        q.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emptied_map_holds_no_allocation() {
        let mut m = VecMap::<u64, u64>::default();
        m.insert(1, 10);
        assert_eq!(m.remove(&1), Some(10));
        assert_eq!(m.0.capacity(), 0);
    }

    #[test]
    fn windows_grow_exactly() {
        let mut q = VecDeque::new();
        let mut v = Vec::new();
        for i in 0..40u64 {
            push_bounded(&mut q, i, 25);
            grow_exact(&mut v);
            v.push(i);
            assert_eq!(
                (q.capacity(), v.capacity()),
                (q.len(), v.len()),
                "after {i}"
            );
        }
        assert_eq!(q.len(), 25);
        assert_eq!(q.front(), Some(&15));
    }
}
