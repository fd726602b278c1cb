//! All detector state of one run and the step that drives every detector over it, and the
//! per-partition caches lent to each step. The record form the changelog holds is
//! `changelog::state`'s.
use super::compact::Lazy;
use super::detector_config::DetectorConfig;
use super::progress::Progress;
use super::{budget, content, context, cycle, failure, handoff, history, keelwave, neardup};
use super::{policy, repeat, stall, view, Finding, StepView};
use crate::contract::Step;
use crate::engine::fingerprint::Canonical;

/// All detector state of one run. The windows of recent tool calls that several detectors
/// keep are one shared [`history::History`]; records still hold each detector's own window
/// (written from the history, read into it), so they are what they were. The history is
/// crate-visible for `changelog::state`, which does that.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunDetectors {
    pub keelwave: keelwave::KeelwaveState,
    pub progress: Progress,
    pub repeat: repeat::RepeatState,
    pub stall: stall::StallState,
    /// Only runs with failures use it.
    pub failure: Lazy<failure::FailureState>,
    pub cycle: cycle::CycleState,
    pub handoff: handoff::HandoffState,
    pub neardup: neardup::NearDupState,
    /// Only runs with messages or thoughts use it.
    pub content: Lazy<content::ContentState>,
    /// Only runs reporting `tokens_in_context` use it (its window of outputs is the history's).
    pub context: Lazy<context::ContextState>,
    pub budget: budget::BudgetState,
    /// Only runs with corroborating findings use it.
    pub policy: Lazy<policy::PolicyState>,
    pub(crate) history: history::History,
}

/// The memos and scratch buffers of one partition's detectors, owned by its engine and lent to
/// each step (see [`crate::engine::memo`]): nothing is kept per thread, and outputs never
/// depend on what these hold.
#[derive(Default)]
pub(crate) struct Caches {
    view: view::ViewMemos,
    agents: crate::engine::text::NameKeys,
    /// Feature hashes of the text at hand (thoughts, handoff payloads).
    features: Vec<u64>,
    neardup: neardup::Scratch,
}

impl RunDetectors {
    /// One step through the detectors as the engine runs it, for tests (fresh caches: outputs
    /// never depend on them).
    #[cfg(test)]
    pub(crate) fn step_through(&mut self, cfg: &DetectorConfig, s: &Step) -> Vec<Finding> {
        let canon = cfg.canonical(s);
        let mut out = Vec::new();
        let caches = &mut Caches::default();
        self.on_step(cfg, s, &canon, budget::Counts::default(), caches, &mut out);
        out
    }

    /// A guard steered the run (a `steer` step): every loop reported at `alert` or `stop` is
    /// forgotten by its detector, so a loop that goes on after the agent was told about it is
    /// reported again at the next repetition, at the level its evidence is at (for conclusive
    /// evidence, `stop` at once), instead of staying silent behind a latch that already fired.
    /// Warnings stay latched: the agent was not steered on them. Budgets are not loops and
    /// stay reported once.
    pub(crate) fn on_steered(&mut self) {
        let from = crate::contract::Severity::Alert;
        self.repeat.latch.rearm_from(from);
        self.stall.latch.rearm_from(from);
        self.cycle.latch.rearm_from(from);
        if self.handoff.cycles.get().is_some() {
            self.handoff.cycles.with(|c| c.latch.rearm_from(from));
        }
        self.neardup.latch.rearm_from(from);
        if self.failure.get().is_some() {
            self.failure.with(|f| f.latch.rearm_from(from));
        }
        if self.content.get().is_some() {
            self.content.with(|c| c.latch.rearm_from(from));
        }
        if self.context.get().is_some() {
            self.context.with(|c| c.latch.rearm_from(from));
        }
    }

