//! The run-wide counters several detectors compare against (steps seen, novel outputs and
//! actions, the repeated operation's streak). Their record form is in
//! `changelog::state::progress`.
use super::compact::grow_exact;
use super::{StepView, ToolClass};

/// Run-wide counters shared by several detectors. Fields are crate-visible for
/// `changelog::state`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Progress {
    /// Steps applied to the detectors (dense, unlike `step_index`).
    pub(crate) seq: u64,
    /// Tool outputs not among the recent ones: a proxy for "the agent learned something".
    pub(crate) novel_outputs: u64,
    /// Successful, non-repeatable tool calls whose action was not among the recent ones.
    pub(crate) novel_actions: u64,
    /// The recent outputs (the first `outputs` values) then the recent actions, each oldest
    /// first: one allocation per open run instead of two queues. Each is the low half of its
    /// key ([`Self::low32`]): they are only tested for membership, among at most [`Self::RECENT`],
    /// so a new key passes for a known one with probability at most 2⁻²⁶, and half the bytes
    /// are a few percent of an open run.
    pub(crate) recent: Vec<u32>,
    pub(crate) outputs: u32,
    /// Repeated operation's streak: how many of the newest counted tool calls were the same
    /// call with the same output, back to back (0 after a failure). Here, in what would be
    /// padding, rather than in the repeat state, which would grow a size class.
    pub(crate) streak: u32,
}

impl Progress {
    const RECENT: usize = 64;

    /// The low half of a 64-bit key, what [`Progress`] keeps of it.
    pub(crate) fn low32(k: u64) -> u32 {
        k as u32
    }

    /// The counters alone (the recent sets left empty): what detectors compare against as
    /// "before this step", without copying the sets on every step.
    pub(super) fn counters(&self) -> Progress {
        Progress {
            seq: self.seq,
            novel_outputs: self.novel_outputs,
            novel_actions: self.novel_actions,
            recent: Vec::new(),
            outputs: 0,
            streak: self.streak,
        }
    }

    pub(crate) fn outputs(&self) -> usize {
        (self.outputs as usize).min(self.recent.len())
    }

    fn insert(&mut self, at: usize, x: u32) {
        grow_exact(&mut self.recent);
        self.recent.insert(at, x);
    }

    pub(super) fn observe(&mut self, v: &StepView<'_>) {
        self.seq += 1;
        if v.tool.is_none() || v.class == ToolClass::Exempt {
            return;
        }
        let no = self.outputs();
        let output = Self::low32(v.output_key);
        if !self.recent[..no].contains(&output) {
            self.novel_outputs += 1;
            let mut no = no;
            if no >= Self::RECENT {
                self.recent.remove(0);
                no -= 1;
            }
            self.insert(no, output);
            // At most RECENT.
            self.outputs = (no + 1) as u32;
        }
        let no = self.outputs();
        let action = Self::low32(v.action_key);
        let known = self.recent[no..].contains(&action);
        if v.failure.is_none() && !v.class.is_repeatable() && !known {
            self.novel_actions += 1;
        }
        if !known {
            if self.recent.len() - no >= Self::RECENT {
                self.recent.remove(no);
            }
            let end = self.recent.len();
            self.insert(end, action);
        }
    }
}
