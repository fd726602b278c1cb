//! The calls of a history in the narrowest form all of them fit, and the scans over a window's
//! bit that the detectors run every step (one match on the form per scan, not one per call).
use super::slots::{reserve, Held, Lean, Packed, Slot, Wide};
use super::Call;
use std::collections::{vec_deque, VecDeque};

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

/// The calls in the narrowest form all of them fit (lean, else wide, else whole: steps four
/// billion apart or a run past 2^26 novel actions, correct and only larger), kept in it until
/// the history is next empty.
#[derive(Debug, Clone)]
pub(super) enum Store {
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

impl Store {
    pub(super) fn len(&self) -> usize {
        match self {
            Store::Lean(p) => p.q.len(),
            Store::Wide(p) => p.q.len(),
            Store::Whole(q) => q.len(),
        }
    }

    pub(super) fn get(&self, i: usize) -> Call {
        match self {
            Store::Lean(p) => p.get(i),
            Store::Wide(p) => p.get(i),
            Store::Whole(q) => q[i],
        }
    }

    pub(super) fn bits(&self, i: usize) -> u8 {
        match self {
            Store::Lean(p) => p.bits(i),
            Store::Wide(p) => p.bits(i),
            Store::Whole(q) => q[i].bits,
        }
    }

    pub(super) fn set_bits(&mut self, i: usize, b: u8) {
        match self {
            Store::Lean(p) => p.set_bits(i, b),
            Store::Wide(p) => p.set_bits(i, b),
            Store::Whole(q) => q[i].bits = b,
        }
    }

    /// Room for one more call, by doubling: a restore pushes whole windows at once, then
    /// [`Self::shrink_to_fit`]s, instead of growing one call at a time (a reallocation each).
    pub(super) fn reserve_amortized(&mut self) {
        match self {
            Store::Lean(p) => p.q.reserve(1),
            Store::Wide(p) => p.q.reserve(1),
            Store::Whole(q) => q.reserve(1),
        }
    }

    pub(super) fn shrink_to_fit(&mut self) {
        match self {
            Store::Lean(p) => p.q.shrink_to_fit(),
            Store::Wide(p) => p.q.shrink_to_fit(),
            Store::Whole(q) => q.shrink_to_fit(),
        }
    }

    pub(super) fn push_back(&mut self, c: Call) {
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

    pub(super) fn pop_back(&mut self) {
        match self {
            Store::Lean(p) => drop(p.q.pop_back()),
            Store::Wide(p) => drop(p.q.pop_back()),
            Store::Whole(q) => drop(q.pop_back()),
        }
    }

    pub(super) fn pop_front(&mut self) {
        match self {
            Store::Lean(p) => drop(p.q.pop_front()),
            Store::Wide(p) => drop(p.q.pop_front()),
            Store::Whole(q) => drop(q.pop_front()),
        }
    }

    /// One match per scan rather than one per call: the detectors scan their windows
    /// several times a step, and indexing the store paid the form's match and the ring
    /// buffer's index arithmetic at every call.
    pub(super) fn first_holding(&self, bit: u8, need: usize) -> usize {
        match self {
            Store::Lean(p) => first_holding(&p.q, bit, need),
            Store::Wide(p) => first_holding(&p.q, bit, need),
            Store::Whole(q) => first_holding(q, bit, need),
        }
    }

    pub(super) fn release_oldest(&mut self, bit: u8, n: usize) {
        match self {
            Store::Lean(p) => release_oldest(&mut p.q, bit, n),
            Store::Wide(p) => release_oldest(&mut p.q, bit, n),
            Store::Whole(q) => release_oldest(q, bit, n),
        }
    }

    pub(super) fn release_if(&mut self, bit: u8, gone: impl FnMut(&Call) -> bool) -> u16 {
        match self {
            Store::Lean(p) => release_if(&mut p.q, bit, |s| s.call(p.base), gone),
            Store::Wide(p) => release_if(&mut p.q, bit, |s| s.call(p.base), gone),
            Store::Whole(q) => release_if(q, bit, |c| *c, gone),
        }
    }

    pub(super) fn all_hold(&self, from: usize, bit: u8) -> bool {
        match self {
            Store::Lean(p) => all_hold(&p.q, from, bit),
            Store::Wide(p) => all_hold(&p.q, from, bit),
            Store::Whole(q) => all_hold(q, from, bit),
        }
    }

    /// The calls from index `from` on that hold `bit`, oldest first.
    pub(super) fn holding(&self, from: usize, bit: u8) -> Holding<'_> {
        let calls = match self {
            Store::Lean(p) => Forms::Lean(p.base, p.q.range(from..)),
            Store::Wide(p) => Forms::Wide(p.base, p.q.range(from..)),
            Store::Whole(q) => Forms::Whole(q.range(from..)),
        };
        Holding { bit, calls }
    }

    /// Keep only the calls some window holds.
    pub(super) fn retain_held(&mut self) {
        match self {
            Store::Lean(p) => p.retain_held(),
            Store::Wide(p) => p.retain_held(),
            Store::Whole(q) => q.retain(|c| c.bits != 0),
        }
    }
}

/// The calls of one window, decoded as they are read: see [`Store::holding`].
#[derive(Clone)]
pub(crate) struct Holding<'a> {
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
