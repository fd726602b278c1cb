//! The run's recent counted tool calls, kept once for the detectors that look back over them
//! (cycle, repeated operation, no progress, context pressure, near-duplicates) instead of once
//! per detector.
//!
//! Each call carries one bit per detector: whether it is in that detector's window. A detector
//! sees exactly the calls with its bit, in arrival order, so its window behaves as its own
//! bounded queue did: it joins the current call, drops its oldest calls beyond its bound and
//! may leave calls anywhere (repeated operation forgets stale entries). A call in no window is
//! removed. Records keep the old per-detector windows (see each detector's `Record` in
//! `changelog::state`): reading one gives every entry its own call with one bit, and writing
//! rebuilds each window.
//!
//! Here the calls and the windows' API; the compact forms a call is stored in are in `slots`,
//! the store that keeps them in the narrowest form in `store`.
mod slots;
mod store;
#[cfg(test)]
mod tests;

pub(crate) use store::Holding;
use store::Store;

pub(crate) const CYCLE: u8 = 1;
pub(crate) const REPEAT: u8 = 2;
pub(crate) const STALL: u8 = 4;
pub(crate) const CONTEXT: u8 = 8;
pub(crate) const NEARDUP: u8 = 16;
const BITS: [u8; 5] = [CYCLE, REPEAT, STALL, CONTEXT, NEARDUP];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Call {
    pub(crate) step: u64,
    pub(crate) action: u64,
    pub(crate) primary: u64,
    pub(crate) output: u64,
    /// `Progress::novel_actions` after this step (repeated operation's reset rule).
    work: u64,
    /// The tool tolerates the same output (`ToolClass::tolerates_same_output`).
    pub(crate) repeatable: bool,
    bits: u8,
}

impl Call {
    pub(crate) fn new(
        step: u64,
        action: u64,
        primary: u64,
        output: u64,
        work: u64,
        rep: bool,
    ) -> Self {
        Self {
            step,
            action,
            primary,
            output,
            work,
            repeatable: rep,
            bits: 0,
        }
    }

    pub(crate) fn work(&self) -> u64 {
        self.work
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct History {
    calls: Store,
    /// Calls per detector bit (derived, not serialised).
    /// 16 bits: windows hold at most [`MAX_WINDOW`] calls.
    counts: [u16; 5],
}

/// The most calls one window holds (larger configured windows are cut to it): a window is
/// scanned on every step, so one this long is a mistake anyway.
pub(crate) const MAX_WINDOW: usize = u16::MAX as usize;

fn slot(bit: u8) -> usize {
    bit.trailing_zeros() as usize
}

impl History {
    /// The current step's call; detectors then [`History::join`] it.
    pub(crate) fn push(&mut self, c: Call) {
        self.calls.push_back(c);
    }

    /// An entry of a record's window: a call in that one window.
    pub(crate) fn restore(&mut self, mut c: Call, bit: u8) {
        // A record cannot hold a longer window; ignore a malformed one's excess.
        if self.len(bit) >= MAX_WINDOW {
            return;
        }
        c.bits = bit;
        self.counts[slot(bit)] += 1;
        self.calls.reserve_amortized();
        self.calls.push_back(c);
    }

    /// Every window restored: no room kept beyond the calls (as live growth keeps none).
    pub(crate) fn restored(&mut self) {
        self.calls.shrink_to_fit();
    }

    /// Put the current (last) call in `bit`'s window, keeping at most `cap` calls there.
    /// Returns how many of its oldest calls left the window.
    pub(crate) fn join(&mut self, bit: u8, cap: usize) -> usize {
        let Some(last) = self.calls.len().checked_sub(1) else {
            return 0;
        };
        // Counted wide here: a full window is one over before it drops its oldest.
        let mut n = usize::from(self.counts[slot(bit)]);
        let b = self.calls.bits(last);
        if b & bit == 0 {
            self.calls.set_bits(last, b | bit);
            n += 1;
        }
        let over = n.saturating_sub(cap.clamp(1, MAX_WINDOW));
        if over > 0 {
            self.calls.release_oldest(bit, over);
        }
        // At most MAX_WINDOW now.
        self.counts[slot(bit)] = (n - over) as u16;
        over
    }

    /// Remove the calls of `bit`'s window for which `gone` is true.
    pub(crate) fn leave(&mut self, bit: u8, gone: impl FnMut(&Call) -> bool) {
        let n = self.calls.release_if(bit, gone);
        self.counts[slot(bit)] -= n;
    }

    pub(crate) fn len(&self, bit: u8) -> usize {
        self.counts[slot(bit)] as usize
    }

    /// Where `bit`'s oldest call is: the short windows (no progress, near-duplicates) sit at
    /// the end of a history the cycle window keeps long, so scans start there.
    fn first(&self, bit: u8) -> usize {
        self.calls.first_holding(bit, self.len(bit))
    }

    /// `bit`'s window, oldest first.
    pub(crate) fn members(&self, bit: u8) -> Holding<'_> {
        self.calls.holding(self.first(bit), bit)
    }

    /// `bit`'s newest call, found from the end (no walk back over the window to its start,
    /// as [`History::members`] does for a scan in order).
    pub(crate) fn last(&self, bit: u8) -> Option<Call> {
        self.calls.holding(0, bit).next_back()
    }

    /// `bit`'s window with indexed access: a view of the newest calls when they are all in it
    /// (the usual case), else a list.
    pub(crate) fn view(&self, bit: u8) -> View<'_> {
        let n = self.len(bit);
        let start = self.calls.len().saturating_sub(n);
        // Every call in the window (the longest one's usual case): nothing to check.
        if start == 0 && n == self.calls.len() {
            return View::Suffix(self, 0);
        }
        if self.calls.all_hold(start, bit) {
            View::Suffix(self, start)
        } else {
            View::Listed(self.members(bit).collect())
        }
    }

    /// After a step: drop calls no window holds. Ones left in the middle (an entry forgotten
    /// while older ones stay) are swept once they are as many as the windows' calls, so the
    /// history stays within twice the windows' bounds.
    pub(crate) fn settle(&mut self) {
        while self.calls.len() > 0 && self.calls.bits(self.calls.len() - 1) == 0 {
            self.calls.pop_back();
        }
        while self.calls.len() > 0 && self.calls.bits(0) == 0 {
            self.calls.pop_front();
        }
        let held: usize = self.counts.iter().map(|n| *n as usize).sum();
        if self.calls.len() > 2 * held + 16 {
            self.calls.retain_held();
        }
    }

    /// Whether both hold the same windows (how the calls are shared does not matter).
    fn same_windows(&self, other: &History) -> bool {
        BITS.iter().all(|&b| {
            let key = |c: Call| match b {
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

pub(crate) enum View<'a> {
    Suffix(&'a History, usize),
    Listed(Vec<Call>),
}

impl View<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            View::Suffix(h, start) => h.calls.len() - start,
            View::Listed(v) => v.len(),
        }
    }

    pub(crate) fn get(&self, i: usize) -> Call {
        match self {
            View::Suffix(h, start) => h.calls.get(start + i),
            View::Listed(v) => v[i],
        }
    }
}
