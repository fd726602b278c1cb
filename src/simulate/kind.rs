//! The scenarios a run can follow, with what `eddy eval` needs to know of each (whether it
//! loops, and which detector's definition the loop meets).

/// A scenario a simulated run follows: healthy work, or a kind of loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Does its task and finishes.
    Healthy,
    /// Polls a job until it is done (repeats that are progress).
    Polling,
    /// Retries a failing call, which then succeeds.
    RetryRecovers,
    /// Pages through results (same tool, moving input).
    Pagination,
    /// Hands work to sub-agents and back, each step new.
    Delegation,
    /// Repeats the same call with the same input.
    ExactLoop,
    /// Repeats a call whose input differs only in volatile fields (ids, timestamps).
    VolatileLoop,
    /// Repeats the same thing in different words.
    ParaphraseLoop,
    /// Retries a call that keeps failing authentication.
    AuthFailureLoop,
    /// Alternates between two calls.
    PingPong,
    /// Agents hand control around in a cycle.
    HandoffCycle,
    /// Thinks without acting, over and over.
    ThinkLoop,
}

impl Kind {
    /// Every kind, in a fixed order.
    pub const ALL: [Kind; 12] = [
        Kind::Healthy,
        Kind::Polling,
        Kind::RetryRecovers,
        Kind::Pagination,
        Kind::Delegation,
        Kind::ExactLoop,
        Kind::VolatileLoop,
        Kind::ParaphraseLoop,
        Kind::AuthFailureLoop,
        Kind::PingPong,
        Kind::HandoffCycle,
        Kind::ThinkLoop,
    ];

    /// The kind's name in labels and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Healthy => "healthy",
            Kind::Polling => "polling",
            Kind::RetryRecovers => "retry_recovers",
            Kind::Pagination => "pagination",
            Kind::Delegation => "delegation",
            Kind::ExactLoop => "exact_loop",
            Kind::VolatileLoop => "volatile_loop",
            Kind::ParaphraseLoop => "paraphrase_loop",
            Kind::AuthFailureLoop => "auth_failure_loop",
            Kind::PingPong => "ping_pong",
            Kind::HandoffCycle => "handoff_cycle",
            Kind::ThinkLoop => "think_loop",
        }
    }

    pub(crate) fn loops(self) -> bool {
        self.detector().is_some()
    }

    pub(crate) fn multi_agent(self) -> bool {
        matches!(self, Kind::Delegation | Kind::HandoffCycle)
    }

    /// The detector whose definition the injected loop meets (the `kind` of `eddy eval`'s labels).
    pub fn detector(self) -> Option<&'static str> {
        match self {
            Kind::ExactLoop | Kind::VolatileLoop => Some("repeated_operation"),
            Kind::ParaphraseLoop => Some("near_duplicate"),
            Kind::AuthFailureLoop => Some("repeated_failure"),
            Kind::PingPong => Some("cycle"),
            Kind::HandoffCycle => Some("handoff_cycle"),
            Kind::ThinkLoop => Some("content_repetition"),
            _ => None,
        }
    }

    /// Healthy runs are mostly plain work; the loop kinds are equally likely.
    pub(super) fn default_weight(self) -> f64 {
        match self {
            Kind::Healthy => 4.0,
            _ => 1.0,
        }
    }
}
