#!/usr/bin/env python3
"""Generate the labeled corpus of the loop kinds eddy missed (issue 41), with their healthy
look-alikes: v1 events as JSONL + labels, in the format of tests/corpus.

Deterministic (fixed seed, stdlib only):   python3 tests/corpus_kinds/gen.py
Another seed, elsewhere:                   python3 tests/corpus_kinds/gen.py SEED OUTDIR

Every payload below is modelled on a real one, read in public issue threads and API docs (cited
per family), never on eddy's own output:

- monologue: three or more reasoning steps in a row that restate one plan in other words and
  call no tool (the MiMo-Code loop-thinking report, XiaomiMiMo/MiMo-Code#914: "Actually, I
  realize I should just start working ... Let me create a todo list" restated; opencode#15271
  "making changes only in thinking, not actually executing tool calls"; ai4s-research/
  open-science#121: an agent that "repeatedly reasoned that it should run essentially the same
  grep/diagnostic command again");
- context-window errors: the provider bodies as they are returned: OpenAI's
  `context_length_exceeded` ("This model's maximum context length is 128000 tokens. However, your
  messages resulted in ... tokens", ChatGPTNextWeb/NextChat#625), Anthropic's "prompt is too
  long: 208310 tokens > 200000 maximum" (anthropics/claude-code#12186), Gemini's "The input token
  count (1200293) exceeds the maximum number of tokens allowed (1048576)." with status
  INVALID_ARGUMENT (google-gemini/gemini-cli#6678), Bedrock's ValidationException "Input is too
  long for requested model." (aws-samples/bedrock-chat#95) and "The model returned the following
  errors: prompt is too long" (daisuke-awaji/moca#254); repeated unchanged, on prompts trimmed but
  still over, and read -> overflow -> condense -> read the same thing again;
- the same answer under changing response headers: GitHub's `ETag`, `Date`, `X-RateLimit-*`
  and `X-GitHub-Request-Id` (docs.github.com, rate limits for the REST API), OpenAI's
  `x-request-id`, `openai-processing-ms`, `x-ratelimit-remaining-*`, Cloudflare's `cf-ray`,
  S3's `x-amz-request-id` / `x-amz-id-2`, caches' `Age` / `X-Cache`, as a headers object or a
  `curl -i` dump;
- a permanent failure repeated while the arguments vary a little: Postgres' 42703 'column "x"
  does not exist' with its LINE/HINT (psycopg/psycopg#1200, brianc/node-postgres#2460), BigQuery's
  "Unrecognized name: x at [1:8]" / invalidQuery (googleapis/python-bigquery#104), IAM's
  AccessDeniedException "User: arn:... is not authorized to perform: s3:GetObject on resource:
  arn:... because no identity-based policy allows the s3:GetObject action" (grafana/
  athena-datasource#156), GCS's 403 "does not have storage.objects.get access", Stripe's
  invalid_request_error on a parameter.

Healthy look-alikes of each: reasoning that moves on, a plan listed step by step, one overflow
that a condensation fixes, rate limits (429 "tokens per min") that recover, pagination, polling
that resolves (a job status, `{"done": false}`, conditional requests answered 304 Not Modified),
retries that recover, batch lookups of entities that do not exist, batch copies where some
objects are denied, a schema error fixed after describing the table, edit -> error -> re-read
-> edit.

Labels: `loop_start` is the step where the repetition begins; `evident_at` the step at which a
careful reviewer would first call the run a loop: the third reasoning step restating the plan,
the third context-window failure (or compaction) with nothing new between (the second attempt
to recover has failed, as tests/corpus labels its compaction loops), the third call answered
with the same substance, the third failure of the same kind after the arguments were changed
twice.
"""
import json
import random
import sys
import uuid
from datetime import datetime, timedelta, timezone

R = random.Random(int(sys.argv[1]) if len(sys.argv) > 2 else 4141)
T0 = datetime(2026, 5, 11, 14, 0, 0, tzinfo=timezone.utc)

NOUNS = ("invoice ledger shipment tenant webhook cursor bucket replica partition schema "
         "migration dashboard quota token session cache index worker deploy manifest").split()


def rid():
    return str(uuid.UUID(int=R.getrandbits(128), version=4))


def hexs(n):
    return "".join(R.choice("0123456789abcdef") for _ in range(n))


