#!/usr/bin/env python3
"""Generate eddy's labeled evaluation corpus (v1 events as JSONL + labels).

Deterministic (fixed seed, stdlib only):  python3 tests/corpus/gen.py
A held-out variant for checking generalisation: python3 tests/corpus/gen.py SEED OUTDIR
Writes tests/corpus/events.jsonl (all runs interleaved by event time, as a worker would see
them) and tests/corpus/labels.jsonl (one line per run: run_id, looping, kind, loop_start,
evident_at).

`loop_start` is the step_index where the repetition begins (the first step of the first
repeated round), `null` for healthy runs. `evident_at` is the step at which a careful reviewer
would first call the run a loop (the third identical call with an identical result, the second
identical permanent failure, the first retryable failure past a five-attempt retry budget, the
last step of a cycle's second round, the chanting message itself). Every scenario family has
several variants with different tools, payload shapes, lengths and noise, so no threshold can
be fitted to a single trace.
"""
import json
import random
import sys
import uuid
from datetime import datetime, timedelta, timezone

R = random.Random(int(sys.argv[1]) if len(sys.argv) > 2 else 20260101)
T0 = datetime(2026, 3, 2, 9, 0, 0, tzinfo=timezone.utc)


def rid():
    return str(uuid.UUID(int=R.getrandbits(128), version=4))


def hexid(n=32):
    return "".join(R.choice("0123456789abcdef") for _ in range(n))


def iso(dt):
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def shuffled(d):
    items = list(d.items())
    R.shuffle(items)
    return dict(items)


WORDS = ("alpha beta gamma delta parser cache token budget invoice report schema "
         "migration customer order latency queue shard replica cluster index vector "
         "summary draft review config deploy router handler session metric").split()


def sentence(n=8):
    return " ".join(R.choice(WORDS) for _ in range(n))


class Run:
    def __init__(self, name, agent, project="acme", looping=False, kind="healthy"):
        self.id = f"{name}-{R.randrange(16**6):06x}"
        self.project = project
        self.agent = agent
        self.looping = looping
        self.kind = kind
        self.loop_start = None
        self.evident_at = None
        self.t = T0 + timedelta(seconds=R.randrange(0, 3600))
        self.i = 0
        self.ctx = R.randrange(2000, 6000)
        self.events = []
        self.epoch_ts = R.random() < 0.4
        self._ev({"kind": "run_started", "agent_name": agent, "input": sentence(6)})

    def _ts(self):
        return int(self.t.timestamp() * 1000) if self.epoch_ts else iso(self.t)

    def _ev(self, body):
        ev = {"v": 1, "project_id": self.project, "run_id": self.id, "ts": self._ts()}
        ev.update(body)
        self.events.append((self.t, len(self.events), ev))

    def evident(self):
        """The next step is where a careful reviewer would first call the run a loop."""
        if self.evident_at is None:
            self.evident_at = self.i + 1

    def mark(self):
        """The next step is where the loop begins."""
        if self.loop_start is None:
            self.loop_start = self.i + 1

    def step(self, step_type="tool_call", tool=None, inp=None, out=None, ok=None, content=None,
             agent=None, caller=None, gap=None, grow=None):
        self.i += 1
        self.t += timedelta(milliseconds=gap if gap is not None else R.randrange(300, 4000))
        self.ctx = max(1000, self.ctx + (grow if grow is not None else R.randrange(200, 1500)))
        body = {"kind": "step", "step_index": self.i, "step_type": step_type}
        if content is not None:
            body["content"] = content
        if tool is not None:
            body["tool_name"] = tool
            body["tool_input"] = inp if inp is not None else {}
            if out is not None:
                body["tool_output"] = out
            if ok is not None:
                body["tool_success"] = ok
            body["tool_latency_ms"] = R.randrange(20, 900)
        body["tokens"] = R.randrange(100, 2000)
        body["cost_usd"] = round(body["tokens"] * 3e-6, 6)
        body["tokens_in_context"] = self.ctx
        if agent:
            body["agent"] = agent
        if caller:
            body["caller"] = caller
        self._ev(body)

    def think(self, text=None, **kw):
        self.step("think", content=text if text is not None else f"Next I will look at the {sentence(5)}.", **kw)

    def finish(self, status="completed", reason=None):
        self.t += timedelta(milliseconds=R.randrange(200, 2000))
        body = {"kind": "run_finished", "status": status}
        if reason:
            body["termination_reason"] = reason
        self._ev(body)
        return self


# ---------------------------------------------------------------- productive noise

def productive(run, n):
    """n steps of ordinary, non-repeating work."""
    for k in range(n):
        c = R.random()
        if c < 0.25:
            run.think(f"Step {run.i}: checking {sentence(6)} before the change.")
        elif c < 0.5:
            p = f"src/{R.choice(WORDS)}/{R.choice(WORDS)}_{R.randrange(1000)}.py"
            run.step(tool="read_file", inp={"path": p}, out={"content": f"def {R.choice(WORDS)}():\n    return {R.randrange(10**6)}\n# {sentence(12)}"}, ok=True)
        elif c < 0.7:
            q = sentence(3)
            run.step(tool="grep", inp={"pattern": q, "path": "src"}, out={"matches": [f"src/{R.choice(WORDS)}.py:{R.randrange(900)}: {q} {sentence(4)}" for _ in range(R.randrange(1, 4))]}, ok=True)
        elif c < 0.85:
            p = f"src/{R.choice(WORDS)}_{R.randrange(1000)}.py"
            run.step(tool="edit_file", inp={"path": p, "old": sentence(4), "new": sentence(5)}, out={"ok": True, "lines_changed": R.randrange(1, 20)}, ok=True)
        else:
            run.step(tool="run_command", inp={"command": f"python -m {R.choice(WORDS)} --check {R.randrange(100)}"}, out={"stdout": sentence(10), "exit_code": 0}, ok=True)


