//! The plot of each scenario: a healthy shape (polling, retries that recover, pagination,
//! delegation) or a loop injected after a productive prefix, written with [`RunGen`]'s steps.
//! Apart from the step writer so that a new scenario is one method here.
use super::kind::Kind;
use super::steps::RunGen;
use rand::Rng;
use serde_json::{json, Value};

/// The crew of a multi-agent run, in hand-over order.
const CREW: &[&str] = &["planner", "researcher", "writer", "reviewer"];

impl RunGen<'_> {
    /// Emit the run; returns the step_index where its loop begins, if it loops.
    pub(super) fn run(&mut self, kind: Kind, finished: bool) -> Option<u64> {
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
