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
    /// `Progress::novel_actions` after this step (repeated operation's reset rule).
    work: u64,
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
            work,
            repeatable: rep,
            bits: 0,
        }
    }

    pub fn work(&self) -> u64 {
        self.work
    }

    pub fn has(&self, bit: u8) -> bool {
        self.bits & bit != 0
    }
}

/// A call as the history stores it: 32 bytes, not 40. The step is an offset from the
/// history's base step, and work, `repeatable` and the window bits share one word. Calls
/// are most of an open run's state, so those 8 bytes are a tenth of it.
#[derive(Debug, Clone, Copy)]
struct Packed {
    action: u64,
    primary: u64,
    output: u64,
    step: u32,
    /// `work << 6 | repeatable << 5 | bits`.
    meta: u32,
}

const WORK_BITS: u32 = 26;

impl Packed {
    /// `None` when the call does not fit: a step more than 2^32 past `base` (or before it),
    /// or more than 2^26 novel actions before it.
    fn of(c: &Call, base: u64) -> Option<Self> {
        let step = u32::try_from(c.step.checked_sub(base)?).ok()?;
        let work = u32::try_from(c.work).ok().filter(|w| *w < 1 << WORK_BITS)?;
        Some(Self {
            action: c.action,
            primary: c.primary,
            output: c.output,
            step,
            meta: work << 6 | u32::from(c.repeatable) << 5 | u32::from(c.bits),
        })
    }

    fn call(&self, base: u64) -> Call {
        Call {
            step: base + u64::from(self.step),
            action: self.action,
            primary: self.primary,
            output: self.output,
            work: u64::from(self.meta >> 6),
            repeatable: self.meta & 32 != 0,
            bits: (self.meta & 31) as u8,
        }
    }

    fn bits(&self) -> u8 {
        (self.meta & 31) as u8
    }

    fn set_bits(&mut self, b: u8) {
        self.meta = self.meta & !31 | u32::from(b);
    }
}

/// The calls, packed unless one does not fit; then, until the history is next empty, kept
/// whole (steps four billion apart or a run past 2^26 novel actions: correct, only larger).
#[derive(Debug, Clone)]
enum Store {
    Packed { base: u64, q: VecDeque<Packed> },
    Whole(VecDeque<Call>),
}

impl Default for Store {
    fn default() -> Self {
        Store::Packed {
            base: 0,
            q: VecDeque::new(),
        }
    }
}

/// Grow by a quarter, not double: one history per open run, most of them short.
fn reserve<T>(q: &mut VecDeque<T>) {
    if q.len() == q.capacity() {
        q.reserve_exact((q.len() / 4).max(2));
    }
}

impl Store {
    fn len(&self) -> usize {
        match self {
            Store::Packed { q, .. } => q.len(),
            Store::Whole(q) => q.len(),
        }
    }

    fn get(&self, i: usize) -> Call {
        match self {
            Store::Packed { base, q } => q[i].call(*base),
            Store::Whole(q) => q[i],
        }
    }

    fn bits(&self, i: usize) -> u8 {
        match self {
            Store::Packed { q, .. } => q[i].bits(),
            Store::Whole(q) => q[i].bits,
        }
    }

    fn set_bits(&mut self, i: usize, b: u8) {
        match self {
            Store::Packed { q, .. } => q[i].set_bits(b),
            Store::Whole(q) => q[i].bits = b,
        }
    }

