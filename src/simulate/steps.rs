//! One run's event writer: the vocabulary payloads are drawn from, the fields and accounting
//! every step carries, and ordinary productive work. The plots that string steps together
//! into a scenario are in `scenarios`.
use super::kind::Kind;
use rand::rngs::StdRng;
use rand::Rng;
use serde_json::{json, Value};

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
pub(super) struct RunGen<'a> {
    pub(super) rng: &'a mut StdRng,
    pub(super) project: &'a str,
    pub(super) run_id: &'a str,
    pub(super) agent: &'a str,
    pub(super) ts: i64,
    pub(super) step: u64,
    pub(super) context: u64,
    pub(super) out: &'a mut Vec<(i64, String, String)>,
    /// step_index of each repetition the injected loop made, in order.
    pub(super) loop_steps: Vec<u64>,
}

impl RunGen<'_> {
    pub(super) fn word(&mut self) -> &'static str {
        WORDS[self.rng.random_range(0..WORDS.len())]
    }

    pub(super) fn words(&mut self, n: usize) -> String {
        let mut s = String::new();
        for i in 0..n {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(self.word());
        }
        s
    }

    pub(super) fn sentence(&mut self, n: usize) -> String {
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

    pub(super) fn push(&mut self, v: Value) {
        self.out
            .push((self.ts, self.run_id.to_string(), v.to_string()));
    }

    pub(super) fn advance(&mut self, lo: i64, hi: i64) {
        self.ts = self.ts.saturating_add(self.rng.random_range(lo..hi));
    }

    pub(super) fn start_line(
        &self,
        ts: i64,
        task: &str,
        kind: Kind,
        loop_from: Option<u64>,
    ) -> String {
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

    pub(super) fn think_as(&mut self, text: String, agent: Option<(&str, Option<&str>)>) {
        self.advance(400, 4_000);
        let mut m = self.header("think", agent);
        let len = text.len();
        m.insert("content".into(), text.into());
        self.costs(&mut m, len);
        self.push(Value::Object(m));
    }

    pub(super) fn think(&mut self, text: String) {
        self.think_as(text, None);
    }

    pub(super) fn tool_as(
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

    pub(super) fn tool(&mut self, tool: &str, input: Value, output: Value, ok: bool) {
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

    pub(super) fn productive(&mut self, steps: u64) {
        let until = self.step + steps;
        while self.step < until {
            self.work();
        }
    }
}
