//! The compact forms a call is stored in: its step an offset from a base, its window bits,
//! `repeatable` flag and work packed into one word, and its primary key left out when it is
//! the action key. Calls are most of an open run's state, so each byte here is worth saving.
use super::Call;
use std::collections::VecDeque;

/// The window bits, `repeatable` and work of a call as one word of a stored call:
/// `work << 6 | repeatable << 5 | bits`; `None` past 2^26 novel actions.
fn meta_of(c: &Call) -> Option<u32> {
    let work = u32::try_from(c.work).ok().filter(|w| *w < 1 << WORK_BITS)?;
    Some(work << 6 | u32::from(c.repeatable) << 5 | u32::from(c.bits))
}

const WORK_BITS: u32 = 26;

/// A stored form of a call, its step an offset from the store's base step. Calls are most of
/// an open run's state, so each byte here is worth saving.
pub(super) trait Slot: Copy {
    /// `None` when the call does not fit this form.
    fn of(c: &Call, base: u64) -> Option<Self>;
    fn call(&self, base: u64) -> Call;
    fn meta(&self) -> u32;
    fn set_meta(&mut self, m: u32);
}

/// The window bits of a stored call, whatever its form: what the scans over a window read
/// and write, without decoding the rest of the call.
pub(super) trait Held {
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
pub(super) struct Lean {
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
pub(super) struct Wide {
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
pub(super) struct Packed<T> {
    pub(super) base: u64,
    pub(super) q: VecDeque<T>,
}

impl<T: Slot> Packed<T> {
    /// All of `calls` in this form against their least step, if they all fit.
    pub(super) fn fit(calls: &[Call]) -> Option<Self> {
        let base = calls.iter().map(|c| c.step).min().unwrap_or(0);
        let mut q = VecDeque::with_capacity(calls.len());
        for c in calls {
            q.push_back(T::of(c, base)?);
        }
        Some(Self { base, q })
    }

    pub(super) fn get(&self, i: usize) -> Call {
        self.q[i].call(self.base)
    }

    pub(super) fn bits(&self, i: usize) -> u8 {
        self.q[i].held()
    }

    pub(super) fn set_bits(&mut self, i: usize, b: u8) {
        self.q[i].set_held(b);
    }

    /// False when `c` does not fit this form against this base.
    pub(super) fn push(&mut self, c: &Call) -> bool {
        let Some(s) = T::of(c, self.base) else {
            return false;
        };
        reserve(&mut self.q);
        self.q.push_back(s);
        true
    }

    pub(super) fn retain_held(&mut self) {
        self.q.retain(|s| s.meta() & 31 != 0);
    }
}

/// Room for one more, exactly (see [`crate::engine::detectors::grow_exact`]).
pub(super) fn reserve<T>(q: &mut VecDeque<T>) {
    if q.len() == q.capacity() {
        q.reserve_exact(1);
    }
}
