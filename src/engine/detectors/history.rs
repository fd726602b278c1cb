//! The run's recent counted tool calls, kept once for the detectors that look back over them
//! (cycle, repeated operation, no progress, context pressure, near-duplicates) instead of once
//! per detector.
//!
//! Each call carries one bit per detector: whether it is in that detector's window. A detector
//! sees exactly the calls with its bit, in arrival order, so its window behaves as its own
//! bounded queue did: it joins the current call, drops its oldest calls beyond its bound and
//! may leave calls anywhere (repeated operation forgets stale entries). A call in no window is
//! removed. Records keep the old per-detector windows (see each detector's `Record`): reading
//! one gives every entry its own call with one bit, and writing rebuilds each window.
use serde::Serialize;
use std::collections::VecDeque;

pub const CYCLE: u8 = 1;
pub const REPEAT: u8 = 2;
pub const STALL: u8 = 4;
pub const CONTEXT: u8 = 8;
pub const NEARDUP: u8 = 16;
const BITS: [u8; 5] = [CYCLE, REPEAT, STALL, CONTEXT, NEARDUP];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub step: u64,
    pub action: u64,
    pub primary: u64,
    pub output: u64,
    /// `Progress::novel_actions` after this step (repeated operation's reset rule). 32 bits
    /// keep a call at 40 bytes; a run would need four billion distinct actions to saturate it.
    work: u32,
    /// The tool tolerates the same output (`ToolClass::tolerates_same_output`).
    pub repeatable: bool,
    bits: u8,
}

impl Call {
    pub fn new(step: u64, action: u64, primary: u64, output: u64, work: u64, rep: bool) -> Self {
        Self {
            step,
            action,
            primary,
            output,
            work: u32::try_from(work).unwrap_or(u32::MAX),
            repeatable: rep,
            bits: 0,
        }
    }

    pub fn work(&self) -> u64 {
        u64::from(self.work)
    }

    pub fn has(&self, bit: u8) -> bool {
        self.bits & bit != 0
    }
}

#[derive(Debug, Clone, Default)]
pub struct History {
    calls: VecDeque<Call>,
    /// Calls per detector bit (derived, not serialised).
    counts: [u32; 5],
}

fn slot(bit: u8) -> usize {
    bit.trailing_zeros() as usize
}

impl History {
    /// The current step's call; detectors then [`History::join`] it.
    pub fn push(&mut self, c: Call) {
        if self.calls.len() == self.calls.capacity() {
            // Grow by a quarter, not double: one history per open run, most of them short.
            let want = (self.calls.len() / 4).max(2);
            self.calls.reserve_exact(want);
        }
        self.calls.push_back(c);
    }

    /// An entry of a record's window: a call in that one window.
    pub fn restore(&mut self, mut c: Call, bit: u8) {
        c.bits = bit;
        self.counts[slot(bit)] += 1;
        self.calls.push_back(c);
    }

    /// Put the current (last) call in `bit`'s window, keeping at most `cap` calls there.
    /// Returns how many of its oldest calls left the window.
    pub fn join(&mut self, bit: u8, cap: usize) -> usize {
        let Some(last) = self.calls.back_mut() else {
            return 0;
        };
        if !last.has(bit) {
            last.bits |= bit;
            self.counts[slot(bit)] += 1;
        }
        let cap = cap.max(1);
        let over = (self.counts[slot(bit)] as usize).saturating_sub(cap);
        let mut left = over;
        for c in self.calls.iter_mut() {
            if left == 0 {
                break;
            }
            if c.has(bit) {
                c.bits &= !bit;
                left -= 1;
                self.counts[slot(bit)] -= 1;
            }
        }
        over
    }

    /// Remove the calls of `bit`'s window for which `gone` is true.
    pub fn leave(&mut self, bit: u8, mut gone: impl FnMut(&Call) -> bool) {
        for c in self.calls.iter_mut() {
            if c.has(bit) && gone(c) {
                c.bits &= !bit;
                self.counts[slot(bit)] -= 1;
            }
        }
    }

    pub fn len(&self, bit: u8) -> usize {
        self.counts[slot(bit)] as usize
    }

