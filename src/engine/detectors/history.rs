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
use std::collections::{vec_deque, VecDeque};

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

/// The window bits, `repeatable` and work of a call as one word of a stored call:
/// `work << 6 | repeatable << 5 | bits`; `None` past 2^26 novel actions.
fn meta_of(c: &Call) -> Option<u32> {
    let work = u32::try_from(c.work).ok().filter(|w| *w < 1 << WORK_BITS)?;
    Some(work << 6 | u32::from(c.repeatable) << 5 | u32::from(c.bits))
}

const WORK_BITS: u32 = 26;

/// A stored form of a call, its step an offset from the store's base step. Calls are most of
/// an open run's state, so each byte here is worth saving.
trait Slot: Copy {
    /// `None` when the call does not fit this form.
    fn of(c: &Call, base: u64) -> Option<Self>;
    fn call(&self, base: u64) -> Call;
    fn meta(&self) -> u32;
    fn set_meta(&mut self, m: u32);
}

/// The window bits of a stored call, whatever its form: what the scans over a window read
/// and write, without decoding the rest of the call.
trait Held {
    fn held(&self) -> u8;
    fn set_held(&mut self, b: u8);
}

impl<T: Slot> Held for T {
    fn held(&self) -> u8 {
        (self.meta() & 31) as u8
    }

    fn set_held(&mut self, b: u8) {
        self.set_meta(self.meta() & !31 | u32::from(b));
    }
}

impl Held for Call {
    fn held(&self) -> u8 {
        self.bits
    }

    fn set_held(&mut self, b: u8) {
        self.bits = b;
    }
}

/// Where the oldest of the newest `need` calls holding `bit` sits in `q` (0 when fewer hold it).
fn first_holding<T: Held>(q: &VecDeque<T>, bit: u8, mut need: usize) -> usize {
    let mut start = q.len();
    for s in q.iter().rev() {
        if need == 0 {
            break;
        }
        start -= 1;
        if s.held() & bit != 0 {
            need -= 1;
        }
    }
    start
}

/// Take `bit` off the oldest `n` calls holding it.
fn release_oldest<T: Held>(q: &mut VecDeque<T>, bit: u8, mut n: usize) {
    for s in q.iter_mut() {
        if n == 0 {
            break;
        }
        let b = s.held();
        if b & bit != 0 {
            s.set_held(b & !bit);
            n -= 1;
        }
    }
}

/// Take `bit` off the calls holding it for which `gone` is true; how many were.
fn release_if<T: Held>(
    q: &mut VecDeque<T>,
    bit: u8,
    call: impl Fn(&T) -> Call,
    mut gone: impl FnMut(&Call) -> bool,
) -> u16 {
    let mut n = 0;
    for s in q.iter_mut() {
        let b = s.held();
        if b & bit != 0 && gone(&call(s)) {
            s.set_held(b & !bit);
            n += 1;
        }
    }
    n
}

fn all_hold<T: Held>(q: &VecDeque<T>, from: usize, bit: u8) -> bool {
    q.range(from..).all(|s| s.held() & bit != 0)
}

fn step_of(c: &Call, base: u64) -> Option<u32> {
    u32::try_from(c.step.checked_sub(base)?).ok()
}

fn call_of(base: u64, step: u32, action: u64, primary: u64, output: u64, meta: u32) -> Call {
    Call {
        step: base + u64::from(step),
        action,
        primary,
        output,
        work: u64::from(meta >> 6),
        repeatable: meta & 32 != 0,
        bits: (meta & 31) as u8,
    }
}

/// 24 bytes: a call whose primary key is its action key, as every call is unless a tool
/// policy names a primary argument.
#[derive(Debug, Clone, Copy)]
struct Lean {
    action: u64,
    output: u64,
    step: u32,
    meta: u32,
}

impl Lean {
    /// `c` without its primary key.
    fn without_primary(c: &Call, base: u64) -> Option<Self> {
        Some(Self {
            action: c.action,
            output: c.output,
            step: step_of(c, base)?,
            meta: meta_of(c)?,
        })
    }
}

