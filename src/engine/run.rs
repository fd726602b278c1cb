//! Per-run state and the run's final verdict.
use super::detectors::{budget, RunDetectors};
use super::seen::SeenSteps;
use crate::contract::input::{RunFinished, RunStarted, RunStatus, TerminationReason};
use crate::contract::{SteerOutcome, Step, Totals};
use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;
use std::hash::BuildHasher;
use std::sync::Arc;

/// Everything eddy remembers about one open run: what the changelog stores (its record form
/// is `changelog::state`'s; fields are crate-visible for it).
///
/// Its optional numbers keep their presence in `set` rather than in `Option`s (whose tags cost
/// 24 bytes of every open run); records still write them as options.
#[derive(Debug, Clone, PartialEq)]
pub struct RunState {
    /// Shared by the partition's runs of one agent (see [`Names`]).
    pub(crate) agent: Option<AgentName>,
    /// When the run's `run_started` said it began (if `set` has [`STARTED`]).
    pub(crate) started_ms: i64,
    pub(crate) first_ms: i64,
    pub(crate) last_ts: i64,
    /// Step indices already applied (redeliveries are skipped).
    pub seen: SeenSteps,
    /// Steps and tool calls as `u32` (saturating): 8 bytes of every open run, and no run
    /// comes near four billion steps.
    pub steps: u32,
    pub(crate) tool_calls: u32,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
    pub(crate) signals: u32,
    pub(crate) redeliveries: u64,
    pub(crate) loop_detected: bool,
    /// Which of `started_ms`, `loop_step`, `loop_caught` and `steered_step` hold a value, and
    /// whether the run looped again after it was steered.
    pub(crate) set: u8,
    /// Where the repetition began (if `set` has [`LOOP_STEP`]).
    pub(crate) loop_step: u64,
    /// The step at which the loop was first caught (if `set` has [`LOOP_CAUGHT`]).
    pub(crate) loop_caught: u64,
    /// The run's first `steer` step (if `set` has [`STEERED`]); [`LOOPED_AGAIN`] in `set`: an
    /// alert or stop fired after it.
    pub(crate) steered_step: u64,
    /// `steer` steps seen (saturating: it only tells one steer from several).
    pub(crate) steers: u8,
    /// What a stop (e.g. a budget) implies when the run reports no reason itself.
    pub(crate) inferred_reason: Option<TerminationReason>,
    /// Each detector's state for the run.
    pub detectors: RunDetectors,
    /// The partition's event sequence number at this run's last event (eviction order).
    pub(crate) last_seq: u64,
    /// The current minute's rollup contribution (only when the engine keeps rollups; boxed,
    /// so runs of an engine without them do not carry its 72 bytes).
    pub minute: Option<Box<super::rollup::Minute>>,
}

// An open run is this box and what its detectors hold; 384 bytes is one of the allocator's
// size classes (the next is 448), so a field that crosses it costs 64 bytes of every open run.
const _: () = assert!(std::mem::size_of::<RunState>() <= 384);

pub(crate) const STARTED: u8 = 1;
pub(crate) const LOOP_STEP: u8 = 2;
pub(crate) const LOOP_CAUGHT: u8 = 4;
pub(crate) const STEERED: u8 = 8;
pub(crate) const LOOPED_AGAIN: u8 = 16;

pub(crate) enum End<'a> {
    Finished(&'a RunFinished),
    Idle {
        at_ms: i64,
    },
    /// Closed to stay within `max_open_runs`.
    Evicted {
        at_ms: i64,
    },
}

impl RunState {
    pub(crate) fn agent_name(&self) -> Option<&str> {
        self.agent.as_deref().map(|n| &**n)
    }

    /// The open rollup minute, with what a closing minute records of the run.
    pub(crate) fn rollup_parts(
        &mut self,
    ) -> (&mut super::rollup::OpenMinute, super::rollup::RunFacts<'_>) {
        let facts = super::rollup::RunFacts {
            agent_name: self.agent.as_deref().map(|n| &**n),
            loop_detected: self.loop_detected,
            steps: u64::from(self.steps),
        };
        (&mut self.minute, facts)
    }

    /// A restored run's agent name, shared with the live runs' ([`Names::share`]).
    pub(crate) fn share_agent_name(&mut self, names: &mut Names) {
        names.share(&mut self.agent);
    }

