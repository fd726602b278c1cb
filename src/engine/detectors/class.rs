//! The classes of tools that repeat by design. A leaf: the configuration (which tools a policy
//! puts in a class) and the step view (which class a call's name and arguments imply) both
//! name them, and neither depends on the other through it.
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ToolClass {
    Normal,
    /// Status checks, waits, log tails: identical results are expected for a while.
    Poll,
    /// Debugger stepping.
    Step,
    /// Scrolling a page or a list.
    Scroll,
    /// Never counted by any repetition detector.
    Exempt,
}

impl ToolClass {
    pub(crate) fn is_repeatable(self) -> bool {
        matches!(self, ToolClass::Poll | ToolClass::Step | ToolClass::Scroll)
    }

    /// Whether the *same answer* to the same call is expected for a while. Only waiting does
    /// that: a debugger step or a scroll that returns exactly what it returned before moved
    /// nothing (stuck on a line, at the end of the page, or an environment `step` that hits a
    /// wall), so those get the normal thresholds once their output stops changing.
    pub(crate) fn tolerates_same_output(self) -> bool {
        matches!(self, ToolClass::Poll)
    }
}