impl Slot for Lean {
    fn of(c: &Call, base: u64) -> Option<Self> {
        (c.primary == c.action).then_some(())?;
        Self::without_primary(c, base)
    }

    fn call(&self, base: u64) -> Call {
        call_of(
            base,
            self.step,
            self.action,
            self.action,
            self.output,
            self.meta,
        )
    }

    fn meta(&self) -> u32 {
        self.meta
    }

    fn set_meta(&mut self, m: u32) {
        self.meta = m;
    }
}

/// 32 bytes: any call within 2^32 steps of the base and 2^26 novel actions; a [`Lean`] call
/// with its own primary key.
#[derive(Debug, Clone, Copy)]
struct Wide {
    lean: Lean,
    primary: u64,
}

impl Slot for Wide {
    fn of(c: &Call, base: u64) -> Option<Self> {
        Some(Self {
            lean: Lean::without_primary(c, base)?,
            primary: c.primary,
        })
    }

    fn call(&self, base: u64) -> Call {
        Call {
            primary: self.primary,
            ..self.lean.call(base)
        }
    }

    fn meta(&self) -> u32 {
        self.lean.meta
    }

    fn set_meta(&mut self, m: u32) {
        self.lean.meta = m;
    }
}

// The sizes the docs state (DESIGN.md, `bench/README.md`).
const _: () = assert!(std::mem::size_of::<Lean>() == 24 && std::mem::size_of::<Wide>() == 32);

#[derive(Debug, Clone)]
struct Packed<T> {
    base: u64,
    q: VecDeque<T>,
}

impl<T: Slot> Packed<T> {
    /// All of `calls` in this form against their least step, if they all fit.
    fn fit(calls: &[Call]) -> Option<Self> {
        let base = calls.iter().map(|c| c.step).min().unwrap_or(0);
        let mut q = VecDeque::with_capacity(calls.len());
        for c in calls {
            q.push_back(T::of(c, base)?);
        }
        Some(Self { base, q })
    }

    fn get(&self, i: usize) -> Call {
        self.q[i].call(self.base)
    }

    fn bits(&self, i: usize) -> u8 {
        self.q[i].held()
    }

    fn set_bits(&mut self, i: usize, b: u8) {
        self.q[i].set_held(b);
    }

    /// False when `c` does not fit this form against this base.
    fn push(&mut self, c: &Call) -> bool {
        let Some(s) = T::of(c, self.base) else {
            return false;
        };
        reserve(&mut self.q);
        self.q.push_back(s);
        true
    }

    fn retain_held(&mut self) {
        self.q.retain(|s| s.meta() & 31 != 0);
    }
}

/// The calls in the narrowest form all of them fit (lean, else wide, else whole: steps four
/// billion apart or a run past 2^26 novel actions, correct and only larger), kept in it until
/// the history is next empty.
#[derive(Debug, Clone)]
enum Store {
    Lean(Packed<Lean>),
    Wide(Packed<Wide>),
    Whole(VecDeque<Call>),
}

impl Default for Store {
    fn default() -> Self {
        Store::Lean(Packed {
            base: 0,
            q: VecDeque::new(),
        })
    }
}

/// Room for one more, exactly (see [`super::grow_exact`]).
fn reserve<T>(q: &mut VecDeque<T>) {
    if q.len() == q.capacity() {
        q.reserve_exact(1);
    }
}

impl Store {
    fn len(&self) -> usize {
        match self {
            Store::Lean(p) => p.q.len(),
            Store::Wide(p) => p.q.len(),
            Store::Whole(q) => q.len(),
        }
    }

    fn get(&self, i: usize) -> Call {
        match self {
            Store::Lean(p) => p.get(i),
            Store::Wide(p) => p.get(i),
            Store::Whole(q) => q[i],
        }
    }

    fn bits(&self, i: usize) -> u8 {
        match self {
            Store::Lean(p) => p.bits(i),
            Store::Wide(p) => p.bits(i),
            Store::Whole(q) => q[i].bits,
        }
    }

