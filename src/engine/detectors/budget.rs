//! Budgets (LoopGuard `StepBudgetDetector` / `ToolCallBudgetDetector`, off unless configured):
//! exceeding a maximum raises one `stop`. Step, tool-call and cost budgets imply
//! `max_steps_reached`; token and context budgets imply `context_limit` when the run reports no
//! reason of its own.
use super::{hex64, Finding, StepView};
use crate::contract::input::TerminationReason;
use crate::contract::Severity;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    pub max_steps: Option<u64>,
    pub(crate) max_tool_calls: Option<u64>,
    pub(crate) max_tokens: Option<u64>,
    pub(crate) max_cost_usd: Option<f64>,
    pub(crate) max_context_tokens: Option<u64>,
}

/// What budgets count: the run's own totals (`RunState`), including the current step.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Counts {
    pub(crate) steps: u64,
    pub(crate) tool_calls: u64,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
}

/// Only which budgets fired: the counts are the run's, which counts the same things. Record
/// shape in `changelog::state::budget`; fields are crate-visible for it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetState {
    /// Bit per budget already reported.
    pub(crate) fired: u8,
}

impl BudgetState {
    pub(crate) fn on_step(
        &mut self,
        cfg: &BudgetConfig,
        v: &StepView<'_>,
        run: Counts,
        out: &mut Vec<Finding>,
    ) {
        let Counts {
            steps,
            tool_calls,
            tokens,
            cost_usd,
        } = run;
        let ctx = v.step.tokens_in_context.unwrap_or(0);
        // LoopGuard: a budget fires when the count is *greater than* the maximum.
        let checks: [(u8, &str, bool, f64, TerminationReason); 5] = [
            (
                1,
                "max_steps",
                cfg.max_steps.is_some_and(|m| steps > m),
                steps as f64,
                TerminationReason::MaxStepsReached,
            ),
            (
                2,
                "max_tool_calls",
                cfg.max_tool_calls.is_some_and(|m| tool_calls > m),
                tool_calls as f64,
                TerminationReason::MaxStepsReached,
            ),
            (
                4,
                "max_tokens",
                cfg.max_tokens.is_some_and(|m| tokens > m),
                tokens as f64,
                TerminationReason::ContextLimit,
            ),
            (
                8,
                "max_cost_usd",
                cfg.max_cost_usd.is_some_and(|m| cost_usd > m),
                cost_usd,
                TerminationReason::MaxStepsReached,
            ),
            (
                16,
                "max_context_tokens",
                cfg.max_context_tokens.is_some_and(|m| ctx > m),
                ctx as f64,
                TerminationReason::ContextLimit,
            ),
        ];
        for (bit, name, over, value, reason) in checks {
            if over && self.fired & bit == 0 {
                self.fired |= bit;
                let step = v.step.step_index;
                out.push(Finding {
                    detector: "budget",
                    severity: Severity::Stop,
                    pattern: format!("{name} exceeded"),
                    fingerprint: hex64(u64::from(bit)),
                    hits: 1,
                    step_indices: vec![step],
                    first_step_index: step,
                    evidence: serde_json::json!({"budget": name, "value": value}),
                    stop_reason: Some(reason),
                    corroborating: false,
                });
            }
        }
    }
}