    /// What budgets count.
    pub(crate) fn counts(&self) -> budget::Counts {
        budget::Counts {
            steps: u64::from(self.steps),
            tool_calls: u64::from(self.tool_calls),
            tokens: self.tokens,
            cost_usd: self.cost_usd,
        }
    }

    /// The state of a run first seen at `ts`.
    pub fn new(ts: i64) -> Self {
        Self {
            agent: None,
            started_ms: 0,
            first_ms: ts,
            last_ts: ts,
            seen: SeenSteps::default(),
            steps: 0,
            tool_calls: 0,
            tokens: 0,
            cost_usd: 0.0,
            signals: 0,
            redeliveries: 0,
            loop_detected: false,
            set: 0,
            loop_step: 0,
            loop_caught: 0,
            steered_step: 0,
            steers: 0,
            inferred_reason: None,
            detectors: RunDetectors::default(),
            last_seq: 0,
            minute: None,
        }
    }

    pub(crate) fn touch(&mut self, ts: i64) {
        // Event time may go backwards inside a run (clock skew between agent hosts); keep max.
        self.last_ts = self.last_ts.max(ts);
        self.first_ms = self.first_ms.min(ts);
    }

    pub(crate) fn on_started(&mut self, e: &RunStarted, names: &mut Names) {
        self.agent = Some(names.get(&e.agent_name));
        self.started_ms = e.ts_ms;
        self.set |= STARTED;
    }

    pub(crate) fn on_step(&mut self, s: &Step, names: &mut Names) {
        self.steps = self.steps.saturating_add(1);
        if s.tool_name.is_some() {
            self.tool_calls = self.tool_calls.saturating_add(1);
        }
        self.tokens = self.tokens.saturating_add(s.tokens.unwrap_or(0));
        self.cost_usd += s.cost_usd.unwrap_or(0.0);
        if self.agent.is_none() {
            // A run_started may be missing; the step's agent is the best name we have.
            self.agent = s.agent.as_deref().map(|a| names.get(a));
        }
    }

    pub(crate) fn started_ms(&self) -> i64 {
        self.reported_start().unwrap_or(self.first_ms)
    }

    fn get(&self, bit: u8, v: u64) -> Option<u64> {
        (self.set & bit != 0).then_some(v)
    }

    /// When `run_started` said the run began, if it came.
    pub(crate) fn reported_start(&self) -> Option<i64> {
        (self.set & STARTED != 0).then_some(self.started_ms)
    }

    /// Where the repetition began, as told by the finding that first caught it.
    pub(crate) fn loop_step_index(&self) -> Option<u64> {
        self.get(LOOP_STEP, self.loop_step)
    }

    /// The step at which the loop was first caught.
    pub(crate) fn loop_caught_step_index(&self) -> Option<u64> {
        self.get(LOOP_CAUGHT, self.loop_caught)
    }

    /// How many steps the run took after step `began`, up to and including step `upto`, in
    /// step order: a count, where two indices' difference is none (OTLP's indices are start
    /// times). `None` when it cannot be told: where `engine.max_seen_ranges` merged the gaps
    /// between sparse indices, they count as seen, and a count of all the run's steps or more is
    /// impossible.
    pub(crate) fn steps_between(&self, began: u64, upto: u64) -> Option<u64> {
        let n = self.seen.count_between(began, upto);
        (n < u64::from(self.steps)).then_some(n)
    }

    /// Step `index`'s number in the run (1: its first step), in step order: the run's steps
    /// less those after it, counted from the newest back, as far as merged gaps (which are the
    /// oldest) stay out of reach. `None` for a step the run has not seen, or a count gone
    /// negative by merged gaps.
    pub(crate) fn step_number(&self, index: u64) -> Option<u64> {
        if !self.seen.contains(index) {
            return None;
        }
        u64::from(self.steps)
            .checked_sub(self.seen.count_between(index, u64::MAX))
            .filter(|&n| n >= 1)
    }