# ---------------------------------------------------------------- healthy families

def h_poll(v):
    tools = [("get_job_status", "job_id"), ("check_build_status", "build"), ("process", "session")]
    tool, key = tools[v % 3]
    r = Run(f"healthy-poll-{v}", "ci-agent")
    productive(r, R.randrange(2, 8))
    jid = rid()
    r.step(tool="submit_job", inp={"spec": sentence(4), "request_id": rid()}, out={"job_id": jid, "state": "queued"}, ok=True)
    n = R.randrange(4, 10)
    for k in range(n):
        inp = {key: jid} if tool != "process" else {"action": "poll", "session": jid}
        out = {"state": "running", "checked_at": iso(r.t)} if v % 2 == 0 else {"state": "running", "progress": f"{(k + 1) * 100 // (n + 1)}%"}
        r.step(tool=tool, inp=inp, out=out, ok=True, gap=R.randrange(5000, 30000))
        if v == 2 and k % 2 == 1:
            r.step(tool="sleep", inp={"seconds": 10}, out=None, ok=True)
    r.step(tool=tool, inp={key: jid} if tool != "process" else {"action": "poll", "session": jid}, out={"state": "succeeded"}, ok=True)
    r.step(tool="fetch_artifact", inp={"job": jid}, out={"size": R.randrange(10**5), "url": f"s3://b/{jid}"}, ok=True)
    productive(r, R.randrange(2, 6))
    return r.finish()


def h_retry(v):
    r = Run(f"healthy-retry-{v}", "api-agent")
    productive(r, R.randrange(1, 6))
    url = f"https://api.example.com/v1/{R.choice(WORDS)}/{R.randrange(999)}"
    fails = [2, 3, 4, 5][v % 4]
    for k in range(fails):
        if v % 2 == 0:
            out = {"error": "503 Service Unavailable: upstream temporarily unavailable", "request_id": rid(), "retry_after": 2 ** k}
        else:
            out = {"error": {"code": 429, "message": "Rate limit exceeded, try again later"}, "trace_id": hexid()}
        r.step(tool="http_get", inp={"url": url, "timeout": 30}, out=out, ok=False)
        if v >= 2:
            r.step(tool="sleep", inp={"seconds": 2 ** k}, out={"slept": 2 ** k}, ok=True)
    r.step(tool="http_get", inp={"url": url, "timeout": 30}, out={"status": 200, "body": {"items": [sentence(3) for _ in range(3)]}}, ok=True)
    productive(r, R.randrange(3, 8))
    return r.finish()


def h_edit_recover(v):
    r = Run(f"healthy-edit-recover-{v}", "coder")
    productive(r, R.randrange(2, 6))
    path = f"src/{R.choice(WORDS)}.rs"
    body = f"fn {R.choice(WORDS)}() -> u32 {{ {R.randrange(100)} }}\n// {sentence(8)}"
    r.step(tool="read_file", inp={"path": path}, out={"content": body}, ok=True)
    attempts = 1 + v % 2
    for a in range(attempts):
        r.step(tool="str_replace", inp={"path": path, "old_str": f"fn old_{a}() {sentence(2)}", "new_str": sentence(4)}, out={"error": f"old text not found in {path}"}, ok=False)
        body += f"\n// touched {a}"
        r.step(tool="read_file", inp={"path": path}, out={"content": body}, ok=True)
    r.step(tool="str_replace", inp={"path": path, "old_str": body.splitlines()[0], "new_str": "fn fixed() -> u32 { 1 }"}, out={"ok": True}, ok=True)
    r.step(tool="run_tests", inp={"cmd": "cargo test"}, out={"passed": 41, "failed": 0}, ok=True)
    productive(r, R.randrange(2, 6))
    return r.finish()


def h_debugger(v):
    r = Run(f"healthy-debugger-{v}", "debug-agent")
    productive(r, 3)
    tool = ["gdb", "pdb"][v % 2]
    r.step(tool=tool, inp={"cmd": "break main.c:42" if v == 0 else "b app.py:17"}, out={"ok": True}, ok=True)
    line = 40
    for k in range(R.randrange(12, 20)):
        line += R.choice([1, 1, 2])
        cmd = R.choice(["next", "next", "step"]) if v == 0 else "next"
        r.step(tool=tool, inp={"cmd": cmd}, out={"frame": "main" if v == 0 else "handler", "line": line, "locals": {"i": k, "acc": k * 3}}, ok=True, gap=R.randrange(500, 3000))
    r.think("Found it: the accumulator overflows after the loop.")
    productive(r, 3)
    return r.finish()


def h_scroll(v):
    r = Run(f"healthy-scroll-{v}", "browser-agent")
    r.step(tool="browser", inp={"action": "navigate", "url": f"https://news.example.com/{R.choice(WORDS)}"}, out={"title": sentence(4)}, ok=True)
    n = R.randrange(6, 12)
    for k in range(n):
        out = {"visible_text": sentence(20) if k < n - 2 else "Footer - (c) Example News"}
        r.step(tool="browser", inp={"action": "scroll_down", "amount": 800}, out=out, ok=True)
    r.step(tool="browser", inp={"action": "extract", "selector": "article"}, out={"text": sentence(40)}, ok=True)
    productive(r, 2)
    return r.finish()


