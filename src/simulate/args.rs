//! The command line of `eddy simulate`, and the same knobs for code (`SimulateArgs::default()`),
//! with the parsers that refuse a bad rate or mix before anything is generated.
use super::kind::Kind;
use std::path::PathBuf;

/// What `eddy simulate` generates: how many runs, of which kinds, over what time.
#[derive(clap::Args, Debug, Clone)]
pub struct SimulateArgs {
    /// Number of runs.
    #[arg(long, default_value_t = 200)]
    pub runs: usize,
    /// Fraction of runs that loop (0 to 1).
    #[arg(long, default_value_t = 0.3, value_parser = parse_rate)]
    pub loop_rate: f64,
    /// Random seed: the same seed gives the same fleet.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Number of projects.
    #[arg(long, default_value_t = 3)]
    pub projects: usize,
    /// Event time of the first event (epoch ms); default 2026-01-01T00:00:00Z.
    #[arg(long, default_value_t = 1_767_225_600_000)]
    pub start_ms: i64,
    /// Runs start at random times within this many minutes after `--start-ms` (1440 spreads a
    /// fleet over a day, which is what the loop explorer's 24 h chart shows).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=525_600))]
    pub span_minutes: u64,
    /// Write JSONL here ("-" = stdout). Without it, events go to the Kafka input topic.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Leave this fraction of runs unfinished (no run_finished), to exercise idle timeouts.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub unfinished_rate: f64,
    /// Relative weights of scenarios, as kind=weight (comma-separated or repeated); kinds not
    /// named keep their default weight, 0 turns one off. The loop rate first decides healthy
    /// or looping, then the weights pick within that class. Kinds: healthy, polling,
    /// retry_recovers, pagination, delegation, exact_loop, volatile_loop, paraphrase_loop,
    /// auth_failure_loop, ping_pong, handoff_cycle, think_loop.
    #[arg(long, value_delimiter = ',', value_parser = parse_mix)]
    pub mix: Vec<(Kind, f64)>,
    /// Also write the ground truth here, one object per run, in `eddy eval`'s labels format.
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// Every run's `agent_name` (e.g. `coder@2` for version 2 of agent coder, as
    /// `eddy fleet-watch` reads it); default: a mix of agents.
    #[arg(long)]
    pub agent: Option<String>,
}

impl Default for SimulateArgs {
    fn default() -> Self {
        SimulateArgs {
            runs: 200,
            loop_rate: 0.3,
            seed: 7,
            projects: 3,
            start_ms: 1_767_225_600_000,
            span_minutes: 10,
            out: None,
            unfinished_rate: 0.0,
            mix: Vec::new(),
            labels: None,
            agent: None,
        }
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("expected a fraction from 0 to 1, got {s:?}")),
    }
}

const MAX_WEIGHT: f64 = 1e6;

fn parse_mix(s: &str) -> Result<(Kind, f64), String> {
    let (k, w) = s
        .split_once('=')
        .ok_or_else(|| format!("expected kind=weight, got {s:?}"))?;
    let kind = Kind::ALL
        .iter()
        .copied()
        .find(|x| x.name() == k.trim())
        .ok_or_else(|| {
            let names: Vec<&str> = Kind::ALL.iter().map(|x| x.name()).collect();
            format!("unknown kind {k:?}; kinds: {}", names.join(", "))
        })?;
    let w: f64 = w
        .trim()
        .parse()
        .map_err(|_| format!("weight of {k} must be a number, got {w:?}"))?;
    // Capped so that any sum of weights stays finite.
    if !(0.0..=MAX_WEIGHT).contains(&w) {
        return Err(format!(
            "weight of {k} must be from 0 to {MAX_WEIGHT}, got {w}"
        ));
    }
    Ok((kind, w))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults are written twice (for the command line and for code): they must agree.
    #[test]
    fn code_defaults_are_the_command_lines() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: SimulateArgs,
        }
        let parsed = Cli::parse_from(["simulate"]).args;
        assert_eq!(
            format!("{parsed:?}"),
            format!("{:?}", SimulateArgs::default())
        );
    }

    #[test]
    fn rates_are_fractions() {
        assert_eq!(parse_rate("0.25"), Ok(0.25));
        for bad in ["2", "-0.1", "NaN", "x"] {
            assert!(parse_rate(bad).unwrap_err().contains("0 to 1"), "{bad}");
        }
    }

    #[test]
    fn mix_parses_and_rejects_with_a_reason() {
        assert_eq!(parse_mix("ping_pong=2.5"), Ok((Kind::PingPong, 2.5)));
        assert!(parse_mix("pingpong=1").unwrap_err().contains("kinds:"));
        assert!(parse_mix("ping_pong").unwrap_err().contains("kind=weight"));
        assert!(parse_mix("ping_pong=-1").unwrap_err().contains("from 0"));
        assert!(parse_mix("ping_pong=1e308").unwrap_err().contains("from 0"));
    }
}
