//! What the detectors know about one step, computed once: identity keys, tool class, failure
//! classification and the kind of output.
//!
//! This file builds the [`StepView`] and holds its memos; each classification is a file of its
//! own (none of them reads another), its fixed word lists in `lexicon` (the tool classes read
//! the configured class words instead):
//! - `tool_class`: whether a tool polls, steps or scrolls, from its name and its arguments;
//! - `in_progress`: whether an output reports a state that is not finished yet;
//! - `failure`: whether a step failed, how ([`FailClass`]) and the identity of its error;
//! - `output`: the kind of a successful output ([`OutKind`]).
mod failure;
mod in_progress;
mod lexicon;
mod output;
mod tool_class;

pub(crate) use super::class::ToolClass;
pub(crate) use failure::{FailClass, Failure};
pub(crate) use in_progress::reports_waiting;
pub(crate) use output::OutKind;

use super::{DetectorConfig, ToolPolicy};
use crate::contract::Step;
use crate::engine::fingerprint::{canonical_string, Canonical};
use crate::engine::text::key64;
use failure::{classify_failure, ErrorMemo};
use output::output_kind;
use tool_class::{infer_class, name_info, NameInfo, NameMemo};

pub(crate) struct StepView<'a> {
    pub(crate) step: &'a Step,
    pub(crate) canon: &'a Canonical<'a>,
    pub(crate) tool: Option<&'a str>,
    pub(crate) policy: Option<&'a ToolPolicy>,
    pub(crate) class: ToolClass,
    pub(crate) tool_key: u64,
    /// Tool + whole canonical input.
    pub(crate) action_key: u64,
    /// Tool + primary parameter (per-tool JSON pointer), else the action key.
    pub(crate) primary_key: u64,
    /// Canonical output + success flag.
    pub(crate) output_key: u64,
    pub(crate) failure: Option<Failure>,
    pub(crate) out_kind: OutKind,
    /// The tool condenses the conversation (`summarize_conversation`, `compact_history`).
    pub(crate) condenses: bool,
}

fn fp64(fp: Option<[u8; 32]>) -> u64 {
    fp.map_or(0, |d| {
        u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
    })
}

impl<'a> StepView<'a> {
    pub(crate) fn new(
        cfg: &'a DetectorConfig,
        step: &'a Step,
        canon: &'a Canonical<'a>,
        memos: &mut ViewMemos,
    ) -> Self {
        let tool = step.tool_name.as_deref();
        let name = tool.map_or(NameInfo::default(), |t| name_info(cfg, t, &mut memos.tools));
        let policy = tool.and_then(|t| cfg.tools.get(t));
        let class = match (tool, policy.and_then(|p| p.class)) {
            (None, _) => ToolClass::Normal,
            (Some(_), Some(c)) => c,
            (Some(_), None) => match infer_class(cfg, name.flags, &canon.input) {
                ToolClass::Normal
                    if step.tool_success != Some(false) && reports_waiting(&canon.output_text) =>
                {
                    ToolClass::Poll
                }
                c => c,
            },
        };
        let tool_key = name.key;
        let action_key = fp64(canon.fps.canonical_input);
        let primary_key = match (tool, policy.and_then(|p| p.primary.as_deref())) {
            (Some(t), Some(ptr)) => match canon.input.pointer(ptr) {
                Some(v) => key64("primary", &[t.as_bytes(), canonical_string(v).as_bytes()]),
                None => action_key,
            },
            _ => action_key,
        };
        let output_key = fp64(canon.fps.canonical_output);
        let failure = tool
            .and_then(|_| classify_failure(cfg, policy, step, &canon.output, &mut memos.errors));
        let out_kind = if tool.is_none() {
            OutKind::NoTool
        } else if failure.is_some() {
            OutKind::Failure
        } else {
            output_kind(&canon.output)
        };
        Self {
            step,
            canon,
            tool,
            policy,
            class,
            tool_key,
            action_key,
            primary_key,
            output_key,
            failure,
            out_kind,
            condenses: name.condenses,
        }
    }

    /// A tool step that the repetition detectors count.
    pub(crate) fn counted_tool(&self) -> bool {
        self.tool.is_some() && self.class != ToolClass::Exempt
    }

    pub(crate) fn fail_class(&self) -> Option<FailClass> {
        self.failure.as_ref().map(|f| f.class)
    }
}

/// What the step view memoises: tool names with their classes, and error texts. Kept by the
/// caller across steps, as names and errors recur.
#[derive(Default)]
pub(crate) struct ViewMemos {
    tools: NameMemo,
    errors: ErrorMemo,
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::contract::{JsonText, RunKey};