def h_pagination(v):
    r = Run(f"healthy-pagination-{v}", "data-agent")
    productive(r, 2)
    cursor = None
    tool = ["list_customers", "search_tickets"][v % 2]
    for page in range(1, R.randrange(7, 12)):
        inp = {"page": page, "page_size": 50} if v % 2 == 0 else {"query": "status:open priority:high", "cursor": cursor}
        cursor = hexid(24)
        items = [{"id": rid(), "name": f"{R.choice(WORDS)} {R.choice(WORDS)} {R.randrange(10**4)}"} for _ in range(3)]
        r.step(tool=tool, inp=inp, out={"items": items, "next_cursor": cursor}, ok=True)
    r.step(tool=tool, inp={"page": 99, "page_size": 50} if v % 2 == 0 else {"query": "status:open priority:high", "cursor": cursor}, out={"items": [], "next_cursor": None}, ok=True)
    r.think("All pages collected; writing the report.")
    r.step(tool="write_file", inp={"path": "report.csv", "content": sentence(30)}, out={"ok": True}, ok=True)
    return r.finish()


def h_batch(v):
    r = Run(f"healthy-batch-{v}", "refactor-agent")
    productive(r, 2)
    n = R.randrange(12, 25)
    for k in range(n):
        name = f"{R.choice(WORDS)}_{k}"
        if v % 3 == 0:
            r.step(tool="move_file", inp={"src": f"old/{name}.py", "dst": f"new/{name}.py"}, out={"ok": True}, ok=True)
        elif v % 3 == 1:
            r.step(tool="update_import", inp={"file": f"src/{name}.ts", "from": "../old/util", "to": "../lib/util"}, out={"status": "updated"}, ok=True)
        else:
            r.step(tool="resize_image", inp={"path": f"img/{name}.png", "width": 320}, out=None, ok=True)
    r.step(tool="run_tests", inp={}, out={"passed": 120, "failed": 0}, ok=True)
    return r.finish()


def h_long(v):
    r = Run(f"healthy-long-{v}", "research-agent")
    productive(r, R.randrange(200, 260))
    # A file re-read a few times across the session (unchanged): common and healthy.
    for _ in range(2):
        r.step(tool="read_file", inp={"path": "README.md"}, out={"content": "# Project\nUsage: ..."}, ok=True)
        productive(r, R.randrange(8, 20))
    return r.finish()


def h_volatile(v):
    """Calls differ only by key order or volatile fields, but are few and interleaved with work."""
    r = Run(f"healthy-volatile-{v}", "support-agent")
    for k in range(R.randrange(6, 10)):
        q = {"customer": f"cus_{R.randrange(10**5)}", "fields": ["plan", "status"], "request_id": rid()}
        r.step(tool="lookup_customer", inp=shuffled(q), out={"plan": R.choice(["pro", "free", "team"]), "fetched_at": iso(r.t), "status": "active"}, ok=True)
        r.think(f"Customer {k} looks fine; {sentence(4)}.")
    q = {"ticket": 4411, "include": ["history"]}
    r.step(tool="get_ticket", inp=shuffled(q), out={"subject": "refund", "n": 3}, ok=True)
    r.step(tool="get_ticket", inp=shuffled({"include": ["history"], "ticket": 4411.0}), out={"subject": "refund", "n": 3}, ok=True)
    r.step(tool="reply_ticket", inp={"ticket": 4411, "body": sentence(12)}, out={"ok": True}, ok=True)
    return r.finish()


def h_multiagent(v):
    r = Run(f"healthy-multiagent-{v}", "crew")
    agents = [["writer", "reviewer"], ["planner", "researcher", "critic"], ["writer", "reviewer"]][v % 3]
    draft = sentence(40)
    rounds = R.randrange(3, 6)
    for rd in range(rounds):
        for i, a in enumerate(agents):
            caller = agents[i - 1]
            if a in ("writer", "planner"):
                draft = draft + " " + sentence(6)
                r.step("think", content=f"Draft v{rd + 1}: {draft}", agent=a, caller=caller)
            elif a == "researcher":
                r.step(tool="web_search", inp={"q": f"{sentence(3)} {rd}"}, out={"results": [sentence(6) for _ in range(3)]}, ok=True, agent=a, caller=caller)
                r.step("think", content=f"Findings round {rd}: {sentence(10)}", agent=a)
            else:
                fb = "LGTM, approved." if rd == rounds - 1 else f"Please tighten paragraph {rd + 2} and cite the {R.choice(WORDS)} numbers."
                r.step("think", content=fb, agent=a, caller=caller)
    return r.finish()


def h_testfix(v):
    r = Run(f"healthy-testfix-{v}", "coder")
    productive(r, 3)
    failing = R.randrange(4, 7)
    while failing > 0:
        r.step(tool="run_tests", inp={"cmd": "pytest -q"}, out=f"{failing} failed, {40 - failing} passed in {R.random() * 3:.2f}s", ok=False)
        r.step(tool="edit_file", inp={"path": f"src/mod_{failing}.py", "old": sentence(3), "new": sentence(3)}, out={"ok": True}, ok=True)
        failing -= R.choice([1, 1, 2])
    r.step(tool="run_tests", inp={"cmd": "pytest -q"}, out="40 passed in 2.01s", ok=True)
    return r.finish()


def h_search(v):
    r = Run(f"healthy-search-{v}", "research-agent")
    topic = R.choice(WORDS)
    for k in range(R.randrange(6, 12)):
        q = f"{topic} {sentence(2)} {R.randrange(2020, 2026)}"
        r.step(tool="web_search", inp={"query": q, "n": 5}, out={"results": [{"title": sentence(5), "url": f"https://x.example/{hexid(8)}"} for _ in range(3)]}, ok=True)
        if R.random() < 0.5:
            r.step(tool="fetch_url", inp={"url": f"https://x.example/{hexid(8)}"}, out={"text": sentence(30)}, ok=True)
    r.think(f"Summary: {sentence(20)}")
    return r.finish()


# ---------------------------------------------------------------- looping families

