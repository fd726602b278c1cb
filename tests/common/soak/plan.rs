//! What a soak runs, from `EDDY_SOAK_*`: the schedule (short or long, which faults, the seed),
//! the fleet's size, the stall thresholds, where its logs and stack go.
use super::faults::{self, Fault};
use super::stack::Ports;
use eddy::config::Delivery;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::path::PathBuf;
use std::time::Duration;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What to run, from `EDDY_SOAK_*` (see tests/soak.rs).
pub struct Plan {
    pub long: bool,
    pub seed: u64,
    pub minutes: u64,
    pub runs: usize,
    pub stuck_after: Duration,
    pub give_up: Duration,
    pub kafka_debug: String,
    pub modes: Vec<Delivery>,
    /// The faults a schedule draws from (`EDDY_SOAK_FAULTS`, by id; default all).
    pub faults: Vec<Fault>,
    pub dir: PathBuf,
    pub stack_dir: PathBuf,
}

impl Plan {
    pub fn from_env() -> Self {
        let long = std::env::var("EDDY_SOAK_SCHEDULE").is_ok_and(|v| v == "long");
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let modes = std::env::var("EDDY_SOAK_MODES")
            .unwrap_or_else(|_| "at_least_once,exactly_once".into())
            .split(',')
            .map(|m| match m.trim() {
                "at_least_once" => Delivery::AtLeastOnce,
                "exactly_once" => Delivery::ExactlyOnce,
                other => panic!("EDDY_SOAK_MODES: unknown delivery mode {other}"),
            })
            .collect();
        let ports = Ports::from_env();
        let faults = match std::env::var("EDDY_SOAK_FAULTS") {
            Ok(v) if !v.trim().is_empty() => v
                .split(',')
                .map(|id| {
                    faults::ALL
                        .into_iter()
                        .find(|f| f.id() == id.trim())
                        .unwrap_or_else(|| panic!("EDDY_SOAK_FAULTS: no fault `{id}`"))
                })
                .collect(),
            _ => faults::ALL.to_vec(),
        };
        Self {
            long,
            // The long schedule's order is random: a new seed each run unless given, printed.
            seed: env_or("EDDY_SOAK_SEED", if long { stamp } else { 43 }),
            minutes: env_or("EDDY_SOAK_MINUTES", 20),
            runs: env_or("EDDY_SOAK_RUNS", if long { 6000 } else { 600 }),
            stuck_after: Duration::from_secs(env_or(
                "EDDY_SOAK_STUCK_S",
                if long { 120 } else { 90 },
            )),
            // Long: past librdkafka's max.poll.interval.ms (300 s), which ends some stalls by
            // itself. Short: a stall fails the test anyway; the rest of the schedule still runs.
            give_up: Duration::from_secs(env_or(
                "EDDY_SOAK_GIVE_UP_S",
                if long { 360 } else { 90 },
            )),
            kafka_debug: std::env::var("EDDY_SOAK_KAFKA_DEBUG")
                .unwrap_or_else(|_| "cgrp,eos,broker".into()),
            modes,
            faults,
            dir: std::env::var("EDDY_SOAK_DIR").map_or_else(
                |_| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("soak-{stamp}")),
                PathBuf::from,
            ),
            stack_dir: std::env::var("EDDY_SOAK_STACK_DIR").map_or_else(
                |_| std::env::temp_dir().join(format!("eddy-soak-stack-{}", ports.base)),
                PathBuf::from,
            ),
        }
    }

    /// The short schedule: every fault once, in a fixed order. The long one: rounds of every
    /// fault in a seeded random order, until `minutes` have passed. Both only of the faults
    /// `EDDY_SOAK_FAULTS` names, when it does.
    pub(super) fn schedule(&self) -> Vec<Fault> {
        if !self.long {
            return self.faults.clone();
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(self.seed);
        let mut out = Vec::new();
        while out.len() < 300 {
            let mut round = self.faults.clone();
            round.shuffle(&mut rng);
            out.extend(round);
        }
        out
    }

    /// Fleet chunks: one before the faults and one per step (the long schedule's step count
    /// is a guess from its length; chunks left over go out at the end).
    pub(super) fn chunks(&self) -> usize {
        if self.long {
            (self.minutes * 60 / 40) as usize + 1
        } else {
            self.faults.len() + 1
        }
    }
}
