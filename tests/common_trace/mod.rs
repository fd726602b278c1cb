//! A run written as a list of steps, replayed through the engine with default settings, and
//! asked when its first signal of a severity came: shared by the timing tests.
// Each test crate that includes this module uses a part of it.
#![allow(dead_code)]
use eddy::contract::{OutputEvent, Severity};
use eddy::engine::EngineConfig;
use eddy::replay::replay_to_vec;
use serde_json::json;
use std::sync::Arc;

/// A run as a list of step bodies; `step_index` is the position from 1.
#[derive(Default)]
pub struct Trace(pub Vec<serde_json::Value>);

impl Trace {
    pub fn tool(mut self, tool: &str, input: serde_json::Value, output: serde_json::Value) -> Self {
        self.0.push(
            json!({"step_type": "tool_call", "tool_name": tool, "tool_input": input,
                           "tool_output": output, "tool_success": true}),
        );
        self
    }

    pub fn fail(mut self, tool: &str, input: serde_json::Value, output: serde_json::Value) -> Self {
        self.0.push(
            json!({"step_type": "tool_call", "tool_name": tool, "tool_input": input,
                           "tool_output": output, "tool_success": false}),
        );
        self
    }

    pub fn say(mut self, step_type: &str, content: &str) -> Self {
        self.0
            .push(json!({"step_type": step_type, "content": content}));
        self
    }

    pub fn with_context(mut self, tokens: &[u64]) -> Self {
        for (s, t) in self.0.iter_mut().zip(tokens) {
            s["tokens_in_context"] = json!(t);
        }
        self
    }

    /// Step of the first signal at or above `at_least` (any detector), if any.
    pub fn first(&self, at_least: Severity) -> Option<u64> {
        self.first_by(None, at_least)
    }

    /// A step with its own fields (a tool call with a custom output shape, a step type).
    pub fn raw(mut self, body: serde_json::Value) -> Self {
        self.0.push(body);
        self
    }

    /// Step of the first signal of `detector` (any when `None`) at or above `at_least`.
    pub fn first_by(&self, detector: Option<&str>, at_least: Severity) -> Option<u64> {
        let mut lines = Vec::new();
        for (i, body) in self.0.iter().enumerate() {
            let mut e = json!({"v": 1, "kind": "step", "project_id": "p", "run_id": "r",
                               "ts": 1_700_000_000_000u64 + i as u64 * 1000,
                               "step_index": i + 1});
            for (k, v) in body.as_object().unwrap() {
                e[k] = v.clone();
            }
            lines.push(e.to_string());
        }
        let outs = replay_to_vec(
            lines.join("\n").as_bytes(),
            Arc::new(EngineConfig::default()),
            1,
        )
        .0;
        outs.iter()
            .filter_map(|o| match o {
                OutputEvent::LoopWarning(s) | OutputEvent::LoopDetected(s)
                    if s.severity >= at_least && detector.is_none_or(|d| d == s.detector) =>
                {
                    Some(s.step_index)
                }
                _ => None,
            })
            .min()
    }
}

pub fn repeat(t: Trace, n: usize, f: impl Fn(Trace, usize) -> Trace) -> Trace {
    (0..n).fold(t, f)
}