def l_exact(v):
    r = Run(f"loop-exact-{v}", "research-agent", looping=True, kind="repeated_operation")
    productive(r, R.randrange(0, 25))
    tool, inp, out = [
        ("web_search", {"query": "acme q3 revenue 2025", "n": 5}, {"results": [{"title": "Acme press", "url": "https://acme.example/pr"}]}),
        ("read_file", {"path": "config/settings.yaml"}, {"content": "debug: false\nworkers: 4\n"}),
        ("sql_query", {"sql": "SELECT count(*) FROM orders WHERE day = '2025-01-01'"}, {"rows": [[0]]}),
    ][v % 3]
    r.mark()
    for k in range(R.randrange(6, 12)):
        if k == 2:
            r.evident()
        r.step(tool=tool, inp=inp, out=out, ok=True)
        if v == 1 and k % 2 == 0:
            r.think("The settings still do not show the worker count I expected.")
    return r.finish(reason="max_steps_reached" if v == 0 else None)


def l_volatile(v):
    r = Run(f"loop-volatile-{v}", "ops-agent", looping=True, kind="repeated_operation")
    productive(r, R.randrange(2, 20))
    r.mark()
    for k in range(R.randrange(6, 10)):
        if k == 2:
            r.evident()
        if v % 3 == 0:
            inp = {"service": "billing", "request_id": rid(), "ts": iso(r.t)}
            out = {"status": "degraded", "checked": iso(r.t), "trace": hexid(32)}
            tool = "describe_service"
        elif v % 3 == 1:
            inp = shuffled({"bucket": "logs", "prefix": "2026/03/", "nonce": hexid(16)})
            out = {"keys": ["2026/03/app.log"], "requestId": rid(), "took": R.randrange(5, 90)}
            tool = "list_objects"
        else:
            inp = {"query": "why is checkout slow", "session": {"trace_id": hexid(), "sent_at": iso(r.t)}}
            out = f"[{r.t.strftime('%H:%M:%S')}] answer: cache hit ratio 0.93, request {rid()} served"
            tool = "ask_kb"
        r.step(tool=tool, inp=inp, out=out, ok=True)
    return r.finish()


def l_keyorder(v):
    r = Run(f"loop-keyorder-{v}", "data-agent", looping=True, kind="repeated_operation")
    productive(r, R.randrange(3, 15))
    r.mark()
    for k in range(R.randrange(6, 10)):
        if k == 2:
            r.evident()
        inp = shuffled({"table": "events", "filters": shuffled({"type": "signup", "day": "2026-03-01"}), "limit": R.choice([100, 100.0])})
        r.step(tool="query_table", inp=inp, out=shuffled({"rows": [], "total": 0}), ok=True)
    return r.finish()


def l_paraphrase(v):
    r = Run(f"loop-paraphrase-{v}", "research-agent", looping=True, kind="near_duplicate")
    productive(r, R.randrange(2, 15))
    variants = [
        ["weather in Paris today", "Paris weather today", "current weather in Paris", "what is the weather in Paris", "Paris weather forecast today", "today weather Paris France"],
        ["acme corp ceo name", "who is the ceo of acme corp", "acme corporation chief executive", "name of acme corp ceo", "acme corp ceo 2026", "current ceo acme corp"],
        ["TODO fix auth token refresh", "fix auth token refresh TODO", "auth token refresh fix", "token refresh auth TODO fix", "refresh auth token fix", "TODO auth token refresh"],
    ][v % 3]
    tool = ["web_search", "web_search", "grep_code"][v % 3]
    r.mark()
    for k, q in enumerate(variants[: R.randrange(4, 7)]):
        if k == 2:
            r.evident()
        if tool == "grep_code":
            r.step(tool=tool, inp={"pattern": q, "path": "."}, out="No matches found.", ok=True)
        else:
            r.step(tool=tool, inp={"query": q}, out={"query": q, "results": []}, ok=True)
        if R.random() < 0.4:
            r.think(f"Nothing yet, let me rephrase the search ({k}).")
    return r.finish()


def l_permanent(v):
    r = Run(f"loop-permanent-{v}", "api-agent", looping=True, kind="repeated_failure")
    productive(r, R.randrange(1, 20))
    tool, inp, out = [
        ("github_api", {"endpoint": "/repos/acme/app/pulls", "method": "GET"}, {"status": 401, "message": "Bad credentials", "request_id": hexid(20)}),
        ("call_tool", {"name": "search_inventory", "args": {"sku": "A-1"}}, {"error": "Unknown tool: search_inventory"}),
        ("create_invoice", {"customer": "cus_42", "amount": "12,00"}, {"error": "ValidationError: amount is invalid (schema: number)"}),
    ][v % 3]
    r.mark()
    for k in range(R.randrange(3, 7)):
        if k == 1:
            r.evident()
        r.step(tool=tool, inp=inp, out=out, ok=False if v != 0 else None)
        r.think(f"That failed, trying again ({k}).")
    return r.finish(status="failed")


def l_retry_forever(v):
    r = Run(f"loop-retry-forever-{v}", "api-agent", looping=True, kind="repeated_failure")
    productive(r, R.randrange(2, 10))
    url = "https://payments.example.com/v2/charges"
    r.mark()
    for k in range(R.randrange(9, 15)):
        if k == 5:
            r.evident()
        out = {"error": "429 Too Many Requests", "retry_after": 1, "trace_id": hexid()} if v == 0 else {"error": "upstream request timeout", "code": 504}
        r.step(tool="http_post", inp={"url": url, "body": {"amount": 100}, "idempotency_key": rid()}, out=out, ok=False)
        if v == 1:
            r.step(tool="sleep", inp={"seconds": 1}, out={"slept": 1}, ok=True)
    return r.finish(status="failed")


