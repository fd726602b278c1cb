//! The budget detector's state ([`BudgetState`]): only which budgets fired. JSON records,
//! versions 1 to 4, also carry the counts (the run's own, which count the same things);
//! reading ignores them.
use crate::engine::detectors::budget::BudgetState;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
#[serde(remote = "BudgetState", rename = "BudgetState")]
struct BudgetStateDef {
    /// Bit per budget already reported.
    #[serde(default)]
    fired: u8,
}

through_remote!(BudgetState, BudgetStateDef);