def b64ish(n):
    return "".join(R.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") for _ in range(n))


def iso(dt):
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def http_date(dt):
    return dt.strftime("%a, %d %b %Y %H:%M:%S GMT")


def words(n):
    return " ".join(R.choice(NOUNS) for _ in range(n))


class Run:
    def __init__(self, name, agent, looping=False, kind="healthy", project="acme"):
        self.id = f"{name}-{R.randrange(16**6):06x}"
        self.agent, self.project = agent, project
        self.looping, self.kind = looping, kind
        self.loop_start = self.evident_at = None
        self.t = T0 + timedelta(seconds=R.randrange(0, 5400))
        self.i = 0
        self.ctx = R.randrange(3000, 9000)
        self.events = []
        self.epoch = R.random() < 0.5
        self._ev({"kind": "run_started", "agent_name": agent, "input": words(5)})

    def _ev(self, body):
        ts = int(self.t.timestamp() * 1000) if self.epoch else iso(self.t)
        ev = {"v": 1, "project_id": self.project, "run_id": self.id, "ts": ts}
        ev.update(body)
        self.events.append((self.t, len(self.events), ev))

    def mark(self):
        if self.loop_start is None:
            self.loop_start = self.i + 1

    def evident(self):
        if self.evident_at is None:
            self.evident_at = self.i + 1

    def step(self, step_type="tool_call", tool=None, inp=None, out=None, ok=None, content=None,
             ctx=None, grow=None, gap=None):
        self.i += 1
        self.t += timedelta(milliseconds=gap if gap is not None else R.randrange(400, 6000))
        if ctx is not None:
            self.ctx = ctx
        else:
            self.ctx = max(1500, self.ctx + (grow if grow is not None else R.randrange(150, 1800)))
        body = {"kind": "step", "step_index": self.i, "step_type": step_type,
                "tokens": R.randrange(80, 2500), "tokens_in_context": self.ctx}
        body["cost_usd"] = round(body["tokens"] * 2.5e-6, 6)
        if content is not None:
            body["content"] = content
        if tool is not None:
            body["tool_name"] = tool
            body["tool_input"] = inp if inp is not None else {}
            if out is not None:
                body["tool_output"] = out
            if ok is not None:
                body["tool_success"] = ok
            body["tool_latency_ms"] = R.randrange(15, 1500)
        self._ev(body)
        return self

    def think(self, text, step_type="think"):
        return self.step(step_type, content=text)

    def finish(self, status="completed", reason=None):
        self.t += timedelta(milliseconds=R.randrange(300, 3000))
        body = {"kind": "run_finished", "status": status}
        if reason:
            body["termination_reason"] = reason
        self._ev(body)
        return self


def work(r, n):
    """n ordinary steps that each bring something new."""
    for _ in range(n):
        c = R.random()
        if c < 0.3:
            p = f"services/{R.choice(NOUNS)}/{R.choice(NOUNS)}_{R.randrange(999)}.go"
            r.step(tool="read_file", inp={"path": p},
                   out={"content": f"package {R.choice(NOUNS)}\n\nfunc {R.choice(NOUNS).title()}() int {{ return {R.randrange(10**5)} }}\n"}, ok=True)
        elif c < 0.5:
            q = f"{R.choice(NOUNS)} {R.choice(NOUNS)}"
            r.step(tool="search_code", inp={"query": q},
                   out={"matches": [f"services/{R.choice(NOUNS)}.go:{R.randrange(1, 700)}: {q} {words(3)}" for _ in range(R.randrange(1, 4))]}, ok=True)
        elif c < 0.65:
            r.think(f"The {R.choice(NOUNS)} {R.choice(NOUNS)} looks right; next the {words(3)} path.")
        elif c < 0.85:
            p = f"services/{R.choice(NOUNS)}_{R.randrange(999)}.go"
            r.step(tool="edit_file", inp={"path": p, "old": words(3), "new": words(4)},
                   out={"ok": True, "lines_changed": R.randrange(1, 30)}, ok=True)
        else:
            r.step(tool="run_command", inp={"command": f"go test ./{R.choice(NOUNS)}/... -run {R.choice(NOUNS).title()}"},
                   out={"stdout": f"ok  \tacme/{R.choice(NOUNS)}\t{R.random():.3f}s", "exit_code": 0}, ok=True)


# ---------------------------------------------------------------- monologue

PLANS = [
    ("think", [
        "Actually, I realize I should just start working. The user said to execute, so they want me to proceed. Let me create a todo list and start executing.",
        "Actually, I think I should just start working now. The instruction was to execute. I'll create the todo list first and then begin.",
        "OK, the user asked me to execute, so I should stop deliberating and get going: make the todo list, then start on the first item.",
        "Right, no more planning: the request is to execute. First the todo list, then the work itself.",
        "Let me just begin. Since the user wants execution, I will write out the todo list and then start with item one.",
    ]),
    ("reasoning", [
        "The retry loop in payments/client.go ignores the context deadline, so the fix is to check ctx.Err() before each retry and return early.",
        "So the problem is that the payments client keeps retrying past the deadline; I need the retry loop to bail out once the context is done.",
        "In other words, retries in the payments client must respect the context timeout: test ctx.Err() at the top of every attempt.",
        "To fix it I'll make the payments client's retry loop stop when the context deadline has passed, by checking the context before retrying.",
        "The change belongs in the retry loop of the payments client: before another attempt, see whether the context deadline expired and return.",
    ]),
    ("thinking", [
        "I should run the grep for FEATURE_LEDGER_V2 again to confirm where the flag is read before I change the default.",
        "Before changing the default I want to confirm where FEATURE_LEDGER_V2 is read, so another grep for the flag makes sense.",
        "Let me search for FEATURE_LEDGER_V2 one more time to be sure which files read the flag; then I can flip the default.",
        "I need to double-check the places that read FEATURE_LEDGER_V2 with a grep before touching its default value.",
        "First, grep once more for the FEATURE_LEDGER_V2 flag so I know every reader, and only then change the default.",
    ]),
    ("think", [
        "Wait, the backfill has to run after the migration adds the tenant_id column, otherwise the UPDATE fails. So: migration first, then backfill.",
        "Hmm, order matters here: the tenant_id column must exist before the backfill runs, so the migration goes first and the backfill second.",
        "Let me reconsider the order. The backfill writes tenant_id, which the migration creates, so I run the migration and then the backfill.",
        "Wait. If the backfill runs before the migration, tenant_id doesn't exist yet. Migration, then backfill - that's the order.",
        "So again: apply the migration that creates tenant_id, and only after it the backfill that fills the column.",
    ]),
    ("reasoning", [
        "The dashboard shows stale numbers because the cache TTL is 24 hours; lowering the TTL for the revenue panel should make it refresh hourly.",
        "Stale revenue figures come from the day-long cache TTL. If I set that panel's TTL to an hour, it will refresh often enough.",
        "The root cause is the 24h cache on the revenue panel, so reducing its TTL to one hour fixes the staleness.",
        "Revenue panel is stale since its cache lives a whole day; an hourly TTL on that panel is the fix I'll make.",
        "Lowering the cache TTL of the revenue panel from 24 hours to 1 hour is what will stop the numbers from going stale.",
    ]),
]


def l_monologue(v):
    step_type, lines = PLANS[v % len(PLANS)]
    r = Run(f"loop-monologue-plan-{v}", "coder", looping=True, kind="content_repetition")
    work(r, R.randrange(2, 12))
    n = R.randrange(3, 6)
    r.mark()
    for k in range(n):
        if k == 2:
            r.evident()
        r.think(lines[k], step_type)
    if R.random() < 0.5:
        work(r, R.randrange(1, 3))
    return r.finish(status="failed" if v % 2 else "completed")


def h_reasoning_moves_on(v):
    """Reasoning steps in a row, each adding what the previous one did not know."""
    chains = [
        ["The test fails with a nil pointer in ledger.Close.",
         "Close is called twice: once by the handler and once by the deferred cleanup in main.go.",
         "Making Close idempotent with a sync.Once avoids the double close without touching the callers.",
         "I'll add the sync.Once to the Ledger struct and guard the file handle with it."],
        ["The webhook retries come from a 500 returned by the signature check.",
         "The signing secret rotated yesterday and the worker still has the old one in its environment.",
         "Reading the secret from the secrets manager at startup instead of the env var removes the drift.",
         "Then a redeploy of the webhook worker picks up the current secret."],
        ["Quota errors started at 09:12, right after the tenant import job began.",
         "The import batches 5000 rows per request, above the 1000-row API limit.",
         "Splitting the batches to 1000 rows keeps each request under the quota."],
    ]
    r = Run(f"healthy-reasoning-moves-on-{v}", "coder")
    work(r, R.randrange(2, 8))
    for line in chains[v % len(chains)]:
        r.think(line, ["think", "reasoning", "thinking"][v % 3])
    work(r, R.randrange(2, 6))
    return r.finish()


def h_plan_listed(v):
    """A plan written out step by step: each step a different task."""
    plans = [
        ["Step 1: read the migration files to see which tables change.",
         "Step 2: check the staging replica lag before applying anything.",
         "Step 3: apply the migration on staging and run the integration tests.",
         "Step 4: write the rollback notes for the on-call engineer."],
        ["First, list the S3 buckets the export job writes to.",
         "Second, compare their lifecycle rules with the retention policy in the wiki.",
         "Third, open a ticket for any bucket that keeps data longer than 90 days."],
    ]
    r = Run(f"healthy-plan-listed-{v}", "ops-agent")
    work(r, R.randrange(1, 5))
    for line in plans[v % len(plans)]:
        r.think(line, "plan" if v % 2 else "think")
    work(r, R.randrange(3, 7))
    return r.finish()


def h_restate_between_tools(v):
    """The same plan restated, but each time after a tool call that brought something new."""
    r = Run(f"healthy-restate-between-tools-{v}", "coder")
    work(r, 2)
    for k in range(3):
        r.think("The retry loop in the payments client should stop once the context deadline has passed.")
        r.step(tool="read_file", inp={"path": f"payments/client_{k}.go"},
               out={"content": f"func attempt{k}(ctx context.Context) error {{ return send(ctx, {R.randrange(999)}) }}"}, ok=True)
    work(r, 3)
    return r.finish()


# ---------------------------------------------------------------- context-window errors

def openai_overflow(limit, got):
    return {"error": {"message": f"This model's maximum context length is {limit} tokens. However, your messages resulted in {got} tokens. Please reduce the length of the messages.",
                      "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}


def anthropic_overflow(got, limit=200000):
    return {"type": "error", "error": {"type": "invalid_request_error", "message": f"prompt is too long: {got} tokens > {limit} maximum"},
            "request_id": f"req_011C{b64ish(20).replace('+', 'x').replace('/', 'y')}"}


def gemini_overflow(got, limit=1048576):
    msg = f"The input token count ({got}) exceeds the maximum number of tokens allowed ({limit})."
    return {"error": {"code": 400, "message": msg, "errors": [{"message": msg, "domain": "global", "reason": "badRequest"}], "status": "INVALID_ARGUMENT"}}


def bedrock_overflow():
    return {"errorType": "ValidationException", "errorMessage": "Input is too long for requested model.", "name": "ValidationException",
            "$fault": "client", "$metadata": {"httpStatusCode": 400, "requestId": rid(), "attempts": 1, "totalRetryDelay": 0}}


def overflow(v, got):
    return [lambda: openai_overflow(128000, got), lambda: anthropic_overflow(got), lambda: gemini_overflow(got), bedrock_overflow][v % 4]()


def llm_fail(r, v, got, msgs):
    """A failed model call: as a tool the agent framework reports, or as an error step."""
    body = overflow(v, got)
    if v % 3 == 2:
        r.step("error", content=json.dumps(body), ctx=got)
    else:
        r.step(tool=["chat_completion", "invoke_model", "llm_call"][v % 3], inp={"model": ["gpt-4o", "claude-sonnet-4", "gemini-2.5-pro", "anthropic.claude-3-5-sonnet"][v % 4], "messages": msgs},
               out=body, ok=False, ctx=got)


def l_context_repeat(v):
    """The same over-long request retried unchanged."""
    r = Run(f"loop-context-repeat-{v}", "research-agent", looping=True, kind="context_pressure")
    work(r, R.randrange(3, 10))
    got = R.randrange(131000, 1300000) if v % 4 == 2 else R.randrange(129000, 240000)
    r.mark()
    for k in range(R.randrange(3, 6)):
        if k == 2:
            r.evident()
        llm_fail(r, v, got, 214)
        if v % 2 == 1:
            r.think("The request failed, retrying the same call.")
    return r.finish(status="failed", reason="context_limit" if v % 2 else None)


def l_context_trimmed(v):
    """context_length_exceeded on prompts trimmed a little each time, still over."""
    r = Run(f"loop-context-trimmed-{v}", "coder", looping=True, kind="context_pressure")
    work(r, R.randrange(3, 10))
    limit = [128000, 200000, 1048576, 200000][v % 4]
    got = int(limit * R.uniform(1.03, 1.12))
    msgs = 180
    r.mark()
    for k in range(R.randrange(3, 6)):
        if k == 2:
            r.evident()
        llm_fail(r, v, got, msgs)
        got -= R.randrange(800, 3500)
        msgs -= 2
        r.think(["Dropping the two oldest tool results and retrying.", "Trimming the history a little before the next call."][v % 2])
    return r.finish(status="failed", reason="context_limit")


def l_context_condense(v):
    """read -> overflow -> condense -> read the same thing again."""
    r = Run(f"loop-context-condense-{v}", "coder", looping=True, kind="context_pressure")
    work(r, R.randrange(3, 8))
    path = ["logs/ingest-2026-05-10.log", "dumps/heap-profile.txt", "data/export_full.csv"][v % 3]
    content = {"content": "2026-05-10T03:12:44Z ERROR ingest: batch rejected: quota exceeded for tenant t_4411\n" * 60}
    limit = [128000, 200000, 200000][v % 3]
    r.mark()
    for k in range(R.randrange(2, 4)):
        r.step(tool="read_file", inp={"path": path}, out=content, ok=True, ctx=int(limit * 0.92))
        if k == 1:
            r.evident()
        llm_fail(r, v, int(limit * R.uniform(1.01, 1.06)), 120)
        summary = f"Summary of the conversation so far ({k + 1}): the user wants the cause of the failing ingest; the log {path} was being read."
        if v % 2 == 0:
            r.step(["condensation", "compaction", "context_condensed"][v % 3], content=summary, ctx=int(limit * 0.35))
        else:
            r.step(tool="summarize_conversation", inp={"keep_last": 4}, out={"summary": summary, "tokens_after": int(limit * 0.35)}, ok=True, ctx=int(limit * 0.35))
    return r.finish(status="failed", reason="context_limit")


def h_condense_fixes(v):
    """One overflow, a condensation, then the work continues and the next calls fit."""
    r = Run(f"healthy-condense-fixes-{v}", "coder")
    work(r, R.randrange(4, 10))
    llm_fail(r, v, 131200 if v % 4 == 0 else 204100, 150)
    if v % 2 == 0:
        r.step("condensation", content="Summary: the ledger bug is a double close; the fix is drafted in ledger.go.", ctx=42000)
    else:
        r.step(tool="summarize_conversation", inp={"keep_last": 6}, out={"summary": "the ledger bug is a double close", "tokens_after": 42000}, ok=True, ctx=42000)
    work(r, R.randrange(4, 9))
    return r.finish()


def h_long_session_compacts(v):
    """A long session compacting now and then, with new work between compactions."""
    r = Run(f"healthy-long-session-compacts-{v}", "coder")
    for c in range(3):
        work(r, R.randrange(8, 14))
        r.step("compaction", content=f"Conversation compacted ({c + 1}): {words(8)}.", ctx=R.randrange(30000, 50000))
    work(r, 4)
    return r.finish()


def h_tpm_rate_limit(v):
    """OpenAI's 'Request too large ... tokens per min (TPM)' is a rate limit: it waits and succeeds."""
    r = Run(f"healthy-tpm-rate-limit-{v}", "research-agent")
    work(r, R.randrange(2, 6))
    for k in range(2 + v % 2):
        r.step(tool="chat_completion", inp={"model": "gpt-4o", "messages": 40},
               out={"error": {"message": f"Request too large for gpt-4o in organization org-{b64ish(24)} on tokens per min (TPM): Limit 30000, Requested {R.randrange(31000, 45000)}. The input or output tokens must be reduced in order to run successfully.",
                              "type": "tokens", "param": None, "code": "rate_limit_exceeded"}}, ok=False)
        r.step(tool="sleep", inp={"seconds": 20 * (k + 1)}, out={"slept": 20 * (k + 1)}, ok=True)
    r.step(tool="chat_completion", inp={"model": "gpt-4o", "messages": 40}, out={"choices": [{"message": {"content": words(12)}}]}, ok=True)
    work(r, R.randrange(2, 5))
    return r.finish()


def h_trim_then_fits(v):
    """Trimmed after an overflow, and the trimmed prompt fits."""
    r = Run(f"healthy-trim-then-fits-{v}", "coder")
    work(r, R.randrange(3, 8))
    llm_fail(r, v, 206000, 160)
    r.think("Dropping the large log output from the history before retrying.")
    r.step(tool="llm_call", inp={"model": "claude-sonnet-4", "messages": 120}, out={"content": words(15), "stop_reason": "end_turn"}, ok=True, ctx=150000)
    work(r, R.randrange(3, 7))
    return r.finish()


# ---------------------------------------------------------------- the same answer under changing headers

ISSUES = [{"number": 4411, "title": "Ledger close called twice", "state": "open", "labels": ["bug"]},
          {"number": 4409, "title": "Webhook signature rejected after rotation", "state": "open", "labels": ["p1"]}]


def gh_headers(r, remaining, etag=None):
    return {"Date": http_date(r.t), "Content-Type": "application/json; charset=utf-8",
            "Cache-Control": "private, max-age=60, s-maxage=60", "Vary": "Accept, Authorization, Cookie, X-GitHub-OTP",
            "ETag": etag or f'W/"{hexs(64)}"', "X-GitHub-Media-Type": "github.v3; format=json",
            "X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": str(remaining), "X-RateLimit-Reset": str(int(r.t.timestamp()) + 3000),
            "X-RateLimit-Used": str(5000 - remaining), "X-RateLimit-Resource": "core",
            "X-GitHub-Request-Id": f"{hexs(4).upper()}:{hexs(5).upper()}:{hexs(7).upper()}:{hexs(8).upper()}:{hexs(8).upper()}"}


def openai_headers(r, rem_req, rem_tok):
    return {"date": http_date(r.t), "content-type": "application/json", "openai-organization": "acme-prod",
            "openai-processing-ms": str(R.randrange(180, 2400)), "openai-version": "2020-10-01",
            "x-ratelimit-limit-requests": "10000", "x-ratelimit-limit-tokens": "2000000",
            "x-ratelimit-remaining-requests": str(rem_req), "x-ratelimit-remaining-tokens": str(rem_tok),
            "x-ratelimit-reset-requests": f"{R.randrange(6, 60)}ms", "x-ratelimit-reset-tokens": f"{R.randrange(1, 40)}ms",
            "x-request-id": f"req_{hexs(32)}", "cf-ray": f"{hexs(16)}-{R.choice(['SJC', 'IAD', 'FRA', 'AMS'])}",
            "cf-cache-status": "DYNAMIC"}


def s3_headers(r):
    return {"x-amz-id-2": b64ish(76), "x-amz-request-id": hexs(16).upper(), "Date": http_date(r.t),
            "Last-Modified": "Sun, 10 May 2026 23:14:02 GMT", "ETag": '"6805f2cfc46c0f04559748bb039d69ae"',
            "Content-Type": "text/csv", "Content-Length": "48213", "Server": "AmazonS3",
            "Age": str(R.randrange(0, 600)), "X-Cache": R.choice(["Hit from cloudfront", "Miss from cloudfront"]),
            "X-Amz-Cf-Id": b64ish(56)}


def curl_dump(r, remaining, body):
    return (f"HTTP/2 200\nserver: GitHub.com\ndate: {http_date(r.t)}\ncontent-type: application/json; charset=utf-8\n"
            f"etag: W/\"{hexs(64)}\"\nx-github-media-type: github.v3; format=json\nx-ratelimit-limit: 5000\n"
            f"x-ratelimit-remaining: {remaining}\nx-ratelimit-reset: {int(r.t.timestamp()) + 3000}\nx-ratelimit-used: {5000 - remaining}\n"
            f"x-ratelimit-resource: core\nx-github-request-id: {hexs(4).upper()}:{hexs(5).upper()}:{hexs(7).upper()}:{hexs(8).upper()}\n\n"
            + json.dumps(body))


def header_answer(r, v, k, remaining):
    if v % 5 == 0:
        return "http_request", {"method": "GET", "url": "https://api.github.com/repos/acme/ledger/issues?state=open&labels=bug"}, \
            {"status": 200, "headers": gh_headers(r, remaining), "body": ISSUES}
    if v % 5 == 1:
        return "openai_chat", {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Classify ticket 4411: Ledger close called twice"}]}, \
            {"status_code": 200, "headers": openai_headers(r, 9999 - k, 1999000 - 350 * k),
             "json": {"object": "chat.completion", "model": "gpt-4o-mini-2024-07-18", "choices": [{"index": 0, "message": {"role": "assistant", "content": "bug"}, "finish_reason": "stop"}]}}
    if v % 5 == 2:
        return "bash", {"command": "curl -si -H 'Authorization: Bearer $GH_TOKEN' https://api.github.com/repos/acme/ledger/pulls/812"}, \
            {"stdout": curl_dump(r, remaining, {"number": 812, "state": "open", "mergeable_state": "blocked", "draft": False}), "exit_code": 0}
    if v % 5 == 3:
        return "s3_get_object", {"Bucket": "acme-exports", "Key": "2026/05/tenants.csv"}, \
            {"ResponseMetadata": {"HTTPStatusCode": 200, "HTTPHeaders": s3_headers(r), "RetryAttempts": 0},
             "ContentLength": 48213, "ContentType": "text/csv", "Body": "tenant_id,plan\nt_4411,team\nt_4412,pro\n"}
    return "fetch", {"url": "https://status.example.com/api/v2/components.json"}, \
        {"status": 200, "headers": {"date": http_date(r.t), "age": str(R.randrange(0, 300)), "x-cache": R.choice(["HIT", "MISS"]),
                                    "x-served-by": f"cache-{R.choice(['fra', 'iad', 'sjc'])}{R.randrange(10000, 99999)}-{R.choice(['FRA', 'IAD', 'SJC'])}",
                                    "x-timer": f"S{int(r.t.timestamp())}.{R.randrange(10**6):06d},VS0,VE{R.randrange(1, 90)}",
                                    "request-id": rid(), "etag": f'"{hexs(32)}"'},
         "body": {"components": [{"name": "API", "status": "major_outage"}, {"name": "Dashboard", "status": "operational"}]}}


def l_headers(v):
    r = Run(f"loop-headers-same-substance-{v}", ["triage-agent", "ops-agent", "release-agent", "data-agent", "status-agent"][v % 5],
            looping=True, kind="repeated_operation")
    work(r, R.randrange(2, 10))
    remaining = R.randrange(3000, 4990)
    r.mark()
    for k in range(R.randrange(4, 7)):
        if k == 2:
            r.evident()
        tool, inp, out = header_answer(r, v, k, remaining)
        remaining -= R.randrange(1, 4)
        r.step(tool=tool, inp=inp, out=out, ok=True)
        if v >= 5 and k % 2 == 0:
            r.think("Same answer as before; let me fetch it again to be sure.")
    return r.finish()


def h_pagination_headers(v):
    """Pages of one listing: the body and the Link header move on every call."""
    r = Run(f"healthy-pagination-headers-{v}", "triage-agent")
    work(r, 2)
    remaining = 4800
    pages = R.randrange(4, 8)
    for p in range(1, pages + 1):
        h = gh_headers(r, remaining)
        h["Link"] = f'<https://api.github.com/repos/acme/ledger/issues?page={p + 1}>; rel="next", <https://api.github.com/repos/acme/ledger/issues?page={pages}>; rel="last"'
        body = [{"number": 4000 + 30 * p + i, "title": f"{words(4)}", "state": "open"} for i in range(3)]
        r.step(tool="http_request", inp={"method": "GET", "url": f"https://api.github.com/repos/acme/ledger/issues?state=open&page={p}"},
               out={"status": 200, "headers": h, "body": body}, ok=True)
        remaining -= 1
    work(r, 2)
    return r.finish()


def h_conditional_poll(v):
    """Polling with If-None-Match: 304 Not Modified until the resource changes, then 200."""
    r = Run(f"healthy-conditional-poll-{v}", "release-agent")
    work(r, 2)
    etag = f'W/"{hexs(40)}"'
    remaining = 4700
    for k in range(R.randrange(3, 7)):
        h = gh_headers(r, remaining, etag)
        h["X-Poll-Interval"] = "60"
        if v % 2 == 0:
            r.step(tool="http_request", inp={"method": "GET", "url": "https://api.github.com/repos/acme/ledger/actions/runs/9911",
                                             "headers": {"If-None-Match": etag}}, out={"status": 304, "headers": h, "body": None}, ok=True, gap=60000)
        else:
            r.step(tool="bash", inp={"command": f"curl -si -H 'If-None-Match: {etag}' https://api.github.com/repos/acme/ledger/actions/runs/9911"},
                   out={"stdout": f"HTTP/2 304\nserver: GitHub.com\ndate: {http_date(r.t)}\netag: {etag}\nx-ratelimit-remaining: {remaining}\nx-github-request-id: {hexs(4).upper()}:{hexs(6).upper()}\n\n", "exit_code": 0},
                   ok=True, gap=60000)
        remaining -= 1
    r.step(tool="http_request", inp={"method": "GET", "url": "https://api.github.com/repos/acme/ledger/actions/runs/9911"},
           out={"status": 200, "headers": gh_headers(r, remaining), "body": {"id": 9911, "status": "completed", "conclusion": "success"}}, ok=True)
    work(r, 3)
    return r.finish()


def h_status_poll_headers(v):
    """A status page polled while an incident is being resolved: the body moves."""
    r = Run(f"healthy-status-poll-headers-{v}", "status-agent")
    work(r, 2)
    states = ["major_outage", "major_outage", "partial_outage", "degraded_performance", "operational"]
    for s in states[v % 2:]:
        r.step(tool="fetch", inp={"url": "https://status.example.com/api/v2/components.json"},
               out={"status": 200, "headers": {"date": http_date(r.t), "age": str(R.randrange(0, 300)), "x-cache": "MISS", "request-id": rid()},
                    "body": {"components": [{"name": "API", "status": s}], "incident": {"id": "inc_77", "status": "investigating" if s != "operational" else "resolved"}}},
               ok=True, gap=120000)
    work(r, 2)
    return r.finish()


def h_verify_after_write(v):
    """A read, a write, the same read again to verify: twice, not three times."""
    r = Run(f"healthy-verify-after-write-{v}", "data-agent")
    work(r, 3)
    tool, inp, out = header_answer(r, 3, 0, 4000)
    r.step(tool=tool, inp=inp, out=out, ok=True)
    r.step(tool="s3_put_object", inp={"Bucket": "acme-exports", "Key": "2026/05/tenants.csv.bak", "Body": "tenant_id,plan\n"}, out={"ETag": f'"{hexs(32)}"'}, ok=True)
    tool, inp, out = header_answer(r, 3, 1, 3999)
    r.step(tool=tool, inp=inp, out=out, ok=True)
    work(r, 4)
    return r.finish()


# ---------------------------------------------------------------- permanent failure, arguments varying a little

PG_TRIES = ["SELECT user_id, count(*) FROM orders GROUP BY user_id",
            "SELECT userid, count(*) FROM orders GROUP BY userid",
            "SELECT o.user_id, count(*) FROM orders o GROUP BY o.user_id",
            "SELECT \"userId\", count(*) FROM orders GROUP BY \"userId\"",
            "SELECT orders.user_id, count(*) AS n FROM orders GROUP BY orders.user_id"]


def pg_error(sql):
    col = {0: "user_id", 1: "userid", 2: "o.user_id", 3: "userId", 4: "orders.user_id"}[PG_TRIES.index(sql)]
    pos = sql.index(col.split(".")[-1]) + 1
    return {"error": f'column "{col}" does not exist', "sqlstate": "42703", "position": pos,
            "detail": f"LINE 1: {sql[:60]}\n{' ' * (pos + 7)}^", "hint": 'Perhaps you meant to reference the column "orders.customer_id".'}


BQ_TRIES = ["SELECT signup_date, COUNT(*) FROM `acme.analytics.users` GROUP BY signup_date",
            "SELECT signupDate, COUNT(*) FROM `acme.analytics.users` GROUP BY signupDate",
            "SELECT DATE(signup_ts), COUNT(*) FROM `acme.analytics.users` GROUP BY 1",
            "SELECT signup_day, COUNT(*) AS n FROM `acme.analytics.users` GROUP BY signup_day",
            "SELECT u.signup_date, COUNT(*) FROM `acme.analytics.users` u GROUP BY 1"]


def bq_error(sql):
    name = {0: "signup_date", 1: "signupDate", 2: "signup_ts", 3: "signup_day", 4: "u.signup_date"}[BQ_TRIES.index(sql)]
    msg = f"Unrecognized name: {name} at [1:{sql.index(name.split('.')[-1]) + 1}]"
    return {"error": {"code": 400, "message": msg, "errors": [{"message": msg, "domain": "global", "reason": "invalidQuery",
                                                               "location": "q", "locationType": "parameter"}], "status": "INVALID_ARGUMENT"}}


S3_KEYS = ["reports/2026/q1/summary.csv", "reports/2026/Q1/summary.csv", "/reports/2026/q1/summary.csv",
           "reports/2026/q1/summary.csv.gz", "reports//2026/q1/summary.csv"]


def iam_error(key):
    return {"error": f"An error occurred (AccessDeniedException) when calling the GetObject operation: User: arn:aws:sts::612888738066:assumed-role/agent-runner/i-02aed2dd2308aa610 is not authorized to perform: s3:GetObject on resource: arn:aws:s3:::acme-finance/{key.lstrip('/')} because no identity-based policy allows the s3:GetObject action",
            "code": "AccessDeniedException", "http_status": 403, "request_id": rid()}


GCS_OBJECTS = ["exports/tenants-2026-05.parquet", "exports/tenants_2026_05.parquet", "exports/2026-05/tenants.parquet",
               "export/tenants-2026-05.parquet", "exports/tenants-2026-05.parquet.gz"]


def gcs_error(obj):
    return {"error": {"code": 403, "message": f"agent-runner@acme-prod.iam.gserviceaccount.com does not have storage.objects.get access to the Google Cloud Storage object. Permission 'storage.objects.get' denied on resource (or it may not exist).",
                      "errors": [{"message": f"agent-runner@acme-prod.iam.gserviceaccount.com does not have storage.objects.get access to the Google Cloud Storage object gs://acme-lake/{obj}.", "domain": "global", "reason": "forbidden"}]}}


AMOUNTS = ["12.00", "12,00", "1200.0", "12.0", "\"1200\""]


def stripe_error(amount):
    return {"error": {"code": "parameter_invalid_integer", "doc_url": "https://stripe.com/docs/error-codes/parameter-invalid-integer",
                      "message": f"Invalid integer: {amount}", "param": "amount", "request_log_url": f"https://dashboard.stripe.com/test/logs/req_{b64ish(14).replace('+', 'a').replace('/', 'b')}",
                      "type": "invalid_request_error"}}


def permanent_try(v, k):
    if v % 5 == 0:
        sql = PG_TRIES[k % len(PG_TRIES)]
        return "run_sql", {"database": "shop", "sql": sql}, pg_error(sql)
    if v % 5 == 1:
        sql = BQ_TRIES[k % len(BQ_TRIES)]
        return "bigquery_query", {"project": "acme", "query": sql, "use_legacy_sql": False}, bq_error(sql)
    if v % 5 == 2:
        key = S3_KEYS[k % len(S3_KEYS)]
        return "s3_get_object", {"bucket": "acme-finance", "key": key}, iam_error(key)
    if v % 5 == 3:
        obj = GCS_OBJECTS[k % len(GCS_OBJECTS)]
        return "gcs_read", {"bucket": "acme-lake", "object": obj}, gcs_error(obj)
    amount = AMOUNTS[k % len(AMOUNTS)]
    return "stripe_create_invoice_item", {"customer": "cus_Q4411", "amount": amount, "currency": "eur", "description": "May usage"}, stripe_error(amount)


def l_permanent_varying(v):
    r = Run(f"loop-permanent-varying-{v}", ["analyst", "analyst", "finance-agent", "data-agent", "billing-agent"][v % 5],
            looping=True, kind="repeated_failure")
    work(r, R.randrange(2, 10))
    r.mark()
    for k in range(R.randrange(3, 6)):
        if k == 2:
            r.evident()
        tool, inp, out = permanent_try(v, k)
        r.step(tool=tool, inp=inp, out=out, ok=False)
        if v >= 5:
            r.think(["That column name is wrong, trying another spelling.", "Still failing, adjusting the arguments."][v % 2])
    return r.finish(status="failed")


def h_schema_fixed(v):
    """A schema error, a look at the table, then the corrected query works."""
    r = Run(f"healthy-schema-fixed-{v}", "analyst")
    work(r, R.randrange(2, 6))
    tool, inp, out = permanent_try(0 if v % 2 == 0 else 1, 0)
    r.step(tool=tool, inp=inp, out=out, ok=False)
    if v % 2 == 0:
        r.step(tool="run_sql", inp={"database": "shop", "sql": "SELECT column_name FROM information_schema.columns WHERE table_name = 'orders'"},
               out={"rows": [["id"], ["customer_id"], ["amount"], ["created_at"]]}, ok=True)
        r.step(tool="run_sql", inp={"database": "shop", "sql": "SELECT customer_id, count(*) FROM orders GROUP BY customer_id"},
               out={"rows": [[R.randrange(100, 999), R.randrange(1, 40)] for _ in range(4)]}, ok=True)
    else:
        r.step(tool="bigquery_get_table", inp={"table": "acme.analytics.users"}, out={"schema": {"fields": [{"name": "id"}, {"name": "created_date"}, {"name": "plan"}]}}, ok=True)
        r.step(tool="bigquery_query", inp={"project": "acme", "query": "SELECT created_date, COUNT(*) FROM `acme.analytics.users` GROUP BY created_date", "use_legacy_sql": False},
               out={"rows": [[f"2026-05-0{d}", R.randrange(10, 99)] for d in range(1, 5)], "totalRows": "4"}, ok=True)
    work(r, R.randrange(2, 6))
    return r.finish()


def h_access_granted(v):
    """Access denied, a role assumed, then the same read succeeds."""
    r = Run(f"healthy-access-granted-{v}", "finance-agent")
    work(r, R.randrange(2, 6))
    tool, inp, out = permanent_try(2 if v % 2 == 0 else 3, 0)
    r.step(tool=tool, inp=inp, out=out, ok=False)
    if v % 2 == 0:
        r.step(tool="sts_assume_role", inp={"role_arn": "arn:aws:iam::612888738066:role/finance-reader", "session": f"agent-{R.randrange(999)}"},
               out={"AssumedRoleUser": {"Arn": "arn:aws:sts::612888738066:assumed-role/finance-reader/agent"}, "Expiration": iso(r.t + timedelta(hours=1))}, ok=True)
    else:
        r.step(tool="request_access", inp={"resource": "gs://acme-lake/exports", "role": "roles/storage.objectViewer"}, out={"granted": True}, ok=True)
    r.step(tool=tool, inp=inp, out={"Body": "tenant_id,plan\nt_1,pro\n", "ContentLength": 22}, ok=True)
    work(r, R.randrange(2, 6))
    return r.finish()


def h_batch_lookup_missing(v):
    """Lookups of different entities, several in a row not found: a batch, not a loop."""
    r = Run(f"healthy-batch-lookup-missing-{v}", "support-agent")
    work(r, 2)
    for k in range(R.randrange(8, 14)):
        cid = f"cus_{b64ish(10).replace('+', 'k').replace('/', 'z')}"
        if R.random() < 0.55:
            r.step(tool="stripe_get_customer", inp={"customer": cid},
                   out={"error": {"code": "resource_missing", "message": f"No such customer: '{cid}'", "param": "id", "type": "invalid_request_error"}}, ok=False)
        else:
            r.step(tool="stripe_get_customer", inp={"customer": cid}, out={"id": cid, "email": f"{R.choice(NOUNS)}@example.com", "delinquent": False}, ok=True)
    r.think("Collected which customers exist; writing the reconciliation note.")
    r.step(tool="write_file", inp={"path": "reconcile.md", "content": words(20)}, out={"ok": True}, ok=True)
    return r.finish()


def h_batch_copy_denied(v):
    """A batch copy over distinct objects; some are denied, the others copy."""
    r = Run(f"healthy-batch-copy-denied-{v}", "data-agent")
    work(r, 2)
    teams = ["payments", "search", "ledger", "growth", "infra", "support", "mobile", "web", "sre", "data"]
    R.shuffle(teams)
    for k, team in enumerate(teams[: R.randrange(7, 10)]):
        key = f"{team}/2026-05/usage.csv"
        if k % 3 == 1 or (v % 2 == 0 and k % 3 == 2):
            r.step(tool="s3_copy_object", inp={"source": f"acme-teams/{key}", "dest": f"acme-finance/usage/{team}.csv"},
                   out={"error": "An error occurred (AccessDenied) when calling the CopyObject operation: Access Denied", "code": "AccessDenied", "http_status": 403, "request_id": hexs(16).upper()}, ok=False)
        else:
            r.step(tool="s3_copy_object", inp={"source": f"acme-teams/{key}", "dest": f"acme-finance/usage/{team}.csv"},
                   out={"CopyObjectResult": {"ETag": f'"{hexs(32)}"', "LastModified": iso(r.t)}}, ok=True)
    r.think("Copied what was readable; the denied teams go into the access request.")
    r.step(tool="create_ticket", inp={"title": "Read access to team usage exports", "body": words(12)}, out={"id": f"OPS-{R.randrange(1000, 9999)}"}, ok=True)
    return r.finish()


def h_poll_done_flag(v):
    """An async job polled through a done flag: identical answers while it runs, then done."""
    r = Run(f"healthy-poll-done-flag-{v}", "ml-agent")
    work(r, 2)
    op = f"operations/{R.randrange(10**9)}"
    r.step(tool="start_training", inp={"dataset": "tickets-2026-05", "epochs": 3}, out={"name": op, "done": False}, ok=True)
    for _ in range(R.randrange(3, 7)):
        out = {"name": op, "done": False} if v % 2 == 0 else {"name": op, "metadata": {"@type": "type.googleapis.com/TrainingMetadata"}, "done": False}
        r.step(tool="get_operation", inp={"name": op}, out=out, ok=True, gap=R.randrange(20000, 90000))
    r.step(tool="get_operation", inp={"name": op}, out={"name": op, "done": True, "response": {"model": f"models/{R.randrange(10**6)}"}}, ok=True)
    work(r, 3)
    return r.finish()


def h_retry_recovers(v):
    r = Run(f"healthy-retry-recovers-{v}", "api-agent")
    work(r, 2)
    for k in range(2 + v % 3):
        r.step(tool="http_request", inp={"method": "POST", "url": "https://api.example.com/v1/exports"},
               out={"status": 503, "headers": {"retry-after": str(2 ** k), "date": http_date(r.t), "x-request-id": rid()}, "body": {"error": "Service Unavailable"}}, ok=False)
    r.step(tool="http_request", inp={"method": "POST", "url": "https://api.example.com/v1/exports"},
           out={"status": 202, "headers": {"date": http_date(r.t), "x-request-id": rid()}, "body": {"export_id": f"exp_{hexs(10)}"}}, ok=True)
    work(r, 3)
    return r.finish()


def h_edit_reread(v):
    """edit -> error -> re-read -> a different edit, until one applies."""
    r = Run(f"healthy-edit-reread-{v}", "coder")
    work(r, 2)
    path = f"services/ledger/close_{v}.go"
    body = "func (l *Ledger) Close() error {\n\treturn l.f.Close()\n}\n"
    r.step(tool="read_file", inp={"path": path}, out={"content": body}, ok=True)
    for a in range(1 + v % 2):
        r.step(tool="str_replace", inp={"path": path, "old_str": ["return l.file.Close()", "l.f.Close() // close"][a], "new_str": "return l.once.Do(l.close)"},
               out={"error": f"No match found for old_str in {path}. Re-read the file and try again."}, ok=False)
        r.step(tool="read_file", inp={"path": path}, out={"content": body}, ok=True)
    r.step(tool="str_replace", inp={"path": path, "old_str": "return l.f.Close()", "new_str": "return l.closeOnce()"}, out={"ok": True}, ok=True)
    work(r, 3)
    return r.finish()


LOOPING = [(l_monologue, 8), (l_context_repeat, 4), (l_context_trimmed, 4), (l_context_condense, 4),
           (l_headers, 8), (l_permanent_varying, 8)]
HEALTHY = [(h_reasoning_moves_on, 3), (h_plan_listed, 2), (h_restate_between_tools, 2),
           (h_condense_fixes, 4), (h_long_session_compacts, 2), (h_tpm_rate_limit, 2), (h_trim_then_fits, 3),
           (h_pagination_headers, 3), (h_conditional_poll, 4), (h_status_poll_headers, 2), (h_verify_after_write, 2),
           (h_schema_fixed, 2), (h_access_granted, 2), (h_batch_lookup_missing, 3), (h_batch_copy_denied, 3),
           (h_poll_done_flag, 3), (h_retry_recovers, 3), (h_edit_reread, 2)]


def main():
    runs = [fam(v) for fam, n in LOOPING + HEALTHY for v in range(n)]
    events = sorted((e for r in runs for e in r.events), key=lambda e: (e[0], e[2]["run_id"], e[1]))
    here = sys.argv[2] if len(sys.argv) > 2 else __file__.rsplit("/", 1)[0]
    with open(f"{here}/events.jsonl", "w") as f:
        for _, _, ev in events:
            f.write(json.dumps(ev, ensure_ascii=False, separators=(",", ":")) + "\n")
    with open(f"{here}/labels.jsonl", "w") as f:
        for r in sorted(runs, key=lambda r: r.id):
            f.write(json.dumps({"run_id": r.id, "looping": r.looping, "kind": r.kind,
                                "loop_start": r.loop_start, "evident_at": r.evident_at}) + "\n")
    print(f"{len(runs)} runs ({sum(r.looping for r in runs)} looping), {len(events)} events")


if __name__ == "__main__":
    main()