def l_varying_error(v):
    r = Run(f"loop-varying-error-{v}", "infra-agent", looping=True, kind="repeated_failure")
    productive(r, R.randrange(2, 12))
    r.mark()
    for k in range(R.randrange(4, 8)):
        if k == 2:
            r.evident()
        if v == 0:
            r.step(tool="kubectl", inp={"args": ["get", R.choice(["pods", "svc", "deploy", "cm", "secrets"]), "-n", f"ns{k}"]}, out={"stderr": "Error from server (Forbidden): User cannot list resource in namespace", "exit_code": 1}, ok=False)
        else:
            r.step(tool="s3_put", inp={"key": f"exports/{k}/{R.choice(WORDS)}.csv", "body": sentence(5)}, out={"error": "AccessDenied: Access Denied"}, ok=False)
    return r.finish(status="failed")


def l_cycle(v):
    r = Run(f"loop-cycle-{v}", "coder", looping=True, kind="cycle")
    productive(r, R.randrange(2, 15))
    path = f"src/{R.choice(WORDS)}.py"
    content = f"def handler():\n    return {R.randrange(100)}\n"
    legs = [
        [("read_file", {"path": path}, {"content": content}, True),
         ("str_replace", {"path": path, "old_str": "return None", "new_str": "return 0"}, {"error": "old text not found"}, False)],
        [("web_search", {"query": "acme pricing page"}, {"results": [{"title": "Acme pricing"}]}, True),
         ("summarize", {"text": "Acme pricing"}, {"summary": "No pricing information found."}, True)],
        [("run_tests", {"cmd": "npm test"}, {"failed": 3, "first": "TypeError: x is undefined"}, True),
         ("read_file", {"path": "src/app.js"}, {"content": "const x = y.z;"}, True),
         ("edit_file", {"path": "src/app.js", "old": "y.z", "new": "y?.z"}, {"ok": True}, True)],
        [("list_dir", {"path": "/data"}, {"entries": ["a.csv", "b.csv"]}, True),
         ("read_csv", {"path": "/data/a.csv"}, {"rows": 0}, True),
         ("read_csv", {"path": "/data/b.csv"}, {"rows": 0}, True),
         ("think_tool", {"note": "files are empty"}, {"ok": True}, True)],
    ][v % 4]
    r.mark()
    for rd in range(R.randrange(3, 5)):
        for j, (tool, inp, out, ok) in enumerate(legs):
            if rd == 1 and j == len(legs) - 1:
                r.evident()
            r.step(tool=tool, inp=shuffled(inp), out=out, ok=ok)
    return r.finish()


def l_handoff(v):
    r = Run(f"loop-handoff-{v}", "crew", looping=True, kind="handoff_cycle")
    agents = [["writer", "reviewer"], ["planner", "researcher", "critic"], ["manager", "coder", "tester", "deployer"]][v % 3]
    # A productive first round, then the same work handed around unchanged.
    for i, a in enumerate(agents):
        r.step("think", content=f"{a}: {sentence(15)}", agent=a, caller=agents[i - 1])
    msgs = {a: f"{a}: " + sentence(14) for a in agents}
    r.mark()
    for rd in range(R.randrange(3, 5)):
        for i, a in enumerate(agents):
            if rd == 1 and i == len(agents) - 1:
                r.evident()
            text = msgs[a] if rd % 2 == 0 or len(msgs[a]) > 200 else msgs[a].replace(":", " -", 1)
            if a == "researcher":
                r.step(tool="web_search", inp={"q": "acme churn drivers"}, out={"results": []}, ok=True, agent=a, caller=agents[i - 1])
                r.step("think", content=text, agent=a)
            else:
                r.step("think", content=text, agent=a, caller=agents[i - 1])
    return r.finish()


def l_content(v):
    r = Run(f"loop-content-{v}", "chat-agent", looping=True, kind="content_repetition")
    productive(r, R.randrange(3, 12))
    if v == 0:
        r.mark()
        for k in range(R.randrange(4, 6)):
            if k == 2:
                r.evident()
            r.think("I need to verify the migration before proceeding. Let me review the schema changes once more.")
    elif v == 1:
        r.mark()
        for k in range(R.randrange(4, 6)):
            if k == 2:
                r.evident()
            r.step("think", content="   ")
    else:
        r.mark()
        chunk = "I will now carefully re-check every step of the deployment plan. "
        r.evident()
        r.step("think", content="Plan:\n" + chunk * 30)
        r.step("think", content=chunk * 25)
    return r.finish()


def l_poll_stuck(v):
    r = Run(f"loop-poll-stuck-{v}", "ci-agent", looping=True, kind="repeated_operation")
    productive(r, R.randrange(2, 8))
    jid = rid()
    r.step(tool="deploy", inp={"env": "prod"}, out={"deployment": jid}, ok=True)
    r.mark()
    for k in range(R.randrange(26, 36)):
        if k == 19:
            r.evident()
        r.step(tool="get_deployment_status", inp={"id": jid}, out={"state": "pending", "reason": "ImagePullBackOff", "observed_at": iso(r.t)}, ok=True, gap=R.randrange(1000, 3000))
    return r.finish(reason="timeout")


def l_edit_loop(v):
    r = Run(f"loop-edit-{v}", "coder", looping=True, kind="repeated_failure")
    productive(r, R.randrange(3, 12))
    path = f"lib/{R.choice(WORDS)}.ts"
    body = f"export const limit = {R.randrange(10, 99)};\n"
    r.mark()
    for k in range(R.randrange(3, 6)):
        if k == 2:
            r.evident()
        r.step(tool="str_replace", inp={"path": path, "old_str": "export const limit = 5;", "new_str": "export const limit = 10;"}, out="Error: old_string not found in file. Read the file first.", ok=False)
        r.step(tool="read_file", inp={"path": path}, out={"content": body}, ok=True)
        if v == 1:
            r.think("Retrying the replacement with the same snippet.")
    return r.finish()