    fn set_bits(&mut self, i: usize, b: u8) {
        match self {
            Store::Lean(p) => p.set_bits(i, b),
            Store::Wide(p) => p.set_bits(i, b),
            Store::Whole(q) => q[i].bits = b,
        }
    }

    fn push_back(&mut self, c: Call) {
        if self.len() == 0 {
            // A fresh base: the next calls are usually a few steps later.
            let mut q = match std::mem::take(self) {
                Store::Lean(p) => p.q,
                _ => VecDeque::new(),
            };
            q.clear();
            *self = Store::Lean(Packed { base: c.step, q });
        }
        let fits = match self {
            Store::Lean(p) => p.push(&c),
            Store::Wide(p) => p.push(&c),
            Store::Whole(q) => {
                reserve(q);
                q.push_back(c);
                true
            }
        };
        if fits {
            return;
        }
        // An earlier step than the base (steps may arrive out of order), one too far past it,
        // or a call the form cannot hold: every call again, in the narrowest form that fits.
        let mut calls: Vec<Call> = (0..self.len()).map(|i| self.get(i)).collect();
        calls.push(c);
        *self = if let Some(p) = Packed::fit(&calls) {
            Store::Lean(p)
        } else if let Some(p) = Packed::fit(&calls) {
            Store::Wide(p)
        } else {
            Store::Whole(calls.into())
        };
    }

    fn pop_back(&mut self) {
        match self {
            Store::Lean(p) => drop(p.q.pop_back()),
            Store::Wide(p) => drop(p.q.pop_back()),
            Store::Whole(q) => drop(q.pop_back()),
        }
    }

    fn pop_front(&mut self) {
        match self {
            Store::Lean(p) => drop(p.q.pop_front()),
            Store::Wide(p) => drop(p.q.pop_front()),
            Store::Whole(q) => drop(q.pop_front()),
        }
    }

    /// One match per scan rather than one per call: the detectors scan their windows
    /// several times a step, and indexing the store paid the form's match and the ring
    /// buffer's index arithmetic at every call.
    fn first_holding(&self, bit: u8, need: usize) -> usize {
        match self {
            Store::Lean(p) => first_holding(&p.q, bit, need),
            Store::Wide(p) => first_holding(&p.q, bit, need),
            Store::Whole(q) => first_holding(q, bit, need),
        }
    }

    fn release_oldest(&mut self, bit: u8, n: usize) {
        match self {
            Store::Lean(p) => release_oldest(&mut p.q, bit, n),
            Store::Wide(p) => release_oldest(&mut p.q, bit, n),
            Store::Whole(q) => release_oldest(q, bit, n),
        }
    }

    fn release_if(&mut self, bit: u8, gone: impl FnMut(&Call) -> bool) -> u16 {
        match self {
            Store::Lean(p) => release_if(&mut p.q, bit, |s| s.call(p.base), gone),
            Store::Wide(p) => release_if(&mut p.q, bit, |s| s.call(p.base), gone),
            Store::Whole(q) => release_if(q, bit, |c| *c, gone),
        }
    }

    fn all_hold(&self, from: usize, bit: u8) -> bool {
        match self {
            Store::Lean(p) => all_hold(&p.q, from, bit),
            Store::Wide(p) => all_hold(&p.q, from, bit),
            Store::Whole(q) => all_hold(q, from, bit),
        }
    }

    /// The calls from index `from` on that hold `bit`, oldest first.
    fn holding(&self, from: usize, bit: u8) -> Holding<'_> {
        let calls = match self {
            Store::Lean(p) => Forms::Lean(p.base, p.q.range(from..)),
            Store::Wide(p) => Forms::Wide(p.base, p.q.range(from..)),
            Store::Whole(q) => Forms::Whole(q.range(from..)),
        };
        Holding { bit, calls }
    }

    /// Keep only the calls some window holds.
    fn retain_held(&mut self) {
        match self {
            Store::Lean(p) => p.retain_held(),
            Store::Wide(p) => p.retain_held(),
            Store::Whole(q) => q.retain(|c| c.bits != 0),
        }
    }
}

