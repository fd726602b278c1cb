//! Per-run, per-minute rollup contributions.
//!
//! Each open run accumulates only its *current* minute. The minute is closed (handed to the
//! sink as one row) when the run's events move to a later minute and when the run ends, so a
//! (project, minute, run) row is written once per replay, carrying the offset of the event that
//! closed it as its version: a redelivered or replayed stretch produces the identical row, and
//! `ReplacingMergeTree` collapses it. Summing those rows by (minute, project, agent) is the
//! rollup, exact under redelivery, at any bucket that is a multiple of a minute.
//!
//! Events of a run whose time goes backwards (skewed agent hosts) are counted in the run's
//! current minute: a closed minute is never reopened, which is what keeps rows write-once.
use crate::contract::input::TerminationReason;
use crate::contract::{RunKey, Step};

pub(crate) const BUCKET_MS: i64 = 60_000;

pub(crate) fn bucket_of(ts_ms: i64) -> i64 {
    ts_ms.div_euclid(BUCKET_MS) * BUCKET_MS
}

/// One run's contribution to one minute. Recorded with the run state (see
/// `changelog::state::rollup`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Minute {
    /// Start of the minute, epoch milliseconds (UTC).
    pub(crate) bucket_ms: i64,
    /// The run's first event fell in this minute.
    pub(crate) started: bool,
    pub(crate) steps: u32,
    pub(crate) tool_calls: u32,
    /// Steps reporting `tool_success: false`.
    pub(crate) errors: u32,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
    /// Steps taken once the run's loop was caught (the caught step included), and their cost:
    /// what a loop burns while nobody stops it.
    pub(crate) loop_steps: u32,
    pub(crate) loop_cost_usd: f64,
    /// The loop was caught in this minute, this many steps after it began (the run's steps
    /// counted in step order, not a difference of step indices); [`UNCOUNTED`] when they
    /// could not be counted.
    pub(crate) caught_after_steps: Option<u64>,
}

/// `caught_after_steps` of a loop caught when its steps could not be counted (see
/// `RunState::steps_between`).
pub(crate) const UNCOUNTED: u64 = u64::MAX;

impl Minute {
    fn new(bucket_ms: i64) -> Self {
        Self {
            bucket_ms,
            ..Self::default()
        }
    }
}

/// How the run ended, on the row of the minute it ended in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ending {
    pub(crate) reason: TerminationReason,
    pub(crate) loop_detected: bool,
}

/// A closed minute, ready to become a row.
#[derive(Debug, Clone, PartialEq)]
pub struct Closed {
    pub(crate) key: RunKey,
    pub(crate) agent_name: Option<String>,
    pub(crate) minute: Minute,
    pub(crate) ending: Option<Ending>,
}

/// A run's open minute, as its state keeps it (`RunState::minute`): `None` until the engine
/// keeps rollups for it. The functions below take what they need of the run as arguments, so
/// the run state depends on this module and not the other way round.
pub(crate) type OpenMinute = Option<Box<Minute>>;

/// What a run's state says about it when one of its minutes closes.
#[derive(Clone, Copy)]
pub(crate) struct RunFacts<'a> {
    pub(crate) agent_name: Option<&'a str>,
    pub(crate) loop_detected: bool,
    /// The run's steps so far.
    pub(crate) steps: u64,
}

/// A closing minute as its row reports it. A count of steps to catch is below the run's steps;
/// one that is not was written by an eddy that took the difference of step indices (a minute
/// restored from its changelog record) and is not a count.
fn closing(mut m: Minute, run: RunFacts<'_>) -> Minute {
    if let Some(c) = m.caught_after_steps.as_mut() {
        if *c >= run.steps {
            *c = UNCOUNTED;
        }
    }
    m
}

/// A new run's first minute.
pub(crate) fn start(minute: &mut OpenMinute, ts_ms: i64) {
    *minute = Some(Box::new(Minute {
        started: true,
        ..Minute::new(bucket_of(ts_ms))
    }));
}

/// The run's minute as of an event at `ts_ms`: a later minute closes the current one. (A run
/// restored from a record written before rollups existed starts counting here.)
pub(crate) fn advance(
    key: &RunKey,
    minute: &mut OpenMinute,
    run: RunFacts<'_>,
    ts_ms: i64,
    out: &mut Vec<Closed>,
) {
    let b = bucket_of(ts_ms);
    match minute {
        None => *minute = Some(Box::new(Minute::new(b))),
        Some(m) if b > m.bucket_ms => {
            let done = std::mem::replace(&mut **m, Minute::new(b));
            out.push(Closed {
                key: key.clone(),
                agent_name: run.agent_name.map(str::to_owned),
                minute: closing(done, run),
                ending: None,
            });
        }
        Some(_) => {}
    }
}