def l_stall(v):
    r = Run(f"loop-stall-{v}", "coder", looping=True, kind="no_progress")
    productive(r, R.randrange(3, 10))
    fixes = [("src/a.py", "x = 1", "x = 2"), ("src/a.py", "x = 2", "x = 1")]
    r.mark()
    for k in range(R.randrange(5, 8)):
        p, o, n = fixes[k % 2]
        r.step(tool="edit_file", inp={"path": p, "old": o, "new": n}, out={"ok": True}, ok=True)
        if k == 3:
            r.evident()
        r.step(tool="run_tests", inp={"cmd": "pytest -q"}, out=["1 failed: test_x expected 3", "1 failed: test_x expected 4"][k % 2], ok=False)
    return r.finish()


def l_context(v):
    r = Run(f"loop-context-{v}", "research-agent", looping=True, kind="context_pressure")
    productive(r, R.randrange(3, 10))
    r.mark()
    for k in range(R.randrange(10, 14)):
        if k == 3:
            r.evident()
        r.step(tool="fetch_url", inp={"url": "https://docs.example.com/api", "page": k % 2}, out={"text": "API reference " + "lorem " * 20}, ok=True, grow=R.randrange(4000, 9000))
    return r.finish(reason="context_limit")


# ---------------------------------------------------------------- short loops and look-alikes
# Written from the peers' public semantics (Roo Code and Cline block the third identical
# consecutive call, OpenHands calls four identical action-observation pairs, three rounds of
# A->B or three consecutive agent messages stuck, Gemini CLI halts a response that repeats a
# chunk, Cline ignores `task_progress`), and the healthy traces their users reported as false
# positives (multi-part answers, markdown tables and lists, re-reads between edits, retries
# that recover, long sessions that compact now and then).

def l_short_exact(v):
    r = Run(f"loop-short-exact-{v}", "coder", looping=True, kind="repeated_operation")
    productive(r, R.randrange(2, 10))
    tool, inp, out = [
        ("read_file", {"path": "src/app/config.ts"}, {"content": "export const retries = 3;\n"}),
        ("run_command", {"command": "npm run lint"}, {"stdout": "src/app/x.ts: 1 error (no-unused-vars)", "exit_code": 1}),
        ("list_dir", {"path": "dist"}, {"entries": []}),
        ("search_code", {"query": "parseConfig"}, {"matches": ["src/app/config.ts:12"]}),
    ][v % 4]
    r.mark()
    for k in range(4):
        if k == 2:
            r.evident()
        r.step(tool=tool, inp=inp, out=out, ok=True)
        if v % 2 == 1 and k < 3:
            r.think(f"Let me look at that again ({k}).")
    productive(r, R.randrange(0, 3))
    return r.finish()


def l_task_progress(v):
    """Cline-style calls whose task_progress note changes on every call; same call, same result."""
    r = Run(f"loop-task-progress-{v}", "cline", looping=True, kind="repeated_operation")
    productive(r, R.randrange(2, 8))
    r.mark()
    for k in range(R.randrange(4, 6)):
        if k == 2:
            r.evident()
        note = f"- [x] read config\n- [ ] fix build ({k + 1} attempts)"
        key = ["task_progress", "turn"][v % 2]
        inp = {"command": "npm run build", key: note if key == "task_progress" else k + 7}
        r.step(tool="execute_command", inp=inp, out={"stdout": "ERROR in src/index.ts: TS2304 Cannot find name 'foo'", "exit_code": 2}, ok=True)
    return r.finish()


def l_short_pingpong(v):
    r = Run(f"loop-short-pingpong-{v}", "browser-agent", looping=True, kind="cycle")
    productive(r, R.randrange(1, 6))
    legs = [
        [("browser_click", {"selector": "#next"}, {"url": "/step-2", "error_banner": "Please fill all fields"}),
         ("browser_back", {}, {"url": "/step-1"})],
        [("git_checkout", {"branch": "main"}, {"ok": True, "head": "a1b2c3d"}),
         ("git_checkout", {"branch": "feature/login"}, {"ok": True, "head": "d4e5f6a"})],
        [("open_file", {"path": "a.md"}, {"text": "see b.md"}),
         ("open_file", {"path": "b.md"}, {"text": "see a.md"}),
         ("open_file", {"path": "c.md"}, {"text": "moved to a.md"})],
    ][v % 3]
    r.mark()
    for rd in range(3):
        for j, (tool, inp, out) in enumerate(legs):
            if rd == 1 and j == len(legs) - 1:
                r.evident()
            r.step(tool=tool, inp=inp, out=out, ok=True)
    return r.finish()


def l_chant_short(v):
    r = Run(f"loop-chant-short-{v}", "chat-agent", looping=True, kind="content_repetition")
    productive(r, R.randrange(2, 6))
    unit = ["The answer is in the configuration file, line 12. ", "Yes. No. Maybe. ", "I am checking the logs now... "][v % 3]
    copies = [10, 30, 18][v % 3]
    r.mark()
    r.evident()
    r.step("message", content=unit * copies)
    return r.finish()


def l_monologue(v):
    r = Run(f"loop-monologue-{v}", "chat-agent", looping=True, kind="content_repetition")
    productive(r, R.randrange(2, 8))
    lines = [["Let me check the deployment configuration first.", "I'll look at the service logs now.",
              "Now I'm going to verify the settings.", "Let me check the configuration again."],
             ["I need to review the failing test.", "Still working on the failing test.",
              "I need to look at the failing test once more.", "Thinking about the failing test."]][v % 2]
    r.mark()
    for k, text in enumerate(lines[:3 + v % 2]):
        if k == 2:
            r.evident()
        r.step("message", content=text)
    return r.finish()