    /// A finding caught the run at `step`, saying the repetition began at `began`. Only the
    /// first one sets either: later findings (wider windows, corroborating detectors) must
    /// not move them.
    pub(crate) fn caught(&mut self, step: u64, began: u64) {
        self.caught_after_steer();
        if !self.loop_detected {
            self.loop_detected = true;
            if self.set & LOOP_CAUGHT == 0 {
                self.loop_caught = step;
                self.set |= LOOP_CAUGHT;
            }
        }
        if self.set & LOOP_STEP == 0 {
            self.loop_step = began;
            self.set |= LOOP_STEP;
        }
    }

    /// A guard steered the run (a `steer` step): the first one is where it was steered.
    pub(crate) fn steered(&mut self, step: u64) {
        self.steers = self.steers.saturating_add(1);
        if self.set & STEERED == 0 {
            self.steered_step = step;
            self.set |= STEERED;
        }
    }

    /// A finding caught the run (alert or stop): after a steer, the run looped again.
    fn caught_after_steer(&mut self) {
        if self.set & STEERED != 0 {
            self.set |= LOOPED_AGAIN;
        }
    }

    /// The run's first `steer` step, if a guard steered it.
    pub(crate) fn steered_step_index(&self) -> Option<u64> {
        self.get(STEERED, self.steered_step)
    }

    pub(crate) fn steers(&self) -> u8 {
        self.steers
    }

    /// For a steered run: whether an alert or stop fired after its first steer.
    pub(crate) fn steer_outcome(&self) -> Option<SteerOutcome> {
        self.steered_step_index().map(|_| {
            if self.set & LOOPED_AGAIN != 0 {
                SteerOutcome::LoopedAgain
            } else {
                SteerOutcome::Recovered
            }
        })
    }

    pub(crate) fn totals(&self, end_ms: i64) -> Totals {
        Totals {
            steps: u64::from(self.steps),
            tool_calls: u64::from(self.tool_calls),
            tokens: self.tokens,
            cost_usd: self.cost_usd,
            duration_ms: end_ms.saturating_sub(self.started_ms()).max(0),
        }
    }

    /// (status, termination_reason, reason_was_reported, end time).
    pub(crate) fn verdict(&self, end: &End<'_>) -> (&'static str, TerminationReason, bool, i64) {
        match end {
            End::Finished(f) => {
                let status = match f.status {
                    RunStatus::Completed => "completed",
                    RunStatus::Failed => "failed",
                };
                match f.termination_reason {
                    Some(r) => (status, r, true, f.ts_ms),
                    None => {
                        let inferred = self.inferred_reason.unwrap_or(match f.status {
                            RunStatus::Completed => TerminationReason::Clean,
                            RunStatus::Failed => TerminationReason::Error,
                        });
                        (status, inferred, false, f.ts_ms)
                    }
                }
            }
            End::Idle { at_ms } => (
                "abandoned",
                self.inferred_reason.unwrap_or(TerminationReason::Timeout),
                false,
                *at_ms,
            ),
            End::Evicted { at_ms } => ("abandoned", TerminationReason::Evicted, false, *at_ms),
        }
    }
}

/// An agent's name as runs hold it: a thin pointer (8 bytes in every open run, where an
/// `Arc<str>` takes 16) to one allocation per name per partition ([`Names`]).
pub(crate) type AgentName = Arc<Box<str>>;

/// Agent names, one allocation per name per partition: a fleet runs a handful of agents over
/// many runs, and a name per run was 32 bytes of every open run. Bounded: past
/// [`Names::CAP`] names it starts over (runs keep theirs; only sharing is lost).
#[derive(Debug, Default)]
pub(crate) struct Names(HashTable<AgentName>);

impl Names {
    const CAP: usize = 4096;

    pub(crate) fn get(&mut self, name: &str) -> AgentName {
        let hash = FxBuildHasher.hash_one(name);
        if let Some(n) = self.0.find(hash, |n| ***n == *name) {
            return n.clone();
        }
        if self.0.len() >= Self::CAP {
            self.0.clear();
        }
        let n: AgentName = Arc::new(name.into());
        self.0
            .insert_unique(hash, n.clone(), |n| FxBuildHasher.hash_one(&***n));
        n
    }

    /// A restored run's name, shared with the live ones.
    pub(crate) fn share(&mut self, name: &mut Option<AgentName>) {
        if let Some(n) = name {
            *n = self.get(n);
        }
    }
}
