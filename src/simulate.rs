//! `eddy simulate`: a seeded fleet of agent runs, healthy and looping, as v1 events.
//!
//! Runs are interleaved by event time like a real fleet. Looping runs carry their ground truth in
//! `metadata` of `run_started` (`{"sim_kind": ..., "sim_loop_from": N}`) so demos and tests can
//! score what was caught without a side file.
use crate::config::Config;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Emit(#[from] crate::emit::EmitError),
    #[error(transparent)]
    Source(#[from] crate::source::SourceError),
}

#[derive(clap::Args, Debug, Clone)]
pub struct SimulateArgs {
    /// Number of runs.
    #[arg(long, default_value_t = 200)]
    pub runs: usize,
    /// Fraction of runs that loop.
    #[arg(long, default_value_t = 0.3)]
    pub loop_rate: f64,
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Number of projects.
    #[arg(long, default_value_t = 3)]
    pub projects: usize,
    /// Event time of the first event (epoch ms); default 2026-01-01T00:00:00Z.
    #[arg(long, default_value_t = 1_767_225_600_000)]
    pub start_ms: i64,
    /// Write JSONL here ("-" = stdout). Without it, events go to the Kafka input topic.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Leave this fraction of runs unfinished (no run_finished), to exercise idle timeouts.
    #[arg(long, default_value_t = 0.0)]
    pub unfinished_rate: f64,
}

const AGENTS: &[&str] = &[
    "researcher",
    "coder",
    "support-bot",
    "planner",
    "sql-analyst",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Healthy,
    Polling,
    RetryRecovers,
    ExactLoop,
    VolatileLoop,
    AuthFailureLoop,
    PingPong,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Healthy => "healthy",
            Kind::Polling => "polling",
            Kind::RetryRecovers => "retry_recovers",
            Kind::ExactLoop => "exact_loop",
            Kind::VolatileLoop => "volatile_loop",
            Kind::AuthFailureLoop => "auth_failure_loop",
            Kind::PingPong => "ping_pong",
        }
    }
    pub fn loops(self) -> bool {
        matches!(
            self,
            Kind::ExactLoop | Kind::VolatileLoop | Kind::AuthFailureLoop | Kind::PingPong
        )
    }
}

/// Generate the whole fleet as (ts, run_id, json line), sorted by event time.
pub fn generate(args: &SimulateArgs) -> Vec<(i64, String, String)> {
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut events = Vec::new();
    for i in 0..args.runs {
        let looping = rng.random_bool(args.loop_rate.clamp(0.0, 1.0));
        let kind = if looping {
            [
                Kind::ExactLoop,
                Kind::VolatileLoop,
                Kind::AuthFailureLoop,
                Kind::PingPong,
            ][rng.random_range(0..4)]
        } else {
            [
                Kind::Healthy,
                Kind::Healthy,
                Kind::Polling,
                Kind::RetryRecovers,
            ][rng.random_range(0..4)]
        };
        let finished = !rng.random_bool(args.unfinished_rate.clamp(0.0, 1.0));
        let project = format!("proj-{}", i % args.projects.max(1));
        let run_id = format!("run-{:016x}", rng.random::<u64>());
        let agent = AGENTS[rng.random_range(0..AGENTS.len())];
        // Spread run starts over the first ten minutes of event time.
        let start = args.start_ms + rng.random_range(0..600_000);
        run_events(
            &mut rng,
            kind,
            finished,
            &project,
            &run_id,
            agent,
            start,
            &mut events,
        );
    }
    events.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    events
}