def l_compaction(v):
    r = Run(f"loop-compaction-{v}", "coder", looping=True, kind="context_pressure")
    productive(r, R.randrange(4, 10))
    r.mark()
    for k in range(R.randrange(3, 6)):
        if k == 2:
            r.evident()
        if v % 2 == 0:
            r.step("compaction", content=f"Conversation compacted ({k + 1}).", grow=-R.randrange(20000, 40000))
        else:
            r.step(tool="llm_call", inp={"model": "large"}, out={"error": "prompt is too long: 210345 tokens > 200000 maximum"}, ok=False)
        r.step(tool="read_file", inp={"path": "logs/huge.log"}, out={"content": "ERROR timeout " * 40}, ok=True, grow=R.randrange(30000, 60000))
    return r.finish(status="failed", reason="context_limit")


def h_same_call_changing(v):
    r = Run(f"healthy-same-call-changing-{v}", "ops-agent")
    productive(r, R.randrange(2, 6))
    tool, inp = [("queue_depth", {"queue": "emails"}), ("run_command", {"command": "git log --oneline -1"})][v % 2]
    for k in range(R.randrange(4, 7)):
        out = {"depth": 900 - 150 * k} if v % 2 == 0 else {"stdout": f"{hexid(7)} {sentence(4)}", "exit_code": 0}
        r.step(tool=tool, inp=inp, out=out, ok=True)
        if v % 2 == 1:
            r.step(tool="edit_file", inp={"path": f"src/m{k}.py", "old": "a", "new": "b"}, out={"ok": True}, ok=True)
            msg = sentence(4)
            r.step(tool="run_command", inp={"command": f"git commit -am '{msg}'"}, out={"stdout": f"[main {hexid(7)}] {msg}\n 1 file changed, {R.randrange(1, 30)} insertions(+)", "exit_code": 0}, ok=True)
    productive(r, 2)
    return r.finish()


def h_multipart_answer(v):
    r = Run(f"healthy-multipart-{v}", "chat-agent")
    productive(r, R.randrange(2, 5))
    n = 3 + v % 2
    for k in range(n):
        r.step("message", content=f"Part {k + 1} of {n}. " + sentence(40) + ". " + sentence(30) + ".")
    r.step("user", content="Thanks, that helps.")
    r.step("message", content="Glad it helped.")
    return r.finish()


def h_markdown_answer(v):
    r = Run(f"healthy-markdown-{v}", "chat-agent")
    productive(r, 2)
    rows = "\n".join(f"| {R.choice(WORDS)} | {R.randrange(100)} | ok |" for _ in range(20))
    lst = "\n".join(f"- Update the import path in src/components/shared/widgets/{R.choice(WORDS)}_{k}.tsx" for k in range(20))
    box = "\n".join(["┌──────────────┬──────────────┐"] + ["│              │              │"] * 12 + ["└──────────────┴──────────────┘"])
    code = "```python\n" + "\n".join("    assert check(x) == expected  # same line" for _ in range(20)) + "\n```"
    hdr = "\n\n".join(f"## Section {k}\n\n{sentence(12)}\n\n---" for k in range(6))
    steps = "\n".join(f"{k + 1}. Run the migration for shard {k} and then verify the row counts match the source table." for k in range(15))
    body = [rows, lst, box, code, hdr, steps][v % 6]
    r.step("message", content="Here is the summary:\n\n| name | n | status |\n|---|---|---|\n" + body if v % 6 == 0 else "Here is the plan:\n\n" + body)
    r.step("user", content="Looks good.")
    return r.finish()


def h_chat_turns(v):
    r = Run(f"healthy-chat-{v}", "chat-agent")
    for k in range(R.randrange(4, 7)):
        r.step("user", content=f"Question {k}: what about the {R.choice(WORDS)}?")
        r.step("message", content="Let me check that for you.")
        r.step("message", content=f"The {R.choice(WORDS)} is {sentence(8)}.")
    return r.finish()


def h_reread_failed_edits(v):
    """read -> edit fails -> read again (unchanged) -> a different edit fails -> read -> edit works."""
    r = Run(f"healthy-reread-failed-{v}", "coder")
    productive(r, R.randrange(2, 6))
    path = f"src/{R.choice(WORDS)}.py"
    body = {"content": f"def f():\n    return {R.randrange(100)}\n"}
    for a in range(2 + v % 2):
        r.step(tool="read_file", inp={"path": path}, out=body, ok=True)
        r.step(tool="str_replace", inp={"path": path, "old_str": f"return {a}", "new_str": "return 1"}, out={"error": f"old text not found in {path}"}, ok=False)
    r.step(tool="read_file", inp={"path": path}, out=body, ok=True)
    r.step(tool="str_replace", inp={"path": path, "old_str": body["content"].splitlines()[1], "new_str": "    return 1"}, out={"ok": True}, ok=True)
    productive(r, R.randrange(2, 5))
    return r.finish()


def h_errors_recover(v):
    """The same error twice, then success; later the same error twice again, then success."""
    r = Run(f"healthy-errors-recover-{v}", "api-agent")
    productive(r, 2)
    url = f"https://api.example.com/v1/{R.choice(WORDS)}"
    for rd in range(3):
        for k in range(2):
            r.step(tool="http_get", inp={"url": url}, out={"error": "upstream returned an error: connection refused"}, ok=False)
        r.step(tool="http_get", inp={"url": url}, out={"items": [sentence(3)], "page": rd}, ok=True)
        productive(r, R.randrange(1, 3))
    return r.finish()


def h_long_compacting(v):
    r = Run(f"healthy-long-compacting-{v}", "coder")
    for k in range(3):
        productive(r, R.randrange(25, 40))
        r.step("compaction", content=f"Summary so far: {sentence(20)}", grow=-R.randrange(20000, 40000))
    productive(r, 10)
    return r.finish()


# Paraphrased searches whose answers are the same few documents in a new order, each stamped
# with an id of its own (search APIs return per-request result ids and relevance scores): the
# words of the answer do not change, only their order and the ids do.
DOCS = [
    ("Acme Corp leadership team", "https://acme.example/about/leadership", "Meet the executives who lead Acme Corp and its board of directors"),
    ("Acme annual report", "https://acme.example/investors/annual-report", "Letter to shareholders from the chief executive and the chair"),
    ("Acme Corp profile", "https://companies.example/acme-corp", "Company profile headquarters industry and key people at Acme"),
    ("Acme press releases", "https://acme.example/press", "Announcements about products partnerships and appointments"),
]