    /// Run every detector on one new step. `canon` comes from [`Canonical::compute`].
    pub(crate) fn on_step(
        &mut self,
        cfg: &DetectorConfig,
        step: &Step,
        canon: &Canonical<'_>,
        run: budget::Counts,
        caches: &mut Caches,
        out: &mut Vec<Finding>,
    ) {
        let start = out.len();
        let v = StepView::new(cfg, step, canon, &mut caches.view);
        // Progress counters first: detectors compare against the state *including* this step.
        let before = self.progress.counters();
        self.progress.observe(&v);
        if v.counted_tool() {
            self.history.push(history::Call::new(
                step.step_index,
                v.action_key,
                v.primary_key,
                v.output_key,
                self.progress.novel_actions,
                v.class.tolerates_same_output(),
            ));
        }
        self.keelwave.on_step(&cfg.keelwave, step, &canon.fps, out);
        self.budget.on_step(&cfg.budget, &v, run, out);
        // A run with no failure streaks stays without one on a success: nothing to run.
        if self.failure.get().is_some() || v.failure.is_some() {
            let recovered = self
                .failure
                .with(|f| f.on_step(&cfg.failure, &v, &before, out));
            if recovered && self.policy.get().is_some() {
                // Errors that recover are not evidence any more (goose resets its error streak
                // on a success): they must not turn another detector's warning into an alert.
                self.policy.with(|p| p.forget("repeated_failure"));
            }
        }
        let h = &mut self.history;
        let streak = &mut self.progress.streak;
        self.repeat
            .on_step(&cfg.repeat, &v, &before, streak, h, out);
        self.stall.on_step(&cfg.stall, &v, h, out);
        self.cycle.on_step(&cfg.cycle, &v, h, out);
        let features = &mut caches.features;
        self.neardup.on_step(
            &cfg.neardup,
            &v,
            &mut self.history,
            &mut caches.neardup,
            out,
        );
        self.handoff
            .on_step(&cfg.handoff, &v, &mut caches.agents, features, out);
        let now = &self.progress;
        self.content
            .with(|c| c.on_step(&cfg.content, &v, &before, now, features, out));
        let h = &mut self.history;
        let messages = self.content.get().map_or(0, |c| c.novel_messages());
        let tools = self.progress.novel_outputs + self.progress.novel_actions;
        let tools_before = before.novel_outputs + before.novel_actions;
        self.context
            .with(|c| c.on_step(&cfg.context, &v, h, (tools_before, tools, messages), out));
        self.history.settle();
        let seq = self.progress.seq;
        // Nothing recent and nothing found: the policy has nothing to do or remember.
        if self.policy.get().is_some() || out.len() > start {
            self.policy
                .with(|p| p.apply(&cfg.policy, seq, &mut out[start..]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Steps from a few tools, inputs and outputs, failing now and then, run through the
    /// detectors under short, long and empty windows: the shortcuts (the repeated-operation
    /// count from its first scan, the near-duplicate precheck, the stall buffer) assert in
    /// debug builds that they agree with the full scans; the findings are checked here.
    #[test]
    fn shortcuts_agree_with_full_scans_under_any_window() {
        let tools = ["read", "search", "poll_status", "edit"];
        let inputs = [
            r#"{"path":"a.rs"}"#,
            r#"{"q":"rust async runtime"}"#,
            r#"{"q":"async runtime for rust"}"#,
            "{}",
        ];
        let outputs = [r#"{"ok":true}"#, "[]", r#""data one two""#, r#"{"n":1}"#];
        let mut found = 0usize;
        for (rw, sw, nw) in [
            (0, 2, 1),
            (1, 3, 2),
            (3, 8, 10),
            (20, 40, 3),
            (70_000, 33, 0),
        ] {
            let mut cfg = DetectorConfig::default();
            cfg.repeat.window = rw;
            cfg.repeat.window_repeatable = rw / 2;
            cfg.stall.window = sw;
            cfg.neardup.window = nw;
            let mut d = RunDetectors::default();
            let mut seed = 0x9e37_79b9_7f4a_7c15u64;
            let mut next = |n: usize| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed % n as u64) as usize
            };
            for i in 0..400u64 {
                let success = match next(6) {
                    0 => Some(false),
                    _ => Some(true),
                };
                let mut s = view::tests::step(
                    tools[next(tools.len())],
                    inputs[next(inputs.len())],
                    outputs[next(2) * next(outputs.len())],
                    success,
                );
                s.step_index = i;
                let out = d.step_through(&cfg, &s);
                for f in &out {
                    assert!(f.step_indices.iter().all(|x| *x <= i), "{f:?}");
                    if f.detector == "repeated_operation" {
                        assert!(f.hits as usize <= rw.max(rw / 2).min(history::MAX_WINDOW));
                    }
                }
                found += out.len();
            }
        }
        assert!(found > 0);
    }

    /// A stall window longer than the stack buffer holds still finds the stall.
    #[test]
    fn long_stall_windows_are_judged_whole() {
        for window in [8, 32, 33, 100] {
            let mut cfg = DetectorConfig::default();
            cfg.stall.window = window;
            let mut d = RunDetectors::default();
            let mut first = None;
            for i in 0..(window as u64 + 5) {
                let input = format!(r#"{{"path":"f{}.rs"}}"#, i % 3);
                let mut s = view::tests::step("read", &input, r#"{"n":1}"#, Some(true));
                s.step_index = i;
                let out = d.step_through(&cfg, &s);
                if first.is_none() && out.iter().any(|f| f.detector == "no_progress") {
                    first = Some(i);
                }
            }
            assert_eq!(first, Some(window as u64 - 1), "window {window}");
        }
    }
}