    fn push_back(&mut self, c: Call) {
        if self.len() == 0 {
            // A fresh base: the next calls are usually a few steps later.
            let mut q = match std::mem::take(self) {
                Store::Packed { q, .. } => q,
                Store::Whole(_) => VecDeque::new(),
            };
            q.clear();
            *self = Store::Packed { base: c.step, q };
        }
        if let Store::Packed { base, q } = self {
            if let Some(p) = Packed::of(&c, *base) {
                reserve(q);
                q.push_back(p);
                return;
            }
            // An earlier step than the base (steps may arrive out of order): rebase if all fit.
            let low = c.step.min(*base);
            let re: Option<VecDeque<Packed>> = q
                .iter()
                .map(|p| Packed::of(&p.call(*base), low))
                .chain(std::iter::once(Packed::of(&c, low)))
                .collect();
            if let Some(mut re) = re {
                re.shrink_to_fit();
                *self = Store::Packed { base: low, q: re };
                return;
            }
            let mut whole: VecDeque<Call> = q.iter().map(|p| p.call(*base)).collect();
            whole.push_back(c);
            *self = Store::Whole(whole);
            return;
        }
        if let Store::Whole(q) = self {
            reserve(q);
            q.push_back(c);
        }
    }

    fn pop_back(&mut self) {
        match self {
            Store::Packed { q, .. } => drop(q.pop_back()),
            Store::Whole(q) => drop(q.pop_back()),
        }
    }

    fn pop_front(&mut self) {
        match self {
            Store::Packed { q, .. } => drop(q.pop_front()),
            Store::Whole(q) => drop(q.pop_front()),
        }
    }

