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
    pub max_tool_calls: Option<u64>,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub max_context_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BudgetState {
    steps: u64,
    tool_calls: u64,
    tokens: u64,
    cost_usd: f64,
    /// Bit per budget already reported.
    fired: u8,
}

impl BudgetState {
    pub fn on_step(&mut self, cfg: &BudgetConfig, v: &StepView<'_>, out: &mut Vec<Finding>) {
        self.steps += 1;
        if v.tool.is_some() {
            self.tool_calls += 1;
        }
        self.tokens = self.tokens.saturating_add(v.step.tokens.unwrap_or(0));
        self.cost_usd += v.step.cost_usd.unwrap_or(0.0);
        let ctx = v.step.tokens_in_context.unwrap_or(0);
        // LoopGuard: a budget fires when the count is *greater than* the maximum.
        let checks: [(u8, &str, bool, f64, TerminationReason); 5] = [
            (
                1,
                "max_steps",
                cfg.max_steps.is_some_and(|m| self.steps > m),
                self.steps as f64,
                TerminationReason::MaxStepsReached,
            ),
            (
                2,
                "max_tool_calls",
                cfg.max_tool_calls.is_some_and(|m| self.tool_calls > m),
                self.tool_calls as f64,
                TerminationReason::MaxStepsReached,
            ),
            (
                4,
                "max_tokens",
                cfg.max_tokens.is_some_and(|m| self.tokens > m),
                self.tokens as f64,
                TerminationReason::ContextLimit,
            ),
            (
                8,
                "max_cost_usd",
                cfg.max_cost_usd.is_some_and(|m| self.cost_usd > m),
                self.cost_usd,
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