def shuffled_docs():
    docs = DOCS[:]
    R.shuffle(docs)
    return {"results": [{"id": f"res_{hexid(6)}", "score": round(R.random(), 3), "title": t, "url": u, "snippet": s}
                        for t, u, s in docs]}


def l_paraphrase_shuffled(v):
    r = Run(f"loop-paraphrase-shuffled-{v}", "research-agent", looping=True, kind="near_duplicate")
    productive(r, R.randrange(2, 12))
    variants = ["who runs acme corp", "acme corp chief executive officer", "acme corp ceo name",
                "current leader of acme corp", "acme corporation ceo", "acme corp head executive"]
    r.mark()
    for k, q in enumerate(variants[: R.randrange(4, 7)]):
        if k == 2:
            r.evident()
        r.step(tool="web_search", inp={"query": q, "n": 4}, out=shuffled_docs(), ok=True)
        if v % 2 == 0:
            r.think(f"The results do not name the CEO, let me rephrase ({k}).")
    return r.finish()


def h_search_refine(v):
    """Related searches that each find new documents: a narrowing search, not a loop."""
    r = Run(f"healthy-search-refine-{v}", "research-agent")
    productive(r, R.randrange(2, 8))
    for k, q in enumerate(["acme corp ceo", "acme corp ceo appointment 2025", "acme ceo interview", "acme ceo biography"]):
        docs = [{"id": f"res_{hexid(6)}", "score": round(R.random(), 3), "title": sentence(5), "url": f"https://news.example/{hexid(8)}", "snippet": sentence(12)} for _ in range(3)]
        if k:
            docs.append({"id": f"res_{hexid(6)}", "score": 0.5, "title": "Acme Corp profile", "url": "https://companies.example/acme-corp", "snippet": "Company profile headquarters industry and key people at Acme"})
        R.shuffle(docs)
        r.step(tool="web_search", inp={"query": q, "n": 4}, out={"results": docs}, ok=True)
        r.step(tool="fetch_url", inp={"url": docs[0]["url"]}, out={"text": sentence(40)}, ok=True)
    r.think(f"Summary: {sentence(20)}")
    return r.finish()


def h_lookup_same_list(v):
    """Different entities looked up through one directory that lists the same team each time,
    in its own order: a batch over a stable list, with real work between the lookups."""
    r = Run(f"healthy-lookup-same-list-{v}", "ops-agent")
    productive(r, R.randrange(2, 6))
    team = ["alice platform oncall", "bob billing owner", "carol search owner", "dave infra lead"]
    for k, svc in enumerate(["billing", "search", "checkout", "ledger"]):
        members = team[:]
        R.shuffle(members)
        r.step(tool="list_owners", inp={"service": svc}, out={"owners": [{"id": f"u_{hexid(6)}", "who": m} for m in members]}, ok=True)
        r.step(tool="edit_file", inp={"path": f"services/{svc}/OWNERS", "old": "tbd", "new": members[0].split()[0]}, out={"ok": True}, ok=True)
    return r.finish()


HEALTHY = [(h_poll, 4), (h_retry, 4), (h_edit_recover, 3), (h_debugger, 2), (h_scroll, 2),
           (h_pagination, 3), (h_batch, 3), (h_long, 3), (h_volatile, 3), (h_multiagent, 3),
           (h_testfix, 2), (h_search, 2)]
LOOPING = [(l_exact, 3), (l_volatile, 3), (l_keyorder, 2), (l_paraphrase, 3), (l_permanent, 3),
           (l_retry_forever, 2), (l_varying_error, 2), (l_cycle, 4), (l_handoff, 3), (l_content, 3),
           (l_poll_stuck, 2), (l_edit_loop, 2), (l_stall, 1), (l_context, 1),
           (l_short_exact, 4), (l_task_progress, 2), (l_short_pingpong, 3), (l_chant_short, 3),
           (l_monologue, 2), (l_compaction, 2)]
# Appended after the original families, so the runs generated before them are unchanged.
HEALTHY_MORE = [(h_same_call_changing, 2), (h_multipart_answer, 2), (h_markdown_answer, 6),
                (h_chat_turns, 2), (h_reread_failed_edits, 2), (h_errors_recover, 2),
                (h_long_compacting, 1)]
# Appended again, after those.
LOOPING_MORE = [(l_paraphrase_shuffled, 3)]
HEALTHY_MORE2 = [(h_search_refine, 2), (h_lookup_same_list, 2)]


def main():
    runs = []
    for fam, n in HEALTHY + LOOPING + HEALTHY_MORE + LOOPING_MORE + HEALTHY_MORE2:
        for v in range(n):
            runs.append(fam(v))
    events = sorted((e for r in runs for e in r.events), key=lambda e: (e[0], e[2]["run_id"], e[1]))
    here = sys.argv[2] if len(sys.argv) > 2 else __file__.rsplit("/", 1)[0]
    with open(f"{here}/events.jsonl", "w") as f:
        for _, _, ev in events:
            f.write(json.dumps(ev, ensure_ascii=False, separators=(",", ":")) + "\n")
    with open(f"{here}/labels.jsonl", "w") as f:
        for r in sorted(runs, key=lambda r: r.id):
            f.write(json.dumps({"run_id": r.id, "looping": r.looping, "kind": r.kind, "loop_start": r.loop_start, "evident_at": r.evident_at}) + "\n")
    print(f"{len(runs)} runs ({sum(r.looping for r in runs)} looping), {len(events)} events")


if __name__ == "__main__":
    main()