/// Count a step the detectors have just seen. `loop_detected` is the run's flag after them,
/// `was_caught` before them, and `steps_since_loop` how many steps the run took since its
/// loop began, up to this one (`None`: not countable).
pub(crate) fn count_step(
    minute: &mut OpenMinute,
    step: &Step,
    loop_detected: bool,
    steps_since_loop: Option<u64>,
    was_caught: bool,
) {
    let Some(m) = minute.as_mut() else {
        return;
    };
    let cost = step.cost_usd.unwrap_or(0.0);
    m.steps = m.steps.saturating_add(1);
    if step.tool_name.is_some() {
        m.tool_calls = m.tool_calls.saturating_add(1);
    }
    if step.tool_success == Some(false) {
        m.errors = m.errors.saturating_add(1);
    }
    m.tokens = m.tokens.saturating_add(step.tokens.unwrap_or(0));
    m.cost_usd += cost;
    if loop_detected {
        m.loop_steps = m.loop_steps.saturating_add(1);
        m.loop_cost_usd += cost;
        if !was_caught {
            m.caught_after_steps = Some(steps_since_loop.unwrap_or(UNCOUNTED));
        }
    }
}

/// The run ended at `end_ms`: close its minute (moving to the end's minute first if later).
pub(crate) fn end(
    key: &RunKey,
    minute: &mut OpenMinute,
    run: RunFacts<'_>,
    end_ms: i64,
    reason: TerminationReason,
    out: &mut Vec<Closed>,
) {
    advance(key, minute, run, end_ms, out);
    if let Some(m) = minute.take() {
        out.push(Closed {
            key: key.clone(),
            agent_name: run.agent_name.map(str::to_owned),
            minute: closing(*m, run),
            ending: Some(Ending {
                reason,
                loop_detected: run.loop_detected,
            }),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::decode;
    use crate::engine::{EngineConfig, PartitionEngine};
    use std::sync::Arc;

    const T0: i64 = 1_767_225_600_000;

    fn step(i: u64, ts: i64, cost: f64, ok: bool) -> String {
        format!(
            r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":{ts},"step_index":{i},"step_type":"tool_call","tool_name":"t{i}","tool_input":{{"i":{i}}},"tool_success":{ok},"cost_usd":{cost},"tokens":10}}"#
        )
    }

    fn feed(lines: &[String]) -> Vec<Closed> {
        let mut e = PartitionEngine::new(Arc::new(EngineConfig::default())).with_rollups();
        let mut out = Vec::new();
        let mut closed = Vec::new();
        for l in lines {
            let ev = decode(l.as_bytes()).expect("test event decodes");
            e.apply(&ev, &mut out);
            closed.extend(e.take_rollups());
        }
        closed
    }

    #[test]
    fn minutes_close_once_in_order_and_redeliveries_do_not_count() {
        let mut lines = vec![
            step(0, T0 + 1_000, 0.5, true),
            step(1, T0 + 30_000, 0.25, false),
            // Minute 2 closes minute 1.
            step(2, T0 + 61_000, 1.0, true),
            // A redelivery of step 1, arriving in minute 2: ignored.
            step(1, T0 + 30_000, 0.25, false),
            // Time goes backwards on another host: counted in the current minute.
            step(3, T0 + 59_000, 2.0, true),
        ];
        lines.push(format!(
            r#"{{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":{},"status":"completed"}}"#,
            T0 + 185_000
        ));
        let closed = feed(&lines);
        let buckets: Vec<i64> = closed.iter().map(|c| c.minute.bucket_ms).collect();
        // Minute 0 closed by step 2; minute 1 closed when the run ended in minute 3.
        assert_eq!(buckets, vec![T0, T0 + 60_000, T0 + 180_000]);
        let m0 = &closed[0].minute;
        assert!(m0.started);
        assert_eq!((m0.steps, m0.errors, m0.tokens), (2, 1, 20));
        assert!((m0.cost_usd - 0.75).abs() < 1e-12);
        let m1 = &closed[1].minute;
        assert!(!m1.started && closed[1].ending.is_none());
        assert_eq!((m1.steps, m1.errors), (2, 0));
        assert!((m1.cost_usd - 3.0).abs() < 1e-12);
        let last = &closed[2];
        assert_eq!(last.minute.steps, 0);
        let ending = last
            .ending
            .as_ref()
            .expect("the run ended in its last minute");
        assert_eq!(ending.reason, TerminationReason::Clean);
        assert!(!ending.loop_detected);
    }

    /// A run that looks two things up, then repeats one search until it is stopped, with the
    /// `index` of its `n`th step (0-based), ended after `steps` steps.
    fn looping_run(index: impl Fn(u64) -> u64, steps: u64) -> Vec<String> {
        let mut lines: Vec<String> = (0..steps)
            .map(|n| {
                let input = if n < 2 {
                    format!(r#"{{"q":"topic {n}"}}"#)
                } else {
                    r#"{"q":"same"}"#.to_string()
                };
                format!(
                    r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":{},"step_index":{},"step_type":"tool_call","tool_name":"search","tool_input":{input},"tool_success":true,"tool_output":"nothing new"}}"#,
                    T0 + n as i64 * 1_000,
                    index(n)
                )
            })
            .collect();
        lines.push(format!(
            r#"{{"v":1,"kind":"run_finished","project_id":"p","run_id":"r","ts":{},"status":"completed"}}"#,
            T0 + 120_000
        ));
        lines
    }

    /// What a looping run reports: the steps to catch of its closed minutes, its loop's step
    /// numbers (began, caught), and the index the loop began at.
    type Caught = (Vec<Option<u64>>, (Option<u64>, Option<u64>), Option<u64>);

    fn caught(lines: &[String]) -> Caught {
        let mut e = PartitionEngine::new(Arc::new(EngineConfig::default())).with_rollups();
        let mut out = Vec::new();
        let mut closed = Vec::new();
        for l in lines {
            e.apply(&decode(l.as_bytes()).expect("test event decodes"), &mut out);
            closed.extend(e.take_rollups());
        }
        let end = out
            .iter()
            .find_map(|o| match o {
                crate::contract::OutputEvent::RunTerminated(t) => Some(t.clone()),
                _ => None,
            })
            .expect("the run ended");
        assert!(end.loop_detected, "the repeated search is caught: {out:?}");
        let counts = closed.iter().map(|c| c.minute.caught_after_steps).collect();
        (
            counts,
            (end.loop_step_number, end.loop_caught_step_number),
            end.loop_step_index,
        )
    }

    #[test]
    fn steps_to_catch_count_steps_whatever_the_indices_are() {
        // Dense indices 0, 1, 2, ...: numbers are indices + 1 and counts their differences.
        let (dense, dense_numbers, began) = caught(&looping_run(|n| n, 12));
        let began = began.expect("where the loop began");
        assert_eq!(dense_numbers.0, Some(began + 1));
        let dense_caught = dense_numbers.1.expect("caught step number");
        let caught_rows: Vec<u64> = dense.iter().flatten().copied().collect();
        assert_eq!(caught_rows, vec![dense_caught - (began + 1)]);
        // The same run with OTLP's indices (start times in µs × 1000, plus a fold of the span
        // id): the same counts and numbers, not differences of indices.
        let otlp = |n: u64| 1_767_225_600_000_000_000 + n * 1_500_000_000 + (n * 7919) % 1000;
        let (sparse, sparse_numbers, sparse_began) = caught(&looping_run(otlp, 12));
        assert_eq!(sparse, dense);
        assert_eq!(sparse_numbers, dense_numbers);
        assert!(
            sparse_began.unwrap() > 1 << 60,
            "the ordering key stays the index"
        );
    }

    #[test]
    fn a_count_that_cannot_be_one_is_marked_uncounted_when_the_minute_closes() {
        let run = RunFacts {
            agent_name: None,
            loop_detected: true,
            steps: 10,
        };
        let with = |c| Minute {
            caught_after_steps: Some(c),
            ..Minute::new(0)
        };
        assert_eq!(closing(with(9), run).caught_after_steps, Some(9));
        // A difference of OTLP step indices, from a minute an older eddy recorded.
        assert_eq!(
            closing(with(1_500_000_000), run).caught_after_steps,
            Some(UNCOUNTED)
        );
        assert_eq!(closing(Minute::new(0), run).caught_after_steps, None);
    }

    #[test]
    fn engines_without_rollups_close_nothing() {
        let mut e = PartitionEngine::new(Arc::new(EngineConfig::default()));
        let mut out = Vec::new();
        for l in [step(0, T0, 0.1, true), step(1, T0 + 120_000, 0.1, true)] {
            let ev = decode(l.as_bytes()).expect("test event decodes");
            e.apply(&ev, &mut out);
        }
        assert_eq!(e.take_rollups().count(), 0);
        assert!(e.runs().all(|(_, s)| s.minute.is_none()));
    }
}