    /// Keep only the calls some window holds.
    fn retain_held(&mut self) {
        match self {
            Store::Packed { q, .. } => q.retain(|p| p.bits() != 0),
            Store::Whole(q) => q.retain(|c| c.bits != 0),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct History {
    calls: Store,
    /// Calls per detector bit (derived, not serialised).
    /// 16 bits: windows hold at most [`MAX_WINDOW`] calls.
    counts: [u16; 5],
}

/// The most calls one window holds (larger configured windows are cut to it): a window is
/// scanned on every step, so one this long is a mistake anyway.
pub const MAX_WINDOW: usize = u16::MAX as usize;

fn slot(bit: u8) -> usize {
    bit.trailing_zeros() as usize
}

impl History {
    /// The current step's call; detectors then [`History::join`] it.
    pub fn push(&mut self, c: Call) {
        self.calls.push_back(c);
    }

    /// An entry of a record's window: a call in that one window.
    pub fn restore(&mut self, mut c: Call, bit: u8) {
        // A record cannot hold a longer window; ignore a malformed one's excess.
        if self.len(bit) >= MAX_WINDOW {
            return;
        }
        c.bits = bit;
        self.counts[slot(bit)] += 1;
        self.calls.push_back(c);
    }

    /// Put the current (last) call in `bit`'s window, keeping at most `cap` calls there.
    /// Returns how many of its oldest calls left the window.
    pub fn join(&mut self, bit: u8, cap: usize) -> usize {
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
        let mut left = over;
        for i in 0..self.calls.len() {
            if left == 0 {
                break;
            }
            let b = self.calls.bits(i);
            if b & bit != 0 {
                self.calls.set_bits(i, b & !bit);
                left -= 1;
            }
        }
        // At most MAX_WINDOW now.
        self.counts[slot(bit)] = (n - over) as u16;
        over
    }

    /// Remove the calls of `bit`'s window for which `gone` is true.
    pub fn leave(&mut self, bit: u8, mut gone: impl FnMut(&Call) -> bool) {
        for i in 0..self.calls.len() {
            let b = self.calls.bits(i);
            if b & bit != 0 && gone(&self.calls.get(i)) {
                self.calls.set_bits(i, b & !bit);
                self.counts[slot(bit)] -= 1;
            }
        }
    }

    pub fn len(&self, bit: u8) -> usize {
        self.counts[slot(bit)] as usize
    }

    /// Where `bit`'s oldest call is: the short windows (no progress, near-duplicates) sit at
    /// the end of a history the cycle window keeps long, so scans start there.
    fn first(&self, bit: u8) -> usize {
        let mut need = self.len(bit);
        let mut start = self.calls.len();
        while need > 0 && start > 0 {
            start -= 1;
            if self.calls.bits(start) & bit != 0 {
                need -= 1;
            }
        }
        start
    }

    /// `bit`'s window, oldest first.
    pub fn members(&self, bit: u8) -> impl DoubleEndedIterator<Item = Call> + Clone + '_ {
        (self.first(bit)..self.calls.len())
            .filter(move |&i| self.calls.bits(i) & bit != 0)
            .map(|i| self.calls.get(i))
    }

    /// `bit`'s window with indexed access: a view of the newest calls when they are all in it
    /// (the usual case), else a list.
    pub fn view(&self, bit: u8) -> View<'_> {
        let n = self.len(bit);
        let start = self.calls.len().saturating_sub(n);
        // Every call in the window (the longest one's usual case): nothing to check.
        if start == 0 && n == self.calls.len() {
            return View::Suffix(self, 0);
        }
        if (start..self.calls.len()).all(|i| self.calls.bits(i) & bit != 0) {
            View::Suffix(self, start)
        } else {
            View::Listed(self.members(bit).collect())
        }
    }

    /// After a step: drop calls no window holds. Ones left in the middle (an entry forgotten
    /// while older ones stay) are swept once they are as many as the windows' calls, so the
    /// history stays within twice the windows' bounds.
    pub fn settle(&mut self) {
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

pub enum View<'a> {
    Suffix(&'a History, usize),
    Listed(Vec<Call>),
}

impl View<'_> {
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> usize {
        match self {
            View::Suffix(h, start) => h.calls.len() - start,
            View::Listed(v) => v.len(),
        }
    }

    pub fn get(&self, i: usize) -> Call {
        match self {
            View::Suffix(h, start) => h.calls.get(start + i),
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
        s.collect_seq(self.0.members(self.1).map(|c| (self.2)(&c)))
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
        assert_eq!(h.calls.get(0).step, 87);
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

    /// Calls are packed against a base step; steps before it, four billion past it, or work
    /// past 26 bits must come back exactly as given.
    #[test]
    fn calls_come_back_exactly_whatever_their_steps_and_work() {
        let cases: [&[(u64, u64)]; 5] = [
            &[(10, 0), (11, 1), (12, 1)],
            // Out of order: an earlier step than the first one.
            &[(10, 0), (3, 1), (12, 2), (0, 2)],
            // Steps far apart: kept whole.
            &[(5, 0), (5 + (1 << 32), 1), (6, 1), (u64::MAX, 2)],
            // Work beyond 26 bits, and beyond 32.
            &[(1, 0), (2, (1 << 26) - 1), (3, 1 << 26), (4, u64::MAX)],
            &[(u64::MAX - 1, 0), (0, 0)],
        ];
        for calls in cases {
            let mut h = History::default();
            for &(step, work) in calls {
                h.push(Call::new(
                    step,
                    step ^ 1,
                    step ^ 2,
                    step ^ 3,
                    work,
                    step % 2 == 0,
                ));
                h.join(CYCLE, 64);
                h.settle();
            }
            let got: Vec<Call> = h.members(CYCLE).collect();
            let want: Vec<Call> = calls
                .iter()
                .map(|&(step, work)| {
                    let mut c = Call::new(step, step ^ 1, step ^ 2, step ^ 3, work, step % 2 == 0);
                    c.bits = CYCLE;
                    c
                })
                .collect();
            assert_eq!(got, want, "{calls:?}");
            // Emptied, the history packs again from the next call's step.
            h.leave(CYCLE, |_| true);
            h.settle();
            h.push(call(7));
            assert!(
                matches!(h.calls, Store::Packed { base: 7, .. }),
                "{calls:?}"
            );
        }
    }

    #[test]
    fn a_window_holds_at_most_max_window_calls() {
        let mut h = History::default();
        let n = MAX_WINDOW as u64 + 10;
        for i in 0..n {
            h.push(call(i));
            h.join(CYCLE, usize::MAX);
            h.settle();
        }
        assert_eq!(h.len(CYCLE), MAX_WINDOW);
        assert_eq!(h.members(CYCLE).next().map(|c| c.step), Some(10));
        assert_eq!(h.members(CYCLE).count(), MAX_WINDOW);
    }
}