    /// A tool step of run `p`/`r` (also the near-duplicate tests' builder).
    pub(in crate::engine::detectors) fn step(
        tool: &str,
        input: &str,
        output: &str,
        success: Option<bool>,
    ) -> Step {
        Step {
            key: RunKey {
                project_id: "p".into(),
                run_id: "r".into(),
            },
            ts_ms: 0,
            step_index: 1,
            step_type: "tool_call".into(),
            content: None,
            tool_name: Some(tool.into()),
            tool_input: JsonText::parse(input).ok(),
            tool_output: JsonText::parse(output).ok(),
            tool_success: success,
            tool_latency_ms: None,
            tokens: None,
            cost_usd: None,
            tokens_in_context: None,
            agent: None,
            caller: None,
            metadata: None,
            signal_event_id: None,
        }
    }

    fn view_of(
        tool: &str,
        input: &str,
        output: &str,
        success: Option<bool>,
    ) -> (Option<FailClass>, OutKind, ToolClass) {
        let cfg = DetectorConfig::default();
        let s = step(tool, input, output, success);
        let c = cfg.canonical(&s);
        let v = StepView::new(&cfg, &s, &c, &mut ViewMemos::default());
        (v.fail_class(), v.out_kind, v.class)
    }

    #[test]
    fn failures_are_classified_by_words_not_substrings() {
        assert_eq!(
            view_of(
                "read_file",
                r#"{"path":"lib/auth.py"}"#,
                r#""def login(): ...""#,
                None
            )
            .0,
            None
        );
        assert_eq!(
            view_of("run", "{}", r#"{"failed":0,"passed":12}"#, None).0,
            None
        );
        assert_eq!(
            view_of("fetch", "{}", r#"{"error":"401 Unauthorized"}"#, None).0,
            Some(FailClass::Permanent)
        );
        assert_eq!(
            view_of(
                "fetch",
                "{}",
                r#"{"error":"503 Service Unavailable"}"#,
                Some(false)
            )
            .0,
            Some(FailClass::Retryable)
        );
        assert_eq!(
            view_of(
                "edit",
                "{}",
                r#""Error: old text not found in src/a.rs""#,
                Some(false)
            )
            .0,
            Some(FailClass::Recoverable)
        );
        // A file called auth.py that is missing is a not-found, not an auth failure; both permanent.
        assert_eq!(
            view_of("read", "{}", r#""cannot open auth.py""#, Some(false)).0,
            Some(FailClass::Other)
        );
    }

    #[test]
    fn polls_are_recognised_from_outputs_and_shell_segments() {
        // Any tool name: the output says "not finished yet".
        assert_eq!(
            view_of(
                "ci_api",
                r#"{"path":"/runs/1"}"#,
                r#"{"status":"in_progress","conclusion":null}"#,
                Some(true)
            )
            .2,
            ToolClass::Poll
        );
        assert_eq!(
            view_of(
                "bash",
                r#"{"command":"docker compose ps"}"#,
                r#""api Up 2 minutes (health: starting)""#,
                Some(true)
            )
            .2,
            ToolClass::Poll
        );
        // A finished state, or the word alone in prose, is not a poll.
        assert_eq!(
            view_of("ci_api", "{}", r#"{"status":"failed"}"#, Some(true)).2,
            ToolClass::Normal
        );
        assert_eq!(
            view_of("bash", "{}", r#""running 3 tests""#, Some(true)).2,
            ToolClass::Normal
        );
        // Long commands: each segment's program counts; what follows a pipe does not.
        assert_eq!(
            view_of(
                "bash",
                r#"{"command":"sleep 30 && curl -s https://ci.internal/api/v2/pipelines/1234567890"}"#,
                "{}",
                None
            )
            .2,
            ToolClass::Poll
        );
        assert_eq!(
            view_of(
                "bash",
                r#"{"command":"ls migrations/ | tail -3"}"#,
                "{}",
                None
            )
            .2,
            ToolClass::Normal
        );
        assert_eq!(
            view_of(
                "bash",
                r#"{"command":"tail -n 20 /tmp/build.log"}"#,
                "{}",
                None
            )
            .2,
            ToolClass::Poll
        );
    }

    #[test]
    fn outputs_and_classes() {
        assert_eq!(
            view_of("search", "{}", r#"{"results":[],"query":"x"}"#, Some(true)).1,
            OutKind::Empty
        );
        assert_eq!(
            view_of("write", "{}", r#"{"ok":true}"#, Some(true)).1,
            OutKind::Ack
        );
        assert_eq!(
            view_of("get_job_status", "{}", "{}", None).2,
            ToolClass::Poll
        );
        assert_eq!(
            view_of("browser", r#"{"action":"scroll_down"}"#, "{}", None).2,
            ToolClass::Scroll
        );
        assert_eq!(
            view_of(
                "bash",
                r#"{"command":"pytest tests/test_status.py"}"#,
                "{}",
                None
            )
            .2,
            ToolClass::Normal
        );
        assert_eq!(
            view_of("bash", r#"{"command":"sleep 30"}"#, "{}", None).2,
            ToolClass::Poll
        );
        assert_eq!(
            view_of("gdb", r#"{"cmd":"next"}"#, "{}", None).2,
            ToolClass::Step
        );
    }
}
