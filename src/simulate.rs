//! `eddy simulate`: a seeded fleet of agent runs, healthy and looping, as v1 events.
//!
//! Runs are interleaved by event time like a real fleet. Each run follows one scenario
//! ([`Kind`]): healthy work of several shapes (research, polling, retries that recover,
//! pagination, multi-agent delegation) or a loop of one kind injected after a productive prefix.
//! Steps mix thoughts and tool calls, and payloads are drawn fresh per step (sentences, file
//! contents, search results, ids), so the trace carries the byte sizes and the variety of real
//! traffic rather than a few templates repeated.
//!
//! Every run carries its ground truth in `metadata` of `run_started`
//! (`{"sim_kind": ..., "sim_loop_from": N or null}`) so demos and tests can score what was caught
//! without a side file; `--labels` also writes it in `eddy eval`'s `labels.jsonl` format.
use crate::config::KafkaConfig;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::BTreeMap;
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
    #[error(
        "--mix leaves no {0} scenario with a positive weight, but the loop rate asks for some"
    )]
    EmptyMix(&'static str),
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
    /// Fraction of runs that loop (0 to 1).
    #[arg(long, default_value_t = 0.3, value_parser = parse_rate)]
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

const AGENTS: &[&str] = &[
    "researcher",
    "coder",
    "support-bot",
    "planner",
    "sql-analyst",
];

/// The crew of a multi-agent run, in hand-over order.
const CREW: &[&str] = &["planner", "researcher", "writer", "reviewer"];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Healthy,
    Polling,
    RetryRecovers,
    Pagination,
    Delegation,
    ExactLoop,
    VolatileLoop,
    ParaphraseLoop,
    AuthFailureLoop,
    PingPong,
    HandoffCycle,
    ThinkLoop,
}

impl Kind {
    pub const ALL: [Kind; 12] = [
        Kind::Healthy,
        Kind::Polling,
        Kind::RetryRecovers,
        Kind::Pagination,
        Kind::Delegation,
        Kind::ExactLoop,
        Kind::VolatileLoop,
        Kind::ParaphraseLoop,
        Kind::AuthFailureLoop,
        Kind::PingPong,
        Kind::HandoffCycle,
        Kind::ThinkLoop,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Healthy => "healthy",
            Kind::Polling => "polling",
            Kind::RetryRecovers => "retry_recovers",
            Kind::Pagination => "pagination",
            Kind::Delegation => "delegation",
            Kind::ExactLoop => "exact_loop",
            Kind::VolatileLoop => "volatile_loop",
            Kind::ParaphraseLoop => "paraphrase_loop",
            Kind::AuthFailureLoop => "auth_failure_loop",
            Kind::PingPong => "ping_pong",
            Kind::HandoffCycle => "handoff_cycle",
            Kind::ThinkLoop => "think_loop",
        }
    }

    pub fn loops(self) -> bool {
        self.detector().is_some()
    }

    pub fn multi_agent(self) -> bool {
        matches!(self, Kind::Delegation | Kind::HandoffCycle)
    }

    /// The detector whose definition the injected loop meets (the `kind` of `eddy eval`'s labels).
    pub fn detector(self) -> Option<&'static str> {
        match self {
            Kind::ExactLoop | Kind::VolatileLoop => Some("repeated_operation"),
            Kind::ParaphraseLoop => Some("near_duplicate"),
            Kind::AuthFailureLoop => Some("repeated_failure"),
            Kind::PingPong => Some("cycle"),
            Kind::HandoffCycle => Some("handoff_cycle"),
            Kind::ThinkLoop => Some("content_repetition"),
            _ => None,
        }
    }

    /// Healthy runs are mostly plain work; the loop kinds are equally likely.
    fn default_weight(self) -> f64 {
        match self {
            Kind::Healthy => 4.0,
            _ => 1.0,
        }
    }
}

/// What the simulator knows about one run it generated.
#[derive(Debug, Clone, PartialEq)]
pub struct RunTruth {
    pub project_id: String,
    pub run_id: String,
    pub kind: Kind,
    /// step_index of the first looping step.
    pub loop_from: Option<u64>,
    /// step_index at which a reviewer would first call the run a loop: the third repeat of a
    /// call or thought (the second of a permanent error), the end of the second round of a
    /// cycle or a hand-off.
    pub evident_at: Option<u64>,
    pub finished: bool,
}

