//! When a count becomes a finding: the warn / alert / stop thresholds every detector is
//! configured with, and the latch that reports each level once per crossing. Kept apart from
//! the configuration so the detectors depend on these two types and not on the whole
//! [`DetectorConfig`](super::DetectorConfig), which is built from theirs.
use super::compact::grow_exact_thin;
use crate::contract::Severity;
use serde::{Deserialize, Serialize};
use thin_vec::ThinVec;

/// warn / alert / stop counts; 0 disables that level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Levels {
    pub(crate) warn: u32,
    pub(crate) alert: u32,
    pub(crate) stop: u32,
}

impl Default for Levels {
    fn default() -> Self {
        Self {
            warn: 3,
            alert: 5,
            stop: 10,
        }
    }
}

impl Levels {
    pub(crate) const fn new(warn: u32, alert: u32, stop: u32) -> Self {
        Self { warn, alert, stop }
    }

    pub(crate) fn level(&self, n: u32) -> Option<Severity> {
        let at = |t: u32| t > 0 && n >= t;
        if at(self.stop) {
            Some(Severity::Stop)
        } else if at(self.alert) {
            Some(Severity::Alert)
        } else if at(self.warn) {
            Some(Severity::Warn)
        } else {
            None
        }
    }

    /// The lowest enabled level: below it a pattern is re-armed.
    pub(crate) fn floor(&self) -> u32 {
        [self.warn, self.alert, self.stop]
            .into_iter()
            .filter(|t| *t > 0)
            .min()
            .unwrap_or(u32::MAX)
    }
}

/// Rising-edge bookkeeping: the highest level already reported per pattern key. A level is
/// reported once per crossing; a pattern that falls below its floor is forgotten (re-armed).
///
/// Kept as a sorted thin vector (8 bytes inline, nothing on the heap while empty): seven
/// detectors have one per open run, nearly all of them empty, and entries change only when a
/// finding fires or re-arms. Recorded like a `BTreeMap` under `fired`, as before (see
/// `changelog::state::containers`). Fields are crate-visible for `changelog::state`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Latch {
    pub(crate) fired: ThinVec<(u64, Severity)>,
}

impl Latch {
    const CAP: usize = 256;

    fn find(&self, k: u64) -> Result<usize, usize> {
        self.fired.binary_search_by(|(x, _)| x.cmp(&k))
    }

    fn remove(&mut self, k: u64) {
        if let Ok(i) = self.find(k) {
            self.fired.remove(i);
            if self.fired.is_empty() {
                // Back to no allocation, as nearly all latches are.
                self.fired = ThinVec::new();
            }
        }
    }

    /// Returns the level to report, if `level` is above what was reported for `key`.
    pub(crate) fn rise(&mut self, key: u64, level: Option<Severity>) -> Option<Severity> {
        let Some(level) = level else {
            self.remove(key);
            return None;
        };
        match self.find(key) {
            Ok(i) if self.fired[i].1 >= level => None,
            Ok(i) => {
                self.fired[i].1 = level;
                Some(level)
            }
            Err(mut i) => {
                if self.fired.len() >= Self::CAP {
                    // Bounded: drop the smallest key (deterministic, order-independent).
                    self.fired.remove(0);
                    i = i.saturating_sub(1);
                }
                grow_exact_thin(&mut self.fired);
                self.fired.insert(i, (key, level));
                Some(level)
            }
        }
    }

    pub(crate) fn rearm(&mut self, key: u64) {
        self.remove(key);
    }

    /// Forgets every pattern reported at `min` or above, so that each reports again at the
    /// level it is at when it next fires (see [`RunDetectors::on_steered`]).
    ///
    /// [`RunDetectors::on_steered`]: super::RunDetectors::on_steered
    pub(crate) fn rearm_from(&mut self, min: Severity) {
        if self.fired.iter().any(|(_, s)| *s >= min) {
            self.fired.retain(|(_, s)| *s < min);
            if self.fired.is_empty() {
                self.fired = ThinVec::new();
            }
        }
    }

    /// Whether a level was reported for `key` (and not re-armed since).
    pub(crate) fn has(&self, key: u64) -> bool {
        self.find(key).is_ok()
    }

    pub(crate) fn keys(&self) -> Vec<u64> {
        self.fired.iter().map(|(k, _)| *k).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latch_is_rising_edge() {
        let mut l = Latch::default();
        assert_eq!(l.rise(1, Some(Severity::Warn)), Some(Severity::Warn));
        assert_eq!(l.rise(1, Some(Severity::Warn)), None);
        assert_eq!(l.rise(1, Some(Severity::Alert)), Some(Severity::Alert));
        assert_eq!(l.rise(1, None), None);
        assert_eq!(l.rise(1, Some(Severity::Warn)), Some(Severity::Warn));
    }

    #[test]
    fn rearming_from_a_level_keeps_what_was_below_it() {
        let mut l = Latch::default();
        l.rise(1, Some(Severity::Warn));
        l.rise(2, Some(Severity::Alert));
        l.rise(3, Some(Severity::Stop));
        l.rearm_from(Severity::Alert);
        assert_eq!(l.keys(), vec![1]);
        assert_eq!(l.rise(1, Some(Severity::Warn)), None);
        assert_eq!(l.rise(3, Some(Severity::Stop)), Some(Severity::Stop));
        l.rearm_from(Severity::Warn);
        assert_eq!((l.fired.capacity(), l.keys()), (0, vec![]));
    }

    #[test]
    fn an_emptied_latch_holds_no_allocation() {
        let mut l = Latch::default();
        l.rise(7, Some(Severity::Warn));
        l.rise(3, Some(Severity::Warn));
        assert_eq!(l.keys(), vec![3, 7]);
        l.rearm(7);
        l.rearm(3);
        assert_eq!(
            (l.fired.capacity(), l, Latch::default().fired.capacity()),
            (0, Latch::default(), 0)
        );
    }
}