#[allow(clippy::too_many_arguments)]
fn run_events(
    rng: &mut StdRng,
    kind: Kind,
    finished: bool,
    project: &str,
    run_id: &str,
    agent: &str,
    start: i64,
    out: &mut Vec<(i64, String, String)>,
) {
    let mut ts = start;
    let loop_from = rng.random_range(2..6u64);
    let mut push = |ts: i64, v: Value| out.push((ts, run_id.to_string(), v.to_string()));
    push(
        ts,
        json!({"v":1,"kind":"run_started","project_id":project,"run_id":run_id,"ts":ts,
               "agent_name":agent,"input":"task","metadata":{"sim_kind":kind.name(),"sim_loop_from": if kind.loops() {Some(loop_from)} else {None}}}),
    );
    let mut step = 1u64;
    let mut next_ts = |rng: &mut StdRng| {
        ts += rng.random_range(200..3_000);
        ts
    };
    let step_ev = |step: u64, ts: i64, tool: &str, input: Value, output: Value, ok: bool| {
        json!({"v":1,"kind":"step","project_id":project,"run_id":run_id,"ts":ts,"step_index":step,
               "step_type":"tool_call","tool_name":tool,"tool_input":input,"tool_output":output,
               "tool_success":ok,"tokens":350,"cost_usd":0.0021,"agent":agent})
    };
    // A productive prefix: distinct work.
    while step < loop_from {
        let t = next_ts(rng);
        push(
            t,
            step_ev(
                step,
                t,
                "read_file",
                json!({"path": format!("src/mod{step}.rs")}),
                json!({"bytes": 1000 + step}),
                true,
            ),
        );
        step += 1;
    }
    let body = 8 + rng.random_range(0..6u64);
    for k in 0..body {
        let t = next_ts(rng);
        let ev = match kind {
            Kind::Healthy => step_ev(
                step,
                t,
                ["web_search", "read_file", "run_tests"][(k % 3) as usize],
                json!({"q": format!("topic {k}"), "page": k}),
                json!({"hits": k * 3 + 1}),
                true,
            ),
            Kind::Polling => step_ev(
                step,
                t,
                "job_status",
                json!({"job_id": "j-42"}),
                json!({"state": if k + 1 == body {"done"} else {"running"}, "progress": k * 10}),
                true,
            ),
            Kind::RetryRecovers => {
                let ok = k >= 2;
                step_ev(
                    step,
                    t,
                    "fetch_status",
                    json!({"service": "billing"}),
                    if ok {
                        json!({"status": "ok", "n": k})
                    } else {
                        json!({"error": "503 service temporarily unavailable"})
                    },
                    ok,
                )
            }
            Kind::ExactLoop => step_ev(
                step,
                t,
                "web_search",
                json!({"q": "current weather in Paris"}),
                json!({"hits": 0, "results": []}),
                true,
            ),
            Kind::VolatileLoop => step_ev(
                step,
                t,
                "query_db",
                json!({"sql": "SELECT * FROM orders WHERE id = 7", "request_id": format!("req-{:08x}", rng.random::<u32>())}),
                json!({"rows": [], "took_ms": rng.random_range(3..40), "timestamp": t}),
                true,
            ),
            Kind::AuthFailureLoop => step_ev(
                step,
                t,
                "get_account",
                json!({"account": "acme"}),
                json!({"error": "401 Unauthorized: invalid API key"}),
                false,
            ),
            Kind::PingPong => {
                if k % 2 == 0 {
                    step_ev(
                        step,
                        t,
                        "search_docs",
                        json!({"q": "reset password flow"}),
                        json!({"hits": []}),
                        true,
                    )
                } else {
                    step_ev(
                        step,
                        t,
                        "summarize",
                        json!({"text": "no results"}),
                        json!({"summary": "nothing found"}),
                        true,
                    )
                }
            }
        };
        push(t, ev);
        step += 1;
    }
    if finished {
        let t = next_ts(rng);
        push(
            t,
            json!({"v":1,"kind":"run_finished","project_id":project,"run_id":run_id,"ts":t,"status":"completed"}),
        );
    }
}

pub async fn run(args: SimulateArgs, cfg: &Config) -> Result<(), SimulateError> {
    let events = generate(&args);
    let total = events.len();
    match &args.out {
        Some(path) => {
            let p = path.display().to_string();
            let werr = |source| SimulateError::Write {
                path: p.clone(),
                source,
            };
            let mut w: Box<dyn Write> = if p == "-" {
                Box::new(std::io::BufWriter::new(std::io::stdout().lock()))
            } else {
                Box::new(std::io::BufWriter::new(
                    std::fs::File::create(path).map_err(werr)?,
                ))
            };
            for (_, _, line) in &events {
                w.write_all(line.as_bytes()).map_err(werr)?;
                w.write_all(b"\n").map_err(werr)?;
            }
            w.flush().map_err(werr)?;
        }
        None => {
            crate::source::ensure_topics(cfg).await?;
            let mut emitter = crate::emit::Emitter::plain(cfg)?;
            for (i, (_, run_id, line)) in events.iter().enumerate() {
                emitter.send_raw(&cfg.input_topic, run_id.as_bytes(), line.as_bytes())?;
                if (i + 1) % 50_000 == 0 {
                    emitter.flush().await?;
                    eprintln!("simulate: {}/{} events produced", i + 1, total);
                }
            }
            emitter.flush().await?;
        }
    }
    let loops = events
        .iter()
        .filter(|(_, _, l)| {
            l.contains("\"sim_loop_from\":") && !l.contains("\"sim_loop_from\":null")
        })
        .count();
    eprintln!(
        "simulate: {} runs ({} looping by construction), {} events, seed {}",
        args.runs, loops, total, args.seed
    );
    Ok(())
}