/// A generated fleet: events as (ts, run_id, JSON line) sorted by event time, and each run's truth.
#[derive(Debug, Default)]
pub struct Fleet {
    pub events: Vec<(i64, String, String)>,
    pub runs: Vec<RunTruth>,
}

/// Generate the whole fleet as (ts, run_id, json line), sorted by event time.
pub fn generate(args: &SimulateArgs) -> Vec<(i64, String, String)> {
    generate_fleet(args).events
}

fn weights(args: &SimulateArgs, looping: bool) -> Vec<(Kind, f64)> {
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
pub fn generate_fleet(args: &SimulateArgs) -> Fleet {
    generate_fleet_with(args, || {})
}

/// [`generate_fleet`], calling `on_run` after each run is generated (for progress).
pub fn generate_fleet_with(args: &SimulateArgs, mut on_run: impl FnMut()) -> Fleet {
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
        // Spread run starts over the first ten minutes of event time.
        let start = args.start_ms.saturating_add(rng.random_range(0..600_000));
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

#[rustfmt::skip]
const WORDS: &[&str] = &[
    "account", "adapter", "alert", "api", "archive", "audit", "backoff", "balance", "batch",
    "billing", "bucket", "buffer", "cache", "catalog", "channel", "checkout", "client", "cluster",
    "commit", "config", "consumer", "contract", "cursor", "customer", "dashboard", "database",
    "deploy", "digest", "domain", "driver", "endpoint", "event", "export", "feature", "filter",
    "gateway", "handler", "header", "index", "invoice", "job", "kafka", "ledger", "limit",
    "listener", "loader", "locale", "metric", "migration", "module", "monitor", "network",
    "notice", "offset", "order", "parser", "partition", "payload", "payment", "pipeline", "policy",
    "pool", "profile", "query", "queue", "quota", "record", "refund", "region", "registry",
    "release", "report", "request", "retry", "router", "schema", "scheduler", "session", "shard",
    "signal", "snapshot", "socket", "source", "storage", "stream", "summary", "tenant", "ticket",
    "timeout", "token", "topic", "trace", "tracker", "user", "vendor", "version", "webhook",
    "window", "worker", "workflow",
];

#[rustfmt::skip]
const VERBS: &[&str] = &[
    "check", "compare", "confirm", "update", "inspect", "trace", "verify", "list", "collect",
    "explain", "measure", "rewrite", "summarise", "validate", "review", "fix",
];

struct RunGen<'a> {
    rng: &'a mut StdRng,
    project: &'a str,
    run_id: &'a str,
    agent: &'a str,
    ts: i64,
    step: u64,
    context: u64,
    out: &'a mut Vec<(i64, String, String)>,
    /// step_index of each repetition the injected loop made, in order.
    loop_steps: Vec<u64>,
}

impl RunGen<'_> {
    fn word(&mut self) -> &'static str {
        WORDS[self.rng.random_range(0..WORDS.len())]
    }

    fn words(&mut self, n: usize) -> String {
        let mut s = String::new();
        for i in 0..n {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(self.word());
        }
        s
    }

    fn sentence(&mut self, n: usize) -> String {
        let verb = VERBS[self.rng.random_range(0..VERBS.len())];
        let rest = self.words(n.saturating_sub(1));
        let mut s = String::with_capacity(verb.len() + rest.len() + 2);
        s.push_str(&verb[..1].to_ascii_uppercase());
        s.push_str(&verb[1..]);
        s.push(' ');
        s.push_str(&rest);
        s.push('.');
        s
    }

    fn path(&mut self) -> String {
        let n = self.rng.random_range(0..100);
        format!("src/{}/{}_{n}.rs", self.word(), self.word())
    }

    fn push(&mut self, v: Value) {
        self.out
            .push((self.ts, self.run_id.to_string(), v.to_string()));
    }

    fn advance(&mut self, lo: i64, hi: i64) {
        self.ts = self.ts.saturating_add(self.rng.random_range(lo..hi));
    }

    fn start_line(&self, ts: i64, task: &str, kind: Kind, loop_from: Option<u64>) -> String {
        json!({"v":1,"kind":"run_started","project_id":self.project,"run_id":self.run_id,
            "ts":ts,"agent_name":self.agent,"input":task,
            "metadata":{"sim_kind":kind.name(),"sim_loop_from":loop_from}})
        .to_string()
    }

    /// The per-step accounting every event carries: tokens billed for the step, its cost, and the
    /// context the model saw, which grows with what the step added.
    fn costs(&mut self, body: &mut serde_json::Map<String, Value>, added_bytes: usize) {
        let tokens = self.rng.random_range(120..900u64);
        self.context += tokens / 3 + added_bytes as u64 / 4;
        body.insert("tokens".into(), tokens.into());
        let cost = (tokens as f64 * 3.0e-6 * 1e6).round() / 1e6;
        body.insert("cost_usd".into(), cost.into());
        body.insert("tokens_in_context".into(), (2_000 + self.context).into());
    }

    /// The fields every step has, and in multi-agent runs who acts and who handed over to it.
    fn header(
        &mut self,
        step_type: &str,
        agent: Option<(&str, Option<&str>)>,
    ) -> serde_json::Map<String, Value> {
        self.step += 1;
        let mut m = serde_json::Map::new();
        m.insert("v".into(), 1.into());
        m.insert("kind".into(), "step".into());
        m.insert("project_id".into(), self.project.into());
        m.insert("run_id".into(), self.run_id.into());
        m.insert("ts".into(), self.ts.into());
        m.insert("step_index".into(), self.step.into());
        m.insert("step_type".into(), step_type.into());
        if let Some((a, caller)) = agent {
            m.insert("agent".into(), a.into());
            if let Some(c) = caller {
                m.insert("caller".into(), c.into());
            }
        }
        m
    }

    fn think_as(&mut self, text: String, agent: Option<(&str, Option<&str>)>) {
        self.advance(400, 4_000);
        let mut m = self.header("think", agent);
        let len = text.len();
        m.insert("content".into(), text.into());
        self.costs(&mut m, len);
        self.push(Value::Object(m));
    }

    fn think(&mut self, text: String) {
        self.think_as(text, None);
    }

    fn tool_as(
        &mut self,
        tool: &str,
        input: Value,
        output: Value,
        ok: bool,
        agent: Option<(&str, Option<&str>)>,
    ) {
        self.advance(200, 3_000);
        let mut m = self.header("tool_call", agent);
        let added = input.to_string().len() + output.to_string().len();
        m.insert("tool_name".into(), tool.into());
        m.insert("tool_input".into(), input);
        m.insert("tool_output".into(), output);
        m.insert("tool_success".into(), ok.into());
        let latency = self.rng.random_range(15..2_500u64);
        m.insert("tool_latency_ms".into(), latency.into());
        self.costs(&mut m, added);
        self.push(Value::Object(m));
    }

    fn tool(&mut self, tool: &str, input: Value, output: Value, ok: bool) {
        self.tool_as(tool, input, output, ok, None);
    }

    /// One step of ordinary, productive work: a fresh call of one of the common tools, sometimes
    /// preceded by a thought. Nothing here repeats an earlier call.
    fn work(&mut self) {
        if self.rng.random_bool(0.3) {
            let n = self.rng.random_range(8..30);
            let t = self.sentence(n);
            self.think(t);
        }
        match self.rng.random_range(0..6) {
            0 => {
                let n = self.rng.random_range(3..7);
                let q = self.words(n);
                let hits = self.rng.random_range(1..4);
                let results: Vec<Value> = (0..hits)
                    .map(|_| {
                        let title = self.sentence(4);
                        let url = format!(
                            "https://{}.example.com/{}/{}",
                            self.word(),
                            self.word(),
                            self.rng.random_range(0..10_000)
                        );
                        let snippet = self.sentence(10);
                        json!({"title": title, "url": url, "snippet": snippet})
                    })
                    .collect();
                self.tool(
                    "web_search",
                    json!({"q": q, "limit": 5}),
                    json!({"results": results}),
                    true,
                );
            }
            1 => {
                let path = self.path();
                let lines = self.rng.random_range(2..8);
                let mut content = String::new();
                for _ in 0..lines {
                    let (a, b) = (self.word(), self.word());
                    let n = self.rng.random_range(0..1000);
                    content.push_str(&format!("fn {a}_{b}() -> u32 {{ {n} }}\n"));
                }
                let bytes = content.len();
                self.tool(
                    "read_file",
                    json!({"path": path}),
                    json!({"content": content, "bytes": bytes}),
                    true,
                );
            }
            2 => {
                let path = self.path();
                let n = self.rng.random_range(6..20);
                let content = self.sentence(n);
                let bytes = content.len();
                self.tool(
                    "write_file",
                    json!({"path": path, "content": content}),
                    json!({"ok": true, "bytes": bytes}),
                    true,
                );
            }
            3 => {
                let target = format!("{}::{}", self.word(), self.word());
                let passed = self.rng.random_range(1..200);
                let ms = self.rng.random_range(100..20_000);
                self.tool(
                    "run_tests",
                    json!({"target": target}),
                    json!({"passed": passed, "failed": 0, "duration_ms": ms}),
                    true,
                );
            }
            4 => {
                let (a, b, t) = (self.word(), self.word(), self.word());
                let id = self.rng.random_range(1..100_000);
                let sql = format!("SELECT {a}, {b} FROM {t}s WHERE id = {id}");
                let rows = self.rng.random_range(0..4);
                let rows: Vec<Value> = (0..rows)
                    .map(|_| json!([self.word(), self.rng.random_range(0..10_000)]))
                    .collect();
                let took = self.rng.random_range(2..80);
                self.tool(
                    "query_db",
                    json!({"sql": sql}),
                    json!({"rows": rows, "took_ms": took}),
                    true,
                );
            }
            _ => {
                let url = format!(
                    "https://api.example.com/v2/{}/{}",
                    self.word(),
                    self.rng.random_range(0..100_000)
                );
                let n = self.rng.random_range(8..24);
                let body = self.sentence(n);
                self.tool(
                    "fetch_url",
                    json!({"url": url}),
                    json!({"status": 200, "body": body}),
                    true,
                );
            }
        }
    }

    fn productive(&mut self, steps: u64) {
        let until = self.step + steps;
        while self.step < until {
            self.work();
        }
    }

    /// Emit the run; returns the step_index where its loop begins, if it loops.
    fn run(&mut self, kind: Kind, finished: bool) -> Option<u64> {
        // The productive prefix before a loop sets in, and how many steps the loop then lasts.
        let prefix = self.rng.random_range(2..9u64);
        let body = 8 + self.rng.random_range(0..8u64);
        // run_started goes first but names where the loop began, known only once generated.
        let (started_at, slot) = (self.ts, self.out.len());
        let task = self.sentence(9);
        self.out
            .push((started_at, self.run_id.to_string(), String::new()));
        let loop_from = match kind {
            Kind::Healthy => {
                let n = self.rng.random_range(6..30);
                self.productive(n);
                None
            }
            Kind::Polling => self.polling(body),
            Kind::RetryRecovers => self.retry_recovers(),
            Kind::Pagination => self.pagination(body),
            Kind::Delegation => self.crew(false),
            _ => {
                self.productive(prefix);
                Some(self.inject(kind, body))
            }
        };
        self.out[slot].2 = self.start_line(started_at, &task, kind, loop_from);
        if finished {
            self.advance(200, 3_000);
            let status = if loop_from.is_some() && self.rng.random_bool(0.5) {
                "failed"
            } else {
                "completed"
            };
            let v = json!({"v":1,"kind":"run_finished","project_id":self.project,
                "run_id":self.run_id,"ts":self.ts,"status":status});
            self.push(v);
        }
        loop_from
    }

    /// A long job polled until done: the same call, whose answer moves on every time.
    fn polling(&mut self, body: u64) -> Option<u64> {
        self.productive(2);
        let job = format!("job-{:08x}", self.rng.random::<u32>());
        for k in 0..body {
            let done = k + 1 == body;
            let state = if done { "done" } else { "running" };
            let progress = (k + 1) * 100 / body;
            self.tool(
                "job_status",
                json!({"job_id": job}),
                json!({"state": state, "progress": progress, "eta_s": (body - k - 1) * 30}),
                true,
            );
            if !done {
                self.tool("sleep", json!({"seconds": 30}), json!({"slept": 30}), true);
            }
        }
        self.productive(2);
        None
    }

    /// A flaky dependency: the same call fails a few times (retryable), then succeeds.
    fn retry_recovers(&mut self) -> Option<u64> {
        self.productive(2);
        let service = self.word();
        let errors = [
            "503 Service Unavailable: upstream temporarily unavailable",
            "429 Too Many Requests: rate limit exceeded, retry later",
            "504 Gateway Timeout: request timed out",
        ];
        let error = errors[self.rng.random_range(0..errors.len())];
        let failures = self.rng.random_range(1..5);
        for _ in 0..failures {
            self.tool(
                "fetch_status",
                json!({"service": service}),
                json!({"error": error}),
                false,
            );
        }
        let n = self.rng.random_range(1..1_000);
        self.tool(
            "fetch_status",
            json!({"service": service}),
            json!({"status": "ok", "open_incidents": 0, "version": n}),
            true,
        );
        let n = self.rng.random_range(2..8);
        self.productive(n);
        None
    }

    /// Reading a long listing page by page: one tool, a cursor that moves, new items each page.
    fn pagination(&mut self, pages: u64) -> Option<u64> {
        self.productive(1);
        let table = self.word();
        let mut cursor: Option<String> = None;
        for p in 0..pages {
            let items: Vec<Value> = (0..self.rng.random_range(3..7))
                .map(|_| json!({"id": self.rng.random_range(0..1_000_000), "name": self.word()}))
                .collect();
            let next = (p + 1 < pages).then(|| format!("c{:012x}", self.rng.random::<u64>()));
            self.tool(
                "list_records",
                json!({"table": table, "cursor": cursor, "limit": 50}),
                json!({"items": items, "next_cursor": next}),
                true,
            );
            cursor = next;
        }
        let n = self.rng.random_range(12..30);
        let t = self.sentence(n);
        self.think(t);
        None
    }

    /// A crew passing work along `caller`→`agent` edges. Healthy (`looping == false`): the draft
    /// and the review move on every round and the reviewer finally approves. Looping: the writer
    /// and reviewer hand over the very same draft and review every round.
    fn crew(&mut self, looping: bool) -> Option<u64> {
        let [planner, researcher, writer, reviewer] = [CREW[0], CREW[1], CREW[2], CREW[3]];
        let plan = self.sentence(16);
        self.think_as(plan, Some((planner, None)));
        for _ in 0..self.rng.random_range(2..5) {
            let q = self.words(4);
            let results: Vec<Value> = (0..2)
                .map(|_| json!({"title": self.sentence(4), "snippet": self.sentence(10)}))
                .collect();
            self.tool_as(
                "web_search",
                json!({"q": q}),
                json!({"results": results}),
                true,
                Some((researcher, Some(planner))),
            );
        }
        let mut caller = researcher;
        let rounds = if looping {
            4 + self.rng.random_range(0..3)
        } else {
            1 + self.rng.random_range(0..3)
        };
        let stuck_draft = format!("Draft: {}", self.sentence(24));
        let stuck_review = format!("Needs changes: {}", self.sentence(12));
        let mut from = None;
        for r in 0..rounds {
            let draft = if looping {
                from.get_or_insert(self.step + 1);
                stuck_draft.clone()
            } else {
                format!("Draft v{}: {}", r + 1, self.sentence(24))
            };
            self.think_as(draft, Some((writer, Some(caller))));
            if looping {
                self.loop_steps.push(self.step);
            }
            let review = if looping {
                stuck_review.clone()
            } else if r + 1 == rounds {
                format!("Approved. {}", self.sentence(6))
            } else {
                format!("Round {} review: {}", r + 1, self.sentence(12))
            };
            self.think_as(review, Some((reviewer, Some(writer))));
            if looping {
                self.loop_steps.push(self.step);
            }
            caller = reviewer;
        }
        from
    }

    /// The loop itself; returns the step_index where it begins.
    fn inject(&mut self, kind: Kind, body: u64) -> u64 {
        let from = self.step + 1;
        match kind {
            Kind::ExactLoop => {
                let q = self.words(4);
                let out = json!({"results": [], "total": 0});
                let mut first_call = None;
                for _ in 0..body {
                    if self.rng.random_bool(0.3) {
                        let n = self.rng.random_range(8..20);
                        let t = self.sentence(n);
                        self.think(t);
                    }
                    self.tool("web_search", json!({"q": q, "limit": 5}), out.clone(), true);
                    self.loop_steps.push(self.step);
                    first_call.get_or_insert(self.step);
                }
                // The loop is the repeated call; a thought before the first one is not part of it.
                return first_call.unwrap_or(from);
            }
            Kind::VolatileLoop => {
                let (a, t) = (self.word(), self.word());
                let id = self.rng.random_range(1..100_000);
                let sql = format!("SELECT {a} FROM {t}s WHERE id = {id}");
                for _ in 0..body {
                    let req = format!("req-{:016x}", self.rng.random::<u64>());
                    let took = self.rng.random_range(2..80);
                    let ts = self.ts;
                    self.tool(
                        "query_db",
                        json!({"sql": sql, "request_id": req}),
                        json!({"rows": [], "took_ms": took, "timestamp": ts}),
                        true,
                    );
                    self.loop_steps.push(self.step);
                }
            }
            Kind::ParaphraseLoop => {
                let (a, b, c) = (self.word(), self.word(), self.word());
                let forms = [
                    format!("{a} {b} {c}"),
                    format!("how to fix {a} {b} {c}"),
                    format!("{a} {b} {c} error"),
                    format!("why does {a} {b} {c} fail"),
                    format!("{b} {c} in {a}"),
                    format!("{a} {b} {c} not working"),
                    format!("troubleshoot {a} {b} {c}"),
                ];
                for _ in 0..body {
                    let q = forms[self.rng.random_range(0..forms.len())].clone();
                    self.tool(
                        "web_search",
                        json!({"q": q, "limit": 5}),
                        json!({"results": []}),
                        true,
                    );
                    self.loop_steps.push(self.step);
                }
            }
            Kind::AuthFailureLoop => {
                let account = self.word();
                for _ in 0..body {
                    self.tool(
                        "get_account",
                        json!({"account": account}),
                        json!({"error": "401 Unauthorized: invalid API key"}),
                        false,
                    );
                    self.loop_steps.push(self.step);
                    if self.rng.random_bool(0.4) {
                        self.think("The call failed; let me try it again.".into());
                    }
                }
            }
            Kind::PingPong => {
                let q = self.words(3);
                let text = self.sentence(8);
                let summary = self.sentence(6);
                for k in 0..body {
                    if k % 2 == 0 {
                        self.tool("search_docs", json!({"q": q}), json!({"hits": []}), true);
                    } else {
                        self.tool(
                            "summarize",
                            json!({"text": text}),
                            json!({"summary": summary}),
                            true,
                        );
                    }
                    self.loop_steps.push(self.step);
                }
            }
            Kind::ThinkLoop => {
                let thought = self.sentence(14);
                for k in 0..body {
                    // The same thought, every third time with a trailing word, as a model's
                    // repeated monologue has.
                    let t = match k % 3 {
                        1 => format!("{thought} Again."),
                        _ => thought.clone(),
                    };
                    self.think(t);
                    self.loop_steps.push(self.step);
                }
            }
            Kind::HandoffCycle => return self.crew(true).unwrap_or(from),
            _ => {}
        }
        from
    }
}