/// The calls of one window, decoded as they are read: see [`Store::holding`].
#[derive(Clone)]
pub struct Holding<'a> {
    bit: u8,
    calls: Forms<'a>,
}

#[derive(Clone)]
enum Forms<'a> {
    Lean(u64, vec_deque::Iter<'a, Lean>),
    Wide(u64, vec_deque::Iter<'a, Wide>),
    Whole(vec_deque::Iter<'a, Call>),
}

impl Iterator for Holding<'_> {
    type Item = Call;

    fn next(&mut self) -> Option<Call> {
        let bit = self.bit;
        match &mut self.calls {
            Forms::Lean(base, it) => it.find(|s| s.held() & bit != 0).map(|s| s.call(*base)),
            Forms::Wide(base, it) => it.find(|s| s.held() & bit != 0).map(|s| s.call(*base)),
            Forms::Whole(it) => it.find(|c| c.bits & bit != 0).copied(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = match &self.calls {
            Forms::Lean(_, it) => it.len(),
            Forms::Wide(_, it) => it.len(),
            Forms::Whole(it) => it.len(),
        };
        (0, Some(left))
    }
}

impl DoubleEndedIterator for Holding<'_> {
    fn next_back(&mut self) -> Option<Call> {
        let bit = self.bit;
        match &mut self.calls {
            Forms::Lean(base, it) => it.rfind(|s| s.held() & bit != 0).map(|s| s.call(*base)),
            Forms::Wide(base, it) => it.rfind(|s| s.held() & bit != 0).map(|s| s.call(*base)),
            Forms::Whole(it) => it.rfind(|c| c.bits & bit != 0).copied(),
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
        if over > 0 {
            self.calls.release_oldest(bit, over);
        }
        // At most MAX_WINDOW now.
        self.counts[slot(bit)] = (n - over) as u16;
        over
    }

    /// Remove the calls of `bit`'s window for which `gone` is true.
    pub fn leave(&mut self, bit: u8, gone: impl FnMut(&Call) -> bool) {
        let n = self.calls.release_if(bit, gone);
        self.counts[slot(bit)] -= n;
    }

    pub fn len(&self, bit: u8) -> usize {
        self.counts[slot(bit)] as usize
    }

    /// Where `bit`'s oldest call is: the short windows (no progress, near-duplicates) sit at
    /// the end of a history the cycle window keeps long, so scans start there.
    fn first(&self, bit: u8) -> usize {
        self.calls.first_holding(bit, self.len(bit))
    }

    /// `bit`'s window, oldest first.
    pub fn members(&self, bit: u8) -> Holding<'_> {
        self.calls.holding(self.first(bit), bit)
    }

    /// `bit`'s newest call, found from the end (no walk back over the window to its start,
    /// as [`History::members`] does for a scan in order).
    pub fn last(&self, bit: u8) -> Option<Call> {
        self.calls.holding(0, bit).next_back()
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
        if self.calls.all_hold(start, bit) {
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
                matches!(h.calls, Store::Lean(Packed { base: 7, .. })),
                "{calls:?}"
            );
        }
    }

    /// Calls whose primary key is their action keep 24 bytes; the first that differs widens
    /// the store, and every call still comes back exactly.
    #[test]
    fn a_call_with_its_own_primary_widens_the_store() {
        let mut h = History::default();
        let mut want = Vec::new();
        for i in 0..6u64 {
            let primary = if i == 3 { 99 } else { i * 7 };
            let mut c = Call::new(10 + i, i * 7, primary, i, i, false);
            h.push(c);
            h.join(CYCLE, 64);
            h.settle();
            c.bits = CYCLE;
            want.push(c);
            assert_eq!(matches!(h.calls, Store::Lean(_)), i < 3, "{i}");
        }
        assert!(matches!(h.calls, Store::Wide(_)));
        assert_eq!(h.members(CYCLE).collect::<Vec<_>>(), want);
        h.leave(CYCLE, |_| true);
        h.settle();
        h.push(call(1));
        assert!(matches!(h.calls, Store::Lean(_)));
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
