//! Which runs a fleet has: the seeded draw of each run's scenario, project, agent and start,
//! and the ground truth kept alongside. How each run's events look is left to [`RunGen`].
use super::args::SimulateArgs;
use super::kind::Kind;
use super::steps::RunGen;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const AGENTS: &[&str] = &[
    "researcher",
    "coder",
    "support-bot",
    "planner",
    "sql-analyst",
];

/// What the simulator knows about one run it generated.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunTruth {
    pub(crate) project_id: String,
    pub(crate) run_id: String,
    pub(crate) kind: Kind,
    /// step_index of the first looping step.
    pub(crate) loop_from: Option<u64>,
    /// step_index at which a reviewer would first call the run a loop: the third repeat of a
    /// call or thought (the second of a permanent error), the end of the second round of a
    /// cycle or a hand-off.
    pub(crate) evident_at: Option<u64>,
    pub(crate) finished: bool,
}

/// A generated fleet: events as (ts, run_id, JSON line) sorted by event time, and each run's truth.
#[derive(Debug, Default)]
pub struct Fleet {
    pub(crate) events: Vec<(i64, String, String)>,
    pub(crate) runs: Vec<RunTruth>,
}

/// Generate the whole fleet as (ts, run_id, json line), sorted by event time.
pub fn generate(args: &SimulateArgs) -> Vec<(i64, String, String)> {
    generate_fleet(args).events
}
pub(super) fn weights(args: &SimulateArgs, looping: bool) -> Vec<(Kind, f64)> {
    Kind::ALL
        .iter()
        .filter(|k| k.loops() == looping)
        .map(|&k| {
            let w = args
                .mix
                .iter()
                .rev()
                .find(|(x, _)| *x == k)
                .map_or(k.default_weight(), |(_, w)| *w);
            (k, w)
        })
        .filter(|(_, w)| *w > 0.0)
        .collect()
}

/// A rate as a probability: clamped, and 0 when not a number (the command line refuses both).
fn fraction(r: f64) -> f64 {
    if r.is_nan() {
        0.0
    } else {
        r.clamp(0.0, 1.0)
    }
}

fn pick(rng: &mut StdRng, ws: &[(Kind, f64)]) -> Kind {
    let total: f64 = ws.iter().map(|(_, w)| w).sum();
    let mut x = rng.random_range(0.0..total);
    for &(k, w) in ws {
        if x < w {
            return k;
        }
        x -= w;
    }
    ws[ws.len() - 1].0
}

/// The fleet and its ground truth. A class the mix turned off entirely is replaced by the other
/// one (`run` refuses such a mix up front with a clear error).
pub(crate) fn generate_fleet(args: &SimulateArgs) -> Fleet {
    generate_fleet_with(args, || {})
}

/// [`generate_fleet`], calling `on_run` after each run is generated (for progress).
pub(crate) fn generate_fleet_with(args: &SimulateArgs, mut on_run: impl FnMut()) -> Fleet {
    let mut rng = StdRng::seed_from_u64(args.seed);
    let healthy = weights(args, false);
    let looping = weights(args, true);
    let mut fleet = Fleet::default();
    if healthy.is_empty() && looping.is_empty() {
        return fleet;
    }
    for i in 0..args.runs {
        let mut loops = rng.random_bool(fraction(args.loop_rate));
        if looping.is_empty() || healthy.is_empty() {
            loops = !looping.is_empty();
        }
        let kind = pick(&mut rng, if loops { &looping } else { &healthy });
        let finished = !rng.random_bool(fraction(args.unfinished_rate));
        let project = format!("proj-{}", i % args.projects.max(1));
        let run_id = format!("run-{:016x}", rng.random::<u64>());
        let mixed = if kind.multi_agent() {
            "crew"
        } else {
            AGENTS[rng.random_range(0..AGENTS.len())]
        };
        let agent = args.agent.as_deref().unwrap_or(mixed);
        // Spread run starts over the span (ten minutes unless told otherwise).
        let span_ms = (args.span_minutes.max(1) * 60_000) as i64;
        let start = args.start_ms.saturating_add(rng.random_range(0..span_ms));
        let mut g = RunGen {
            rng: &mut rng,
            project: &project,
            run_id: &run_id,
            agent,
            ts: start,
            step: 0,
            context: 0,
            out: &mut fleet.events,
            loop_steps: Vec::new(),
        };
        let loop_from = g.run(kind, finished);
        let nth = match kind {
            // A permanent error (an invalid API key) is pointless to repeat even once.
            Kind::AuthFailureLoop => 2,
            Kind::PingPong | Kind::HandoffCycle => 4,
            _ => 3,
        };
        let evident_at = loop_from.and_then(|_| g.loop_steps.get(nth - 1).copied());
        fleet.runs.push(RunTruth {
            project_id: project,
            run_id,
            kind,
            loop_from,
            evident_at,
            finished,
        });
        on_run();
    }
    fleet.events.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    fleet
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::collections::BTreeMap;

    #[test]
    fn the_seed_decides_the_fleet() {
        let args = |seed| SimulateArgs {
            runs: 50,
            seed,
            ..SimulateArgs::default()
        };
        assert_eq!(generate(&args(3)), generate(&args(3)));
        assert_ne!(generate(&args(3)), generate(&args(4)));
    }

    #[test]
    fn the_mix_decides_which_scenarios_appear() {
        let args = SimulateArgs {
            runs: 300,
            loop_rate: 0.5,
            mix: vec![
                (Kind::ExactLoop, 0.0),
                (Kind::VolatileLoop, 0.0),
                (Kind::ParaphraseLoop, 0.0),
                (Kind::AuthFailureLoop, 0.0),
                (Kind::PingPong, 0.0),
                (Kind::ThinkLoop, 0.0),
                (Kind::Healthy, 0.0),
                (Kind::Polling, 0.0),
                (Kind::RetryRecovers, 0.0),
                (Kind::Pagination, 0.0),
            ],
            ..SimulateArgs::default()
        };
        let fleet = generate_fleet(&args);
        assert_eq!(fleet.runs.len(), 300);
        let kinds: std::collections::BTreeSet<Kind> = fleet.runs.iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds,
            [Kind::Delegation, Kind::HandoffCycle].into_iter().collect()
        );
    }

    #[test]
    fn every_scenario_appears_and_truth_matches_the_events() {
        let fleet = generate_fleet(&SimulateArgs {
            runs: 600,
            ..SimulateArgs::default()
        });
        let kinds: std::collections::BTreeSet<Kind> = fleet.runs.iter().map(|r| r.kind).collect();
        assert_eq!(kinds.len(), Kind::ALL.len());
        // Events are in event-time order and each run's step indexes count up from 1.
        assert!(fleet.events.windows(2).all(|w| w[0].0 <= w[1].0));
        let mut last: BTreeMap<&str, u64> = BTreeMap::new();
        for (_, run, line) in &fleet.events {
            let v: Value = serde_json::from_str(line).expect("simulator lines are JSON");
            if let Some(i) = v["step_index"].as_u64() {
                let prev = last.insert(run, i).unwrap_or(0);
                assert_eq!(i, prev + 1, "{line}");
            }
        }
        for r in &fleet.runs {
            let steps = last.get(r.run_id.as_str()).copied().unwrap_or(0);
            match r.loop_from {
                Some(from) => assert!(r.kind.loops() && from >= 2 && from <= steps, "{r:?}"),
                None => assert!(!r.kind.loops(), "{r:?}"),
            }
        }
    }
}