fn labels_line(t: &RunTruth) -> String {
    json!({"run_id": t.run_id, "looping": t.kind.loops(), "kind": t.kind.detector().unwrap_or("healthy"),
           "loop_start": t.loop_from, "evident_at": t.evident_at})
    .to_string()
}

/// A progress bar on a terminal; elsewhere (CI logs, pipes) a line per tenth of the work, for
/// work big enough to take a while.
struct Progress {
    bar: ProgressBar,
    hidden: bool,
    what: &'static str,
    unit: &'static str,
    every: usize,
    done: usize,
}

impl Progress {
    fn new(total: usize, what: &'static str, unit: &'static str, big: usize) -> Self {
        let bar = ProgressBar::new(total as u64);
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "simulate: {what} [{{bar:30}}] {{pos}}/{{len}} {unit} {{per_sec}} eta {{eta}}"
            ))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        // Asked once: the bar answers under a lock.
        let hidden = bar.is_hidden();
        Progress {
            bar,
            hidden,
            what,
            unit,
            every: (total / 10).max(big),
            done: 0,
        }
    }

    fn tick(&mut self) {
        self.done += 1;
        if self.hidden {
            if self.done.is_multiple_of(self.every) {
                let total = self.bar.length().unwrap_or(0);
                eprintln!(
                    "simulate: {} {}/{total} {}",
                    self.what, self.done, self.unit
                );
            }
        } else {
            self.bar.inc(1);
        }
    }

    fn finish(self) {
        self.bar.finish_and_clear();
    }
}

