//! The set of step indices a run has seen, as sorted disjoint ranges: a run of ten million
//! contiguous steps costs one range, not ten million entries.
use smallvec::SmallVec;

/// Recorded as the vector of its ranges (see `changelog::state::containers`). Fields are
/// crate-visible for `changelog::state`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeenSteps {
    /// Sorted, non-overlapping, non-adjacent half-open ranges `[start, end)`. Nearly every run
    /// is one range, held inline (in the 24 bytes a `Vec` takes, with no allocation).
    pub(crate) ranges: SmallVec<[(u64, u64); 1]>,
}

impl SeenSteps {
    /// Insert `i`; returns false when it was already present (a redelivery).
    pub(crate) fn insert(&mut self, i: u64) -> bool {
        // Fast path: the next step in order extends the last range.
        if let Some(last) = self.ranges.last_mut() {
            if last.1 == i {
                last.1 = i.saturating_add(1);
                return true;
            }
        }
        let pos = self.ranges.partition_point(|&(_, end)| end < i);
        if let Some(&(start, end)) = self.ranges.get(pos) {
            if start <= i && i < end {
                return false;
            }
        }
        let end = i.saturating_add(1);
        let merge_left = pos < self.ranges.len() && self.ranges[pos].1 == i;
        let merge_right_idx = if merge_left { pos + 1 } else { pos };
        let merge_right =
            merge_right_idx < self.ranges.len() && self.ranges[merge_right_idx].0 == end;
        match (merge_left, merge_right) {
            (true, true) => {
                self.ranges[pos].1 = self.ranges[pos + 1].1;
                self.ranges.remove(pos + 1);
            }
            (true, false) => self.ranges[pos].1 = end,
            (false, true) => self.ranges[merge_right_idx].0 = i,
            (false, false) => {
                if self.ranges.len() == self.ranges.capacity() {
                    self.ranges.reserve_exact((self.ranges.len() / 2).max(1));
                }
                self.ranges.insert(pos, (i, end))
            }
        }
        true
    }

    /// Keep at most `cap` ranges (0 = unlimited) by merging the two lowest: the oldest gaps are
    /// summarised as seen. Returns how many merges were needed.
    pub(crate) fn bound(&mut self, cap: usize) -> usize {
        let mut merged = 0;
        while cap > 0 && self.ranges.len() > cap.max(1) {
            if self.ranges.len() < 2 {
                break;
            }
            self.ranges[1].0 = self.ranges[0].0;
            self.ranges.remove(0);
            merged += 1;
        }
        merged
    }

    pub(crate) fn contains(&self, i: u64) -> bool {
        let pos = self.ranges.partition_point(|&(_, end)| end <= i);
        self.ranges.get(pos).is_some_and(|&(s, e)| s <= i && i < e)
    }

    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    /// How many seen indices lie in `(after, upto]`: exact where no gaps were merged by
    /// [`SeenSteps::bound`] (a merged gap counts as seen, so it can only make this larger).
    pub(crate) fn count_between(&self, after: u64, upto: u64) -> u64 {
        let (lo, hi) = (after.saturating_add(1), upto.saturating_add(1));
        self.ranges
            .iter()
            .map(|&(s, e)| e.min(hi).saturating_sub(s.max(lo)))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        #[test]
        fn behaves_like_a_set(xs in proptest::collection::vec(0u64..64, 0..200)) {
            let mut s = SeenSteps::default();
            let mut model = BTreeSet::new();
            for x in xs {
                prop_assert_eq!(s.insert(x), model.insert(x));
            }
            for x in 0..64 {
                prop_assert_eq!(s.contains(x), model.contains(&x));
            }
            // Ranges stay canonical: sorted, disjoint, non-adjacent.
            for w in s.ranges.windows(2) {
                prop_assert!(w[0].1 < w[1].0);
            }
        }
    }

    #[test]
    fn sparse_steps_are_bounded_by_merging_the_oldest_gaps() {
        let mut s = SeenSteps::default();
        for i in 0..10_000u64 {
            assert!(s.insert(i * 2));
            s.bound(16);
        }
        assert_eq!(s.range_count(), 16);
        // The newest steps are exact; the oldest gaps were summarised as seen.
        assert!(s.contains(19_998) && !s.contains(19_997));
        assert!(s.contains(1));
    }

    proptest! {
        #[test]
        fn counts_between_like_a_set(
            xs in proptest::collection::vec(0u64..64, 0..100),
            after in 0u64..70,
            upto in 0u64..70,
        ) {
            let mut s = SeenSteps::default();
            let mut model = BTreeSet::new();
            for x in xs {
                s.insert(x);
                model.insert(x);
            }
            let want = model.iter().filter(|&&x| x > after && x <= upto).count() as u64;
            prop_assert_eq!(s.count_between(after, upto), want);
        }
    }

    #[test]
    fn contiguous_steps_are_one_range() {
        let mut s = SeenSteps::default();
        for i in 0..10_000 {
            assert!(s.insert(i));
        }
        assert_eq!(s.range_count(), 1);
        assert!(!s.insert(5_000));
    }
}