    /// `bit`'s window, oldest first. Scans only from its oldest call: the short windows (no
    /// progress, near-duplicates) sit at the end of a history the cycle window keeps long.
    pub fn members(&self, bit: u8) -> impl DoubleEndedIterator<Item = &Call> + Clone + '_ {
        let mut need = self.len(bit);
        let mut start = self.calls.len();
        while need > 0 && start > 0 {
            start -= 1;
            if self.calls[start].has(bit) {
                need -= 1;
            }
        }
        self.calls.range(start..).filter(move |c| c.has(bit))
    }

    /// `bit`'s window with indexed access: a view of the newest calls when they are all in it
    /// (the usual case), else a list.
    pub fn view(&self, bit: u8) -> View<'_> {
        let n = self.len(bit);
        let start = self.calls.len().saturating_sub(n);
        if self.calls.range(start..).all(|c| c.has(bit)) {
            View::Suffix(&self.calls, start)
        } else {
            View::Listed(self.members(bit).collect())
        }
    }

    /// After a step: drop calls no window holds. Ones left in the middle (an entry forgotten
    /// while older ones stay) are swept once they are as many as the windows' calls, so the
    /// history stays within twice the windows' bounds.
    pub fn settle(&mut self) {
        while self.calls.back().is_some_and(|c| c.bits == 0) {
            self.calls.pop_back();
        }
        while self.calls.front().is_some_and(|c| c.bits == 0) {
            self.calls.pop_front();
        }
        let held: usize = self.counts.iter().map(|n| *n as usize).sum();
        if self.calls.len() > 2 * held + 16 {
            self.calls.retain(|c| c.bits != 0);
        }
    }

    /// Whether both hold the same windows (how the calls are shared does not matter).
    fn same_windows(&self, other: &History) -> bool {
        BITS.iter().all(|&b| {
            let key = |c: &Call| match b {
                CYCLE => (c.step, c.action, 0, c.output, 0, c.repeatable),
                REPEAT => (c.step, 0, c.primary, c.output, c.work, c.repeatable),
                STALL => (c.step, c.action, 0, c.output, 0, false),
                NEARDUP => (c.step, c.action, 0, 0, 0, false),
                _ => (0, 0, 0, c.output, 0, false),
            };
            self.members(b).map(key).eq(other.members(b).map(key))
        })
    }
}

impl PartialEq for History {
    fn eq(&self, other: &Self) -> bool {
        self.same_windows(other)
    }
}

pub enum View<'a> {
    Suffix(&'a VecDeque<Call>, usize),
    Listed(Vec<&'a Call>),
}

impl View<'_> {
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> usize {
        match self {
            View::Suffix(q, start) => q.len() - start,
            View::Listed(v) => v.len(),
        }
    }

    pub fn get(&self, i: usize) -> &Call {
        match self {
            View::Suffix(q, start) => &q[start + i],
            View::Listed(v) => v[i],
        }
    }
}

/// One detector's window as a record writes it: `bit`'s calls, oldest first, each written as
/// `entry` makes it (the detectors' `Ser` types keep their record layouts this way).
pub struct Members<'a, F>(pub &'a History, pub u8, pub F);

impl<F, T> Serialize for Members<'_, F>
where
    F: Fn(&Call) -> T,
    T: Serialize,
{
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.members(self.1).map(&self.2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(i: u64) -> Call {
        Call::new(i, i, i, i, i, false)
    }

    #[test]
    fn each_window_keeps_its_newest_calls() {
        let mut h = History::default();
        for i in 0..100 {
            h.push(call(i));
            h.join(STALL, 8);
            if i % 3 == 0 {
                h.join(REPEAT, 5);
            }
            h.settle();
        }
        let stall: Vec<u64> = h.members(STALL).map(|c| c.step).collect();
        assert_eq!(stall, (92..100).collect::<Vec<_>>());
        let repeat: Vec<u64> = h.members(REPEAT).map(|c| c.step).collect();
        assert_eq!(repeat, vec![87, 90, 93, 96, 99]);
        assert_eq!(h.view(STALL).len(), 8);
        assert_eq!(h.view(REPEAT).get(0).step, 87);
        // Nothing older than the oldest call a window holds.
        assert_eq!(h.calls.front().map(|c| c.step), Some(87));
    }

    #[test]
    fn calls_no_window_holds_do_not_pile_up() {
        let mut h = History::default();
        // One old call stays in a window while thousands of later ones leave theirs.
        h.push(call(0));
        h.join(REPEAT, 48);
        h.settle();
        for i in 1..10_000 {
            h.push(call(i));
            h.join(CYCLE, 4);
            h.settle();
            assert!(h.calls.len() <= 2 * 5 + 16 + 1, "{} calls", h.calls.len());
        }
        assert_eq!(h.members(REPEAT).map(|c| c.step).collect::<Vec<_>>(), [0]);
        assert_eq!(h.len(CYCLE), 4);
    }

    #[test]
    fn leaving_keeps_the_order_of_the_rest() {
        let mut h = History::default();
        for i in 0..6 {
            h.push(call(i));
            h.join(REPEAT, 48);
            h.settle();
        }
        h.leave(REPEAT, |c| c.step % 2 == 1);
        let left: Vec<u64> = h.members(REPEAT).map(|c| c.step).collect();
        assert_eq!(left, [0, 2, 4]);
        assert_eq!(h.len(REPEAT), 3);
        // A listed view when the window is not the newest calls.
        assert_eq!(h.view(REPEAT).get(2).step, 4);
    }
}