pub async fn run(args: SimulateArgs, cfg: &KafkaConfig) -> Result<(), SimulateError> {
    if args.loop_rate > 0.0 && weights(&args, true).is_empty() {
        return Err(SimulateError::EmptyMix("looping"));
    }
    if args.loop_rate < 1.0 && weights(&args, false).is_empty() {
        return Err(SimulateError::EmptyMix("healthy"));
    }
    // Generating is most of the time when writing to a file (about 10 s per 100k runs).
    let mut gen = Progress::new(args.runs, "generating", "runs", 10_000);
    let fleet = generate_fleet_with(&args, || gen.tick());
    gen.finish();
    let total = fleet.events.len();
    let write_err = |p: &std::path::Path| {
        let p = p.display().to_string();
        move |source| SimulateError::Write {
            path: p.clone(),
            source,
        }
    };
    let destination = match &args.out {
        Some(path) => {
            let werr = write_err(path);
            let mut w: Box<dyn Write> = if path.as_os_str() == "-" {
                Box::new(std::io::BufWriter::new(std::io::stdout().lock()))
            } else {
                Box::new(std::io::BufWriter::new(
                    std::fs::File::create(path).map_err(&werr)?,
                ))
            };
            let mut bar = Progress::new(total, "writing", "events", 1_000_000);
            for (_, _, line) in &fleet.events {
                w.write_all(line.as_bytes()).map_err(&werr)?;
                w.write_all(b"\n").map_err(&werr)?;
                bar.tick();
            }
            w.flush().map_err(&werr)?;
            bar.finish();
            path.display().to_string()
        }
        None => {
            crate::source::ensure_topics(cfg).await?;
            let mut emitter = crate::emit::Emitter::plain(cfg)?;
            let mut bar = Progress::new(total, "producing", "events", 100_000);
            for (i, (_, run_id, line)) in fleet.events.iter().enumerate() {
                emitter.send_raw(&cfg.topics.input, run_id.as_bytes(), line.as_bytes())?;
                if (i + 1) % 20_000 == 0 {
                    emitter.flush().await?;
                }
                bar.tick();
            }
            emitter.flush().await?;
            bar.finish();
            format!("topic {}", cfg.topics.input)
        }
    };
    if let Some(path) = &args.labels {
        let werr = write_err(path);
        let mut w = std::io::BufWriter::new(std::fs::File::create(path).map_err(&werr)?);
        for t in &fleet.runs {
            writeln!(w, "{}", labels_line(t)).map_err(&werr)?;
        }
        w.flush().map_err(&werr)?;
    }
    eprint!("{}", summary(&fleet, &args, &destination));
    Ok(())
}

/// The closing summary: what was generated, by scenario, and the shape of its steps.
pub fn summary(fleet: &Fleet, args: &SimulateArgs, destination: &str) -> String {
    let mut by_kind: BTreeMap<Kind, usize> = BTreeMap::new();
    for r in &fleet.runs {
        *by_kind.entry(r.kind).or_default() += 1;
    }
    let looping = fleet.runs.iter().filter(|r| r.kind.loops()).count();
    let multi = fleet.runs.iter().filter(|r| r.kind.multi_agent()).count();
    let unfinished = fleet.runs.iter().filter(|r| !r.finished).count();
    let bytes: usize = fleet.events.iter().map(|(_, _, l)| l.len() + 1).sum();
    let (mut thinks, mut tools) = (0usize, 0usize);
    for (_, _, l) in &fleet.events {
        if l.contains("\"step_type\":\"think\"") {
            thinks += 1;
        } else if l.contains("\"step_type\":\"tool_call\"") {
            tools += 1;
        }
    }
    let events = fleet.events.len();
    let mut s = format!(
        "simulate: {} runs ({looping} looping by construction, {multi} multi-agent, {unfinished} left open), \
         {events} events, {} bytes/event, seed {} -> {destination}\n",
        fleet.runs.len(),
        bytes.checked_div(events).unwrap_or(0),
        args.seed,
    );
    s.push_str(&format!(
        "simulate: steps: {tools} tool calls, {thinks} thoughts\nsimulate: runs by scenario:"
    ));
    for (k, n) in &by_kind {
        s.push_str(&format!(" {}={n}", k.name()));
    }
    s.push('\n');
    s
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
