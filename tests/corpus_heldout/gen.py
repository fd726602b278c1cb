#!/usr/bin/env python3
"""Held-out labeled corpus for eddy's detectors, written independently of tests/corpus.

Deterministic (fixed seed, stdlib only):  python3 tests/corpus_heldout/gen.py [SEED [OUTDIR]]
Writes events.jsonl (all runs interleaved by event time) and labels.jsonl (one line per run:
run_id, looping, kind, loop_start, evident_at) in the same format as tests/corpus.

The traces imitate what real agent frameworks emit: a coding agent (Claude Code / OpenHands
style: bash, str_replace_editor, view, grep, pytest), a browser agent, a SQL/data agent, a
research agent, a customer-support agent calling HTTP APIs, RL rollout workers with terse tool
names, and multi-agent crews with `agent`/`caller`. Tool outputs are shaped like the real ones:
bash output as one string with exit codes, Python tracebacks, HTTP error bodies, OpenHands'
"No replacement was performed" message, kubectl tables, and so on.

Labels: `loop_start` is the step_index of the first step of the first repeated round (the first
call that the loop then repeats), `null` for healthy runs. `evident_at` is the step at which a
careful reviewer would first call the run a loop: the third identical call with an identical
result, the second identical permanent failure, the first retryable failure past a five-attempt
retry budget, the last step of a cycle's second round (one full repetition of its body), the
chanting message itself. `kind` names the detector family a human reviewer would expect to
catch it; the pooled score does not depend on it.
"""
import json
import random
import sys
from datetime import datetime, timedelta, timezone

SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 77031
R = random.Random(SEED)
T0 = datetime(2026, 5, 11, 14, 0, 0, tzinfo=timezone.utc)

NOUNS = ("ledger invoice tenant shipment widget payout account webhook scheduler cursor "
         "batch region bucket artifact manifest gateway session quota profile catalog "
         "vendor coupon warehouse pipeline snapshot replica consumer partition").split()
VERBS = ("load parse merge validate render sync flush resolve compute normalise "
         "serialise fetch dispatch reconcile archive").split()
PROSE = ("the service retries the request when the upstream returns an error and logs the "
         "outcome so that operators can trace which tenant triggered the fallback path while "
         "the scheduler keeps draining the queue in the background and metrics are exported "
         "every minute to the dashboard where alerts are configured per region").split()


def uid():
    h = "%032x" % R.getrandbits(128)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def hx(n=24):
    return "%0*x" % (n, R.getrandbits(4 * n))


def tmpname():
    return "".join(R.choice("abcdefghijklmnopqrstuvwxyz0123456789_") for _ in range(8))


def iso(dt):
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def prose(n):
    start = R.randrange(len(PROSE))
    return " ".join(PROSE[(start + k) % len(PROSE)] for k in range(n))


def ident():
    return f"{R.choice(VERBS)}_{R.choice(NOUNS)}"


def pyfile():
    return f"app/{R.choice(NOUNS)}/{R.choice(NOUNS)}_{R.choice(VERBS)}.py"


def code_block(n=12):
    lines = []
    for k in range(n):
        c = R.random()
        if c < 0.2:
            lines.append(f"def {ident()}(self, {R.choice(NOUNS)}, {R.choice(NOUNS)}=None):")
        elif c < 0.4:
            lines.append(f"    {R.choice(NOUNS)} = self.{ident()}({R.choice(NOUNS)}, {R.randrange(100)})")
        elif c < 0.55:
            lines.append(f"    if not {R.choice(NOUNS)}:\n        raise ValueError('{R.choice(NOUNS)} missing')")
        elif c < 0.7:
            lines.append(f"    return {{'{R.choice(NOUNS)}': {R.choice(NOUNS)}, 'n': {R.randrange(1000)}}}")
        else:
            lines.append(f"    # {prose(R.randrange(5, 10))}")
    return "\n".join(lines)


def numbered(text, start=1):
    return "\n".join(f"{start + i:6d}\t{ln}" for i, ln in enumerate(text.splitlines()))


class Run:
    def __init__(self, name, agent, looping=False, kind="healthy", project=None):
        self.id = f"{name}-{R.getrandbits(32):08x}"
        self.project = project or R.choice(["atlas", "borealis", "cinder"])
        self.looping = looping
        self.kind = kind
        self.loop_start = None
        self.evident_at = None
        self.t = T0 + timedelta(seconds=R.randrange(0, 2400), milliseconds=R.randrange(1000))
        self.i = 0
        self.ctx = R.randrange(6000, 14000)
        self.events = []
        self.epoch = R.random() < 0.5
        BASH_STYLE[0] = R.choice(["string", "object"])
        self._ev({"kind": "run_started", "agent_name": agent, "input": prose(12),
                  "metadata": {"framework": R.choice(["openhands", "claude-code", "langgraph", "crewai", "custom"]),
                               "model": R.choice(["m-large", "m-small"])}})

    def _ts(self):
        if self.epoch:
            return int(self.t.timestamp() * 1000)
        return iso(self.t)

    def _ev(self, body):
        ev = {"v": 1, "project_id": self.project, "run_id": self.id, "ts": self._ts()}
        ev.update(body)
        self.events.append((self.t, len(self.events), ev))

    def evident(self):
        """The next step is where a careful reviewer would first call the run a loop."""
        if self.evident_at is None:
            self.evident_at = self.i + 1

    def loop_here(self):
        if self.loop_start is None:
            self.loop_start = self.i + 1

    def call(self, tool, inp, out=None, ok=True, gap=None, grow=None, agent=None, caller=None,
             step_type="tool_call", latency=None):
        self.i += 1
        self.t += timedelta(milliseconds=gap if gap is not None else R.randrange(800, 9000))
        self.ctx += grow if grow is not None else R.randrange(150, 1800)
        body = {"kind": "step", "step_index": self.i, "step_type": step_type,
                "tool_name": tool, "tool_input": inp}
        if out is not None:
            body["tool_output"] = out
        if ok is not None:
            body["tool_success"] = ok
        body["tool_latency_ms"] = latency if latency is not None else R.randrange(15, 4000)
        body["tokens"] = R.randrange(200, 3500)
        body["cost_usd"] = round(body["tokens"] * 2.5e-6, 6)
        body["tokens_in_context"] = self.ctx
        if agent:
            body["agent"] = agent
        if caller:
            body["caller"] = caller
        self._ev(body)

    def say(self, text, step_type="think", agent=None, caller=None, gap=None, grow=None):
        self.i += 1
        self.t += timedelta(milliseconds=gap if gap is not None else R.randrange(1500, 12000))
        self.ctx += grow if grow is not None else R.randrange(100, 900)
        body = {"kind": "step", "step_index": self.i, "step_type": step_type, "content": text,
                "tokens": R.randrange(100, 1500), "tokens_in_context": self.ctx}
        body["cost_usd"] = round(body["tokens"] * 2.5e-6, 6)
        if agent:
            body["agent"] = agent
        if caller:
            body["caller"] = caller
        self._ev(body)

    def end(self, status="completed", reason=None):
        self.t += timedelta(milliseconds=R.randrange(300, 3000))
        body = {"kind": "run_finished", "status": status}
        if reason:
            body["termination_reason"] = reason
        self._ev(body)
        return self


# ------------------------------------------------------------------ tool imitations

BASH_STYLE = ["string"]


def bash_out(stdout, code=0):
    """Claude Code / OpenHands style (one string, exit code appended) or a structured result;
    a run's framework always uses the same one (chosen when the run starts)."""
    if BASH_STYLE[0] == "string":
        return f"{stdout}\n[Command finished with exit code {code}]"
    return {"stdout": stdout, "stderr": "", "exit_code": code}


def pytest_out(passed, failed, failing_names, dur=None, tmp=None):
    dur = dur if dur is not None else round(R.uniform(0.8, 14.0), 2)
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.11.9, pytest-8.2.1, pluggy-1.5.0",
             f"rootdir: {tmp or '/workspace/repo'}",
             f"collected {passed + failed} items", ""]
    for name in failing_names:
        lines += [f"___________________________ {name} ___________________________", "",
                  "    def test_it():", f">       assert result == expected",
                  "E       AssertionError: assert {'n': 3} == {'n': 4}", ""]
    summ = f"{failed} failed, {passed} passed" if failed else f"{passed} passed"
    lines.append(f"========================= {summ} in {dur}s =========================")
    return "\n".join(lines)


def traceback(exc, msg, frames=3, seed=None):
    """A Python traceback; the same `seed` gives the same frames (the same code path)."""
    g = random.Random(seed) if seed is not None else R
    lines = ["Traceback (most recent call last):"]
    for _ in range(frames):
        lines.append(f'  File "/workspace/repo/app/{g.choice(NOUNS)}/{g.choice(VERBS)}.py", line {g.randrange(10, 400)}, in {g.choice(VERBS)}_{g.choice(NOUNS)}')
        lines.append(f"    {g.choice(NOUNS)} = {g.choice(VERBS)}({g.choice(NOUNS)})")
    lines.append(f"{exc}: {msg}")
    return "\n".join(lines)


def oh_noreplace(old, path):
    return (f"ERROR:\nNo replacement was performed, old_str `{old}` did not appear verbatim in "
            f"{path}.")


def coding_noise(r, n, files=None):
    """Ordinary coding-agent work that does not repeat."""
    files = files or [pyfile() for _ in range(6)]
    for _ in range(n):
        c = R.random()
        if c < 0.22:
            f = R.choice(files)
            r.call("view", {"path": f"/workspace/repo/{f}", "view_range": [1, R.randrange(40, 200)]},
                   numbered(code_block(R.randrange(6, 14)), 1))
        elif c < 0.38:
            pat = R.choice([ident(), f"class {R.choice(NOUNS).title()}", f"{R.choice(NOUNS)}_id"])
            hits = "\n".join(f"{R.choice(files)}:{R.randrange(1, 400)}:    {pat} = {R.choice(NOUNS)}" for _ in range(R.randrange(1, 6)))
            r.call("grep", {"pattern": pat, "path": "app/", "output_mode": "content"}, hits)
        elif c < 0.55:
            f = R.choice(files)
            old = f"{R.choice(NOUNS)} = self.{ident()}({R.choice(NOUNS)}, {R.randrange(100)})"
            new = f"{R.choice(NOUNS)} = self.{ident()}({R.choice(NOUNS)})"
            r.call("str_replace_editor", {"command": "str_replace", "path": f"/workspace/repo/{f}", "old_str": old, "new_str": new},
                   f"The file /workspace/repo/{f} has been edited. Here's the result of running `cat -n` on a snippet:\n" + numbered(code_block(5), R.randrange(10, 300)))
        elif c < 0.7:
            r.say(f"{prose(R.randrange(8, 20))}. Next: {R.choice(VERBS)} the {R.choice(NOUNS)} handling in {R.choice(files)}.")
        elif c < 0.82:
            cmd = R.choice([f"git diff --stat {R.choice(files)}", f"python -c 'import app; print(app.__version__)'",
                            f"ls -la app/{R.choice(NOUNS)}", f"wc -l {R.choice(files)}", f"ruff check {R.choice(files)}"])
            r.call("bash", {"command": cmd}, bash_out(f"{R.randrange(1, 400)} {prose(6)}"))
        else:
            r.call("bash", {"command": f"pytest -q tests/test_{R.choice(NOUNS)}.py -k {R.choice(VERBS)}"},
                   bash_out(pytest_out(R.randrange(3, 30), 0, [])))


# ================================================================== HEALTHY

def h_long_coding(v):
    """150-260 step Claude-Code-style session: explore, edit, test, converge."""
    r = Run(f"ok-long-coding-{v}", "claude-code")
    files = [pyfile() for _ in range(14)]
    coding_noise(r, R.randrange(150, 230), files)
    # a couple of late re-runs of the full suite with shrinking failures
    for failed in (3, 1, 0):
        names = [f"test_{ident()}" for _ in range(failed)]
        r.call("bash", {"command": "pytest -q"}, bash_out(pytest_out(212 - failed, failed, names), 1 if failed else 0))
        if failed:
            coding_noise(r, R.randrange(3, 6), files)
    r.say("All 212 tests pass; summarising the change for the PR description.")
    return r.end()


def h_testfix(v):
    """pytest -> fail -> edit -> pytest ... converging; same failure twice while trying fixes."""
    r = Run(f"ok-testfix-{v}", "openhands")
    coding_noise(r, R.randrange(4, 9))
    tf = f"tests/test_{R.choice(NOUNS)}.py"
    failing = [f"test_{ident()}" for _ in range(R.randrange(3, 5))]
    tool_ok = v % 2 == 0  # half the frameworks report exit!=0 as tool failure
    attempts = 0
    while failing:
        out = pytest_out(20 - len(failing), len(failing), failing)
        r.call("bash", {"command": f"cd /workspace/repo && python -m pytest {tf} -x -q"},
               bash_out(out, 1) if tool_ok else {"stdout": out, "stderr": "", "exit_code": 1}, ok=True if tool_ok else False)
        f = pyfile()
        r.call("view", {"path": f"/workspace/repo/{f}"}, numbered(code_block(10)))
        r.call("str_replace_editor", {"command": "str_replace", "path": f"/workspace/repo/{f}",
                                      "old_str": f"return {R.choice(NOUNS)}", "new_str": f"return {R.choice(NOUNS)} or {R.randrange(9)}"},
               f"The file /workspace/repo/{f} has been edited.")
        attempts += 1
        # first fix attempt for a test sometimes does not work: same failure comes back once
        if attempts % 3 != 1:
            failing.pop(0)
    r.call("bash", {"command": f"cd /workspace/repo && python -m pytest {tf} -x -q"}, bash_out(pytest_out(20, 0, []), 0))
    coding_noise(r, R.randrange(2, 5))
    return r.end()


def h_kubectl_poll(v):
    """bash running kubectl until the rollout is ready: AGE column and states change."""
    r = Run(f"ok-kubectl-{v}", "sre-agent")
    dep = f"{R.choice(NOUNS)}-api"
    r.call("bash", {"command": f"kubectl apply -f deploy/{dep}.yaml -n staging"},
           bash_out(f"deployment.apps/{dep} configured\nservice/{dep} unchanged"))
    age = R.randrange(2, 10)
    pod = f"{dep}-{hx(10)}-{tmpname()[:5]}"
    n = R.randrange(5, 11)
    for k in range(n):
        gap = R.randrange(10000, 31000)
        age += gap // 1000
        state = "ContainerCreating" if k < n // 2 else "Running"
        ready = "0/1" if k < n - 1 else "1/1"
        cmd = f"kubectl get pods -n staging -l app={dep}" if v % 2 == 0 else f"sleep 20 && kubectl get pods -n staging -l app={dep}"
        out = f"NAME                        READY   STATUS              RESTARTS   AGE\n{pod}   {ready}     {state}   0          {age}s"
        r.call("bash", {"command": cmd, "timeout": 120}, bash_out(out), gap=gap)
    r.call("bash", {"command": f"kubectl logs deploy/{dep} -n staging --tail=5"}, bash_out(f"INFO listening on :8080\nINFO {prose(6)}"))
    r.say("Rollout is healthy; closing the change ticket.")
    return r.end()


def h_ci_poll_same(v):
    """Polling a CI run whose status stays identical for several polls, then completes.
    Unrecognised tool names; the agent sleeps between polls."""
    r = Run(f"ok-ci-wait-{v}", "release-bot")
    coding_noise(r, R.randrange(2, 5))
    run_id = R.randrange(10**9, 10**10)
    r.call("bash", {"command": "git push origin HEAD:release/1.42"}, bash_out("To github.com:acme/app.git\n   1a2b3c4..5d6e7f8  HEAD -> release/1.42"))
    same = R.randrange(5, 9)
    for k in range(same):
        if v % 3 == 0:
            r.call("bash", {"command": f"gh run view {run_id} --json status,conclusion"},
                   bash_out(json.dumps({"status": "in_progress", "conclusion": ""})), gap=R.randrange(25000, 65000))
        elif v % 3 == 1:
            r.call("ci_api", {"method": "GET", "path": f"/repos/acme/app/actions/runs/{run_id}"},
                   {"id": run_id, "status": "queued" if k < 2 else "in_progress", "conclusion": None,
                    "run_started_at": "2026-05-11T14:02:11Z", "html_url": f"https://github.com/acme/app/actions/runs/{run_id}"},
                   gap=R.randrange(25000, 65000))
        else:
            r.call("bash", {"command": f"sleep 30 && curl -s https://ci.internal/api/v2/pipelines/{run_id}"},
                   bash_out(json.dumps({"pipeline": run_id, "state": "running", "stage": "integration-tests"})), gap=R.randrange(30000, 40000))
    done = {"status": "completed", "conclusion": "success"}
    if v % 3 == 1:
        r.call("ci_api", {"method": "GET", "path": f"/repos/acme/app/actions/runs/{run_id}"}, {"id": run_id, **done}, gap=40000)
    else:
        r.call("bash", {"command": f"gh run view {run_id} --json status,conclusion"}, bash_out(json.dumps(done)), gap=40000)
    r.call("bash", {"command": "gh release create v1.42.0 --generate-notes"}, bash_out("https://github.com/acme/app/releases/tag/v1.42.0"))
    return r.end()


def h_bg_process(v):
    """Background build; the agent tails the log (changing) and checks the process."""
    r = Run(f"ok-bgproc-{v}", "claude-code")
    r.call("bash", {"command": "nohup npm run build > /tmp/build.log 2>&1 &", "run_in_background": True},
           bash_out(f"[1] {R.randrange(2000, 60000)}"))
    pct = 0
    for k in range(R.randrange(6, 12)):
        pct = min(100, pct + R.randrange(5, 25))
        tool = "bash" if v % 2 == 0 else "BashOutput"
        inp = {"command": "tail -n 3 /tmp/build.log"} if tool == "bash" else {"bash_id": "bash_1"}
        r.call(tool, inp, bash_out(f"[webpack] {pct}% building {R.randrange(100, 900)}/{R.randrange(900, 1200)} modules\n{prose(4)}"), gap=R.randrange(5000, 20000))
    r.call("bash", {"command": "ls -la dist/"}, bash_out(f"total {R.randrange(100, 900)}\n-rw-r--r-- 1 node node {R.randrange(10**5, 10**6)} main.js"))
    return r.end()


def h_retry_recover(v):
    """HTTP 503 / 429 / connection reset with backoff, then success."""
    r = Run(f"ok-retry-{v}", "support-agent")
    r.call("crm_get", {"path": f"/v3/customers/cus_{hx(14)}"}, {"id": "cus", "email": f"{R.choice(NOUNS)}@example.com", "plan": "team"})
    n = R.randrange(2, 6)
    url = f"https://billing.internal/api/v2/invoices?customer=cus_{hx(14)}&limit=20"
    for k in range(n):
        if v % 3 == 0:
            out = {"status": 503, "error": "Service Unavailable", "message": "upstream connect error or disconnect/reset before headers. reset reason: overflow",
                   "request_id": uid()}
        elif v % 3 == 1:
            out = {"status": 429, "error": "Too Many Requests", "retry_after": 2 ** k, "x-ratelimit-reset": 1778500000 + k * 7}
        else:
            out = f"curl: (56) Recv failure: Connection reset by peer"
        r.call("http_request", {"method": "GET", "url": url}, out, ok=False, gap=(2 ** k) * 1000 + R.randrange(100, 900))
    r.call("http_request", {"method": "GET", "url": url}, {"status": 200, "data": [{"id": f"in_{hx(12)}", "amount_due": R.randrange(1000, 90000), "currency": "usd"} for _ in range(4)]})
    r.say("Found the disputed invoice; drafting the reply to the customer.")
    r.call("send_reply", {"ticket_id": R.randrange(10**5, 10**6), "body": prose(30)}, {"ok": True, "message_id": f"<{hx(16)}@mail.example.com>"})
    return r.end()


def h_reread_after_edit(v):
    """view -> edit -> view again (changed) several times on one file, plus a failed edit
    that is recovered by re-reading."""
    r = Run(f"ok-reread-{v}", "openhands")
    f = f"/workspace/repo/{pyfile()}"
    body = code_block(14)
    for k in range(R.randrange(4, 7)):
        r.call("str_replace_editor", {"command": "view", "path": f}, numbered(body))
        if k == 1:
            old = f"    return {R.choice(NOUNS)}"
            r.call("str_replace_editor", {"command": "str_replace", "path": f, "old_str": old, "new_str": old + " or None"},
                   oh_noreplace(old, f), ok=False)
            r.call("str_replace_editor", {"command": "view", "path": f}, numbered(body))
        line = body.splitlines()[R.randrange(len(body.splitlines()))]
        new = f"    # {R.choice(VERBS)}d {R.choice(NOUNS)} ({k})"
        body = body.replace(line, new, 1)
        r.call("str_replace_editor", {"command": "str_replace", "path": f, "old_str": line, "new_str": new},
               f"The file {f} has been edited. Review the changes and make sure they are as expected.")
    r.call("bash", {"command": f"python -m py_compile {f}"}, bash_out("", 0))
    coding_noise(r, 3)
    return r.end()


def h_config_reads(v):
    """The same config file read (identical content) between different edits."""
    r = Run(f"ok-config-reads-{v}", "claude-code")
    cfg = "\n".join(f"{R.choice(NOUNS)}:\n  {R.choice(NOUNS)}: {R.randrange(100)}\n  enabled: true" for _ in range(6))
    files = [pyfile() for _ in range(8)]
    for k in range(R.randrange(5, 8)):
        r.call("Read", {"file_path": "/home/dev/repo/config/settings.yaml"}, numbered(cfg))
        f = files[k]
        r.call("Read", {"file_path": f"/home/dev/repo/{f}"}, numbered(code_block(8)))
        r.call("Edit", {"file_path": f"/home/dev/repo/{f}", "old_string": f"{R.choice(NOUNS)}_{k} = 1", "new_string": f"{R.choice(NOUNS)}_{k} = settings.{R.choice(NOUNS)}"},
               f"The file /home/dev/repo/{f} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n{numbered(code_block(4), 30)}")
        if R.random() < 0.5:
            r.say(f"Wired {f} to the shared settings; next module.")
    r.call("Bash", {"command": "pytest -q", "description": "Run the test suite"}, pytest_out(88, 0, []))
    return r.end()


def h_pagination(v):
    """SQL OFFSET paging, API cursors and browser scrolling: same call shape, new data."""
    r = Run(f"ok-paging-{v}", ["sql-analyst", "support-agent", "browser-agent"][v % 3])
    if v % 3 == 0:
        for off in range(0, R.randrange(6, 11) * 500, 500):
            rows = [[R.randrange(10**6), f"{R.choice(NOUNS)}", round(R.uniform(1, 900), 2)] for _ in range(4)]
            r.call("run_sql", {"query": f"SELECT id, name, total FROM orders WHERE created_at >= '2026-01-01' ORDER BY id LIMIT 500 OFFSET {off}", "database": "analytics"},
                   {"columns": ["id", "name", "total"], "rows": rows, "row_count": 500, "elapsed_ms": R.randrange(40, 900)})
        r.call("run_sql", {"query": "SELECT count(*) FROM orders WHERE created_at >= '2026-01-01'", "database": "analytics"}, {"columns": ["count"], "rows": [[4711]]})
    elif v % 3 == 1:
        cur = None
        for k in range(R.randrange(6, 12)):
            nxt = hx(20)
            r.call("zendesk_api", {"endpoint": "/api/v2/tickets.json", "params": {"page[size]": 100, "page[after]": cur}},
                   {"tickets": [{"id": R.randrange(10**6), "subject": prose(5)} for _ in range(3)], "meta": {"has_more": True, "after_cursor": nxt}})
            cur = nxt
        r.call("zendesk_api", {"endpoint": "/api/v2/tickets.json", "params": {"page[size]": 100, "page[after]": cur}}, {"tickets": [], "meta": {"has_more": False}})
    else:
        r.call("browser_navigate", {"url": f"https://docs.example.com/{R.choice(NOUNS)}/changelog"}, {"title": "Changelog", "status": 200})
        for k in range(R.randrange(8, 15)):
            r.call("browser_scroll", {"direction": "down", "pixels": 900}, {"viewport_text": prose(25), "scroll_y": 900 * (k + 1)})
            if k % 4 == 3:
                r.call("browser_screenshot", {}, {"image": f"data:image/png;base64,{hx(40)}", "width": 1280, "height": 800})
    r.say("Collected everything needed; writing the summary.")
    return r.end()


def h_browser_task(v):
    """Browser agent filling a form: navigate, click, type, screenshot after each action."""
    r = Run(f"ok-browser-{v}", "browser-agent")
    r.call("browser", {"action": "navigate", "url": "https://shop.example.com/account/addresses"}, {"url": "https://shop.example.com/account/addresses", "title": "Addresses"})
    fields = ["#first-name", "#last-name", "#street", "#city", "#zip", "#phone"]
    for k, sel in enumerate(fields):
        r.call("browser", {"action": "click", "selector": sel}, {"ok": True})
        r.call("browser", {"action": "type", "selector": sel, "text": f"{R.choice(NOUNS).title()} {R.randrange(100)}"}, {"ok": True})
        if k % 2 == 1:
            r.call("browser", {"action": "screenshot"}, {"screenshot": f"s3://shots/{uid()}.png", "dom_hash": hx(16), "elements": R.randrange(80, 160)})
    r.call("browser", {"action": "click", "selector": "button[type=submit]"}, {"navigated": True, "url": "https://shop.example.com/account/addresses?saved=1"})
    r.call("browser", {"action": "get_text", "selector": ".flash"}, {"text": "Address saved."})
    return r.end()


def h_research(v):
    """Research agent: varied queries, some overlapping results, several fetches."""
    r = Run(f"ok-research-{v}", "researcher")
    topic = R.choice(["battery recycling", "sodium-ion cells", "grid storage tariffs", "heat pump adoption"])
    angles = ["market size 2025", "leading companies", "EU regulation", "cost per kWh trend", "recent funding rounds",
              "supply chain risks", "academic review", "China production share", "US incentives IRA"]
    R.shuffle(angles)
    seen_urls = []
    for a in angles[:R.randrange(5, 9)]:
        res = []
        for _ in range(5):
            if seen_urls and R.random() < 0.3:
                res.append(R.choice(seen_urls))
            else:
                u = {"url": f"https://{R.choice(['reuters.com', 'iea.org', 'ft.com', 'nature.com', 'bnef.com'])}/{hx(8)}", "title": f"{topic} {a} {prose(3)}"}
                seen_urls.append(u)
                res.append(u)
        r.call("web_search", {"query": f"{topic} {a}", "num_results": 5}, {"results": res, "search_id": uid()})
        if R.random() < 0.7:
            u = R.choice(res)["url"]
            r.call("fetch", {"url": u, "max_chars": 8000}, {"url": u, "status": 200, "text": prose(60)})
        r.say(f"Notes on {a}: {prose(15)}.")
    r.call("write_file", {"path": "report.md", "content": prose(80)}, {"ok": True, "bytes": R.randrange(4000, 9000)})
    return r.end()


def h_paraphrase_productive(v):
    """Rephrased searches that keep returning NEW results (hard negative for near-dup)."""
    r = Run(f"ok-rephrase-{v}", "researcher")
    base = R.choice(["kafka consumer lag alerting", "postgres vacuum tuning", "rust async cancellation"])
    mods = ["best practices", "best practices production", "best practice guide production", "production best practices 2026",
            "best practices at scale", "best practices examples"]
    for m in mods[:R.randrange(4, 7)]:
        r.call("web_search", {"query": f"{base} {m}"}, {"results": [{"url": f"https://blog.example.org/{hx(10)}", "snippet": prose(12)} for _ in range(4)]})
        r.say(f"Picked up {R.randrange(1, 4)} new points from this batch.")
    r.call("write_file", {"path": "notes.md", "content": prose(50)}, {"ok": True})
    return r.end()


def h_support_batch(v):
    """Support agent looping over a list of customers: same response shape each time."""
    r = Run(f"ok-support-batch-{v}", "support-agent")
    r.call("list_open_tickets", {"queue": "billing", "limit": 25}, {"tickets": [R.randrange(10**5, 10**6) for _ in range(10)]})
    for k in range(R.randrange(8, 14)):
        t = R.randrange(10**5, 10**6)
        r.call("get_ticket", {"ticket_id": t}, {"id": t, "subject": prose(5), "customer": f"cus_{hx(14)}", "status": "open"})
        r.call("update_ticket", {"ticket_id": t, "status": "pending", "tags": ["billing", "auto-triaged"]}, {"ok": True, "updated_at": iso(r.t)})
        r.call("send_email", {"to": f"{R.choice(NOUNS)}{k}@example.com", "template": "billing_ack", "vars": {"ticket": t}},
               {"status": "queued", "message_id": f"<{uid()}@mailer>", "queued_at": iso(r.t)})
    return r.end()


def h_sql_explore(v):
    """Data agent exploring a schema, with a couple of recovered SQL errors."""
    r = Run(f"ok-sql-{v}", "sql-analyst")
    tables = ["orders", "customers", "payments", "refunds", "shipments"]
    for t in tables[:R.randrange(3, 6)]:
        r.call("sql", {"query": f"DESCRIBE {t}"}, {"columns": [{"name": f"{R.choice(NOUNS)}_{k}", "type": R.choice(["BIGINT", "TEXT", "TIMESTAMP"])} for k in range(5)]})
    r.call("sql", {"query": "SELECT customer_id, sum(amount) FROM payments GROUP BY 1 ORDER BY 2 DESC LIMIT 10"},
           {"error": "psycopg2.errors.UndefinedColumn: column \"amount\" does not exist\nLINE 1: SELECT customer_id, sum(amount) FROM payments GROUP BY 1 ORD...\n                            ^\nHINT:  Perhaps you meant to reference the column \"payments.amount_cents\"."}, ok=False)
    r.call("sql", {"query": "SELECT customer_id, sum(amount_cents)/100.0 FROM payments GROUP BY 1 ORDER BY 2 DESC LIMIT 10"},
           {"columns": ["customer_id", "total"], "rows": [[R.randrange(10**5), round(R.uniform(100, 9000), 2)] for _ in range(10)]})
    for k in range(R.randrange(4, 8)):
        r.call("sql", {"query": f"SELECT date_trunc('week', created_at) w, count(*) FROM {R.choice(tables)} WHERE region = '{R.choice(['eu', 'us', 'apac'])}' GROUP BY 1 ORDER BY 1 LIMIT {R.randrange(10, 60)}"},
               {"columns": ["w", "count"], "rows": [[f"2026-0{R.randrange(1, 5)}-0{R.randrange(1, 9)}", R.randrange(10, 9000)] for _ in range(6)]})
        r.say(f"Week-over-week {R.choice(['growth', 'drop'])} of {R.randrange(2, 40)}% in this slice.")
    r.call("create_chart", {"type": "line", "title": "Weekly orders by region"}, {"chart_id": hx(12), "url": "https://charts.internal/c/1"})
    return r.end()


def h_sql_backfill_watch(v):
    """Watching a backfill: the same count(*) query, results grow until stable."""
    r = Run(f"ok-backfill-{v}", "data-agent")
    r.call("run_sql", {"query": "INSERT INTO events_v2 SELECT * FROM events_v1 WHERE day >= '2026-01-01'", "async": True}, {"job": f"bq_{hx(16)}", "state": "RUNNING"})
    n = 0
    for k in range(R.randrange(6, 10)):
        n += R.randrange(10**5, 10**6)
        r.call("run_sql", {"query": "SELECT count(*) FROM events_v2"}, {"rows": [[n]], "bytes_processed": R.randrange(10**6, 10**7)}, gap=R.randrange(15000, 40000))
    r.call("run_sql", {"query": "SELECT count(*) FROM events_v1 WHERE day >= '2026-01-01'"}, {"rows": [[n]]})
    r.say("Counts match, the backfill is complete.")
    return r.end()


def h_rl_rollout(v):
    """RL rollout worker with terse tools: observations change every step."""
    r = Run(f"ok-rl-{v}", f"rollout-w{v}", project="rl-train")
    pos = [R.randrange(10), R.randrange(10)]
    for k in range(R.randrange(25, 60)):
        a = R.choice(["up", "down", "left", "right", "pick", "drop"])
        if a in ("up", "down"):
            pos[1] += 1 if a == "up" else -1
        elif a in ("left", "right"):
            pos[0] += 1 if a == "right" else -1
        r.call("act", {"a": a}, {"obs": {"pos": list(pos), "inv": R.randrange(4), "hp": 100 - k}, "r": round(R.uniform(-0.1, 1.0), 3), "done": False}, gap=R.randrange(50, 400), latency=R.randrange(2, 30))
    r.call("act", {"a": "noop"}, {"obs": {"pos": list(pos)}, "r": 1.0, "done": True}, gap=200)
    return r.end()


def h_crew_converge(v):
    """planner -> researcher -> writer -> reviewer -> writer ... converging (drafts change)."""
    r = Run(f"ok-crew-{v}", "crew")
    r.say(f"Plan: 1) gather facts on {R.choice(NOUNS)} 2) draft 3) review.", agent="planner")
    r.say("Please research the market context and key players.", agent="researcher", caller="planner")
    for _ in range(2):
        r.call("web_search", {"query": f"{R.choice(NOUNS)} {R.choice(NOUNS)} market"}, {"results": [prose(8) for _ in range(3)]}, agent="researcher")
    r.say(f"Research summary: {prose(30)}", agent="writer", caller="researcher")
    draft = prose(40)
    rounds = R.randrange(2, 5)
    for k in range(rounds):
        draft += " " + prose(8)
        r.say(f"Draft v{k + 1}:\n{draft}", agent="reviewer", caller="writer")
        if k == rounds - 1:
            r.say("Approved. Ship it.", agent="planner", caller="reviewer")
        else:
            r.say(f"Review: section {k + 2} needs a source for the {R.choice(NOUNS)} claim; also shorten the intro.", agent="writer", caller="reviewer")
    return r.end()


def h_crew_qa(v):
    """Three-agent QA loop that converges: coder -> tester -> coder with different failures."""
    r = Run(f"ok-crew-qa-{v}", "crew")
    bugs = R.randrange(2, 4)
    for k in range(bugs + 1):
        r.say(f"Patch {k + 1}: {prose(12)} in {pyfile()}", agent="coder", caller="lead")
        out = pytest_out(40 - (bugs - k), bugs - k, [f"test_{ident()}" for _ in range(bugs - k)])
        r.call("run_tests", {"suite": "unit"}, out, agent="tester", caller="coder")
        r.say(f"{bugs - k} failing. Details: {prose(10)}" if bugs - k else "All green.", agent="lead", caller="tester")
    return r.end()


def h_debug_session(v):
    """pdb stepping with changing frames plus re-running the script."""
    r = Run(f"ok-pdb-{v}", "openhands")
    r.call("bash", {"command": "python -m pdb scripts/reconcile.py"}, bash_out("> /workspace/repo/scripts/reconcile.py(1)<module>()\n-> import sys"))
    line = 1
    for k in range(R.randrange(10, 18)):
        line += R.randrange(1, 4)
        r.call("bash", {"command": R.choice(["n", "s", "n", "p total"]), "is_input": True},
               bash_out(f"> /workspace/repo/scripts/reconcile.py({line}){ident()}()\n-> {R.choice(NOUNS)} = {R.randrange(1000)}"))
    r.call("bash", {"command": "q", "is_input": True}, bash_out(""))
    coding_noise(r, 4)
    return r.end()


def h_long_data(v):
    """Long (150+) notebook-style data session with many distinct cells."""
    r = Run(f"ok-long-data-{v}", "data-agent")
    for k in range(R.randrange(150, 200)):
        c = R.random()
        if c < 0.5:
            r.call("execute_cell", {"code": f"df_{k % 7}.groupby('{R.choice(NOUNS)}')['{R.choice(NOUNS)}'].{R.choice(['sum', 'mean', 'count'])}().head({R.randrange(3, 20)})"},
                   {"text/plain": "\n".join(f"{R.choice(NOUNS)}    {R.uniform(0, 1000):.3f}" for _ in range(4))})
        elif c < 0.7:
            r.call("execute_cell", {"code": f"df_{k % 7} = pd.read_parquet('s3://lake/{R.choice(NOUNS)}/{k}.parquet')"}, {"text/plain": ""})
        elif c < 0.85:
            r.say(f"Cell {k}: {prose(12)}.")
        else:
            r.call("execute_cell", {"code": f"plt.plot(df_{k % 7}['{R.choice(NOUNS)}']); plt.savefig('fig_{k}.png')"}, {"image/png": f"<{R.randrange(10**4, 10**5)} bytes>"})
    return r.end()


def h_edit_retry_different(v):
    """Edit fails with 'String to replace not found' twice with *different* old strings; the agent
    re-reads and gets it right."""
    r = Run(f"ok-edit-retry-{v}", "claude-code")
    coding_noise(r, 3)
    f = f"/home/dev/repo/{pyfile()}"
    for k in range(2):
        old = f"    {R.choice(NOUNS)} = self.{ident()}()"
        r.call("Edit", {"file_path": f, "old_string": old, "new_string": old + "  # fixed"},
               f"<tool_use_error>String to replace not found in file.\nString: {old}</tool_use_error>", ok=False)
        r.call("Read", {"file_path": f, "offset": 1 + k * 80, "limit": 80}, numbered(code_block(10), 1 + k * 80))
    r.call("Edit", {"file_path": f, "old_string": "return None", "new_string": "return {}"}, f"The file {f} has been updated.")
    r.call("Bash", {"command": "pytest -q tests/unit"}, pytest_out(61, 0, []))
    return r.end()


def h_docker_health(v):
    """docker compose ps until healthy; several identical 'starting' outputs first."""
    r = Run(f"ok-compose-{v}", "devops-agent")
    r.call("bash", {"command": "docker compose up -d"}, bash_out(" Container db  Started\n Container api  Started"))
    same = R.randrange(4, 8)
    for k in range(same):
        r.call("bash", {"command": "docker compose ps --format '{{.Name}} {{.Status}}'"},
               bash_out("db Up 12 seconds (healthy)\napi Up 12 seconds (health: starting)" if k == 0 else
                        "db Up About a minute (healthy)\napi Up About a minute (health: starting)"), gap=R.randrange(8000, 15000))
    r.call("bash", {"command": "docker compose ps --format '{{.Name}} {{.Status}}'"}, bash_out("db Up 2 minutes (healthy)\napi Up 2 minutes (healthy)"), gap=10000)
    r.call("bash", {"command": "curl -sf localhost:8080/healthz"}, bash_out('{"ok":true}'))
    return r.end()


# ================================================================== LOOPING

def l_edit_same_fail(v):
    """The same str_replace keeps failing; the agent views the file (unchanged) in between."""
    r = Run(f"loop-edit-fail-{v}", "openhands", True, "repeated_failure")
    coding_noise(r, R.randrange(4, 10))
    f = f"/workspace/repo/{pyfile()}"
    body = code_block(12)
    old = f"    def {ident()}(self):\n        return self._{R.choice(NOUNS)}"
    r.loop_here()
    for k in range(R.randrange(4, 7)):
        if k == 2:
            r.evident()
        r.call("str_replace_editor", {"command": "str_replace", "path": f, "old_str": old, "new_str": old.replace("return", "return None or")},
               oh_noreplace(old, f), ok=False)
        if v % 2 == 0:
            r.call("str_replace_editor", {"command": "view", "path": f}, numbered(body))
        else:
            r.say("The edit failed; I'll try the replacement again with the exact text.")
    return r.end("failed", "max_steps_reached")


def l_edit_claude_recoverable(v):
    """Claude Code: 'String to replace not found' -> Read -> the same Edit again, forever."""
    r = Run(f"loop-edit-cc-{v}", "claude-code", True, "repeated_failure")
    coding_noise(r, R.randrange(3, 8))
    f = f"/home/dev/repo/{pyfile()}"
    body = code_block(10)
    old = "        if not payload:\n            return"
    r.loop_here()
    for k in range(R.randrange(4, 7)):
        if k == 2:
            r.evident()
        r.call("Read", {"file_path": f}, numbered(body))
        r.call("Edit", {"file_path": f, "old_string": old, "new_string": "        if not payload:\n            raise ValueError('empty')"},
               f"<tool_use_error>String to replace not found in file.\nString: {old}</tool_use_error>", ok=False)
    return r.end()


def l_volatile_status(v):
    """The same terminal-state check repeated; outputs differ only by ids/timestamps/durations."""
    r = Run(f"loop-volatile-{v}", "sre-agent", True, "repeated_operation")
    coding_noise(r, R.randrange(3, 7))
    dep = f"{R.choice(NOUNS)}-worker"
    build = R.randrange(100, 999)
    r.loop_here()
    for k in range(R.randrange(5, 9)):
        if k == 2:
            r.evident()
        if v % 3 == 0:
            out = {"deployment": dep, "phase": "Failed", "reason": "ProgressDeadlineExceeded",
                   "observed_at": iso(r.t), "request_id": uid(), "trace": hx(32)}
            r.call("deploy_api", {"op": "describe", "deployment": dep, "namespace": "prod", "request_id": uid()}, out)
        elif v % 3 == 1:
            out = (f"HTTP/1.1 200 OK\ndate: {r.t.strftime('%a, %d %b %Y %H:%M:%S GMT')}\ncontent-type: application/json\nx-request-id: {hx(32)}\nx-envoy-upstream-service-time: {R.randrange(2, 90)}\n\n"
                   f'{{"deployment":"{dep}","status":"Failed","message":"1 of 3 replicas crashlooping"}}')
            r.call("bash", {"command": f"curl -si https://deploy.internal/api/deployments/{dep}"}, bash_out(out))
        else:
            out = {"job": dep, "result": "FAILURE", "duration": f"{R.uniform(1, 9):.3f}s", "build_url": f"https://jenkins.internal/job/{dep}/{build}/",
                   "fetched": iso(r.t)}
            r.call("jenkins", {"action": "last_build", "job": dep}, out)
        if R.random() < 0.4:
            r.say("Let me check the deployment state once more.")
    return r.end("failed", "timeout")


def l_tmpdir_rerun(v):
    """The same failing command re-run; output carries random temp dirs, pids and ms timings."""
    r = Run(f"loop-tmpdir-{v}", "claude-code", True, "repeated_failure")
    coding_noise(r, R.randrange(3, 8))
    r.loop_here()
    for k in range(R.randrange(4, 7)):
        if k == 2:
            r.evident()
        tmp = f"/tmp/pytest-of-dev/pytest-{R.randrange(10, 999)}/test_export0"
        out = (f"{pytest_out(30, 1, ['test_export_roundtrip'], tmp=tmp)}\n"
               f"E   FileNotFoundError: [Errno 2] No such file or directory: '/tmp/tmp{tmpname()}/export.csv'\n"
               f"worker pid {R.randrange(1000, 65000)} exited after {R.randrange(100, 999)}ms")
        r.call("Bash", {"command": "pytest -q tests/test_export.py", "description": "Run export tests"}, out, ok=False)
        if v % 2 == 0:
            r.say("The export test still fails. Let me run it again to see the error.")
    return r.end()


def l_paraphrase_search(v):
    """Rephrased web searches that keep returning the same (or no) results."""
    r = Run(f"loop-paraphrase-{v}", "researcher", True, "near_duplicate")
    for k in range(R.randrange(2, 5)):
        r.call("web_search", {"query": f"{R.choice(NOUNS)} {R.choice(VERBS)} {prose(2)}"}, {"results": [{"url": f"https://x.org/{hx(6)}", "title": prose(4)} for _ in range(3)]})
    qs = [["acme corp 2025 annual revenue", "acme corporation revenue for fiscal 2025", "what was acme corp's total revenue in 2025",
           "acme 2025 annual report revenue figure", "acme corp fy2025 revenue numbers", "revenue of acme corp in 2025 annual"],
          ["python asyncio task cancelled error shield", "asyncio shield task cancelled error python", "python asyncio shield cancelled task error handling",
           "cancelled error asyncio shield in python tasks", "how to handle asyncio task cancelled error with shield"],
          ["postgres replication slot inactive wal growth", "inactive replication slot postgres wal keeps growing",
           "postgres wal growth because of inactive replication slot", "wal growing inactive slot postgresql replication fix"]][v % 3]
    same = {"results": [{"url": "https://stackoverflow.com/q/7788", "title": "Unrelated question about totals"},
                        {"url": "https://example.com/blog", "title": "Blog home"}]} if v % 2 == 0 else {"results": [], "total": 0}
    r.loop_here()
    for q in qs:
        if q == qs[2]:
            r.evident()
        o = dict(same)
        o["search_id"] = uid()
        r.call("web_search", {"query": q, "num_results": 10}, o)
        if R.random() < 0.5:
            r.say("No useful hits yet; I'll rephrase the query.")
    return r.end()


def l_pingpong(v):
    """A-B-A-B: toggling between two states with identical outputs each time."""
    r = Run(f"loop-pingpong-{v}", ["claude-code", "browser-agent", "rollout"][v % 3], True, "cycle")
    if v % 3 == 0:
        coding_noise(r, R.randrange(3, 7))
        r.loop_here()
        for k in range(R.randrange(3, 6)):
            r.call("bash", {"command": "pip install 'pydantic<2'"}, bash_out("Successfully installed pydantic-1.10.15"))
            r.call("bash", {"command": "python -m app.main"}, bash_out(traceback("ImportError", "cannot import name 'field_validator' from 'pydantic'", seed=1), 1))
            r.call("bash", {"command": "pip install 'pydantic>=2'"}, bash_out("Successfully installed pydantic-2.7.1"))
            if k == 1:
                r.evident()
            r.call("bash", {"command": "python -m app.main"}, bash_out(traceback("ImportError", "cannot import name 'validator' from 'pydantic.v1.main'", seed=2), 1))
    elif v % 3 == 1:
        r.call("browser", {"action": "navigate", "url": "https://portal.example.com/settings"}, {"title": "Settings"})
        r.loop_here()
        for k in range(R.randrange(4, 7)):
            r.call("browser", {"action": "click", "selector": "a[href='/settings/billing']"}, {"url": "https://portal.example.com/login?next=/settings/billing", "title": "Sign in"})
            if k == 1:
                r.evident()
            r.call("browser", {"action": "go_back"}, {"url": "https://portal.example.com/settings", "title": "Settings"})
    else:
        r.call("act", {"a": "look"}, {"obs": "You are in a dark corridor. Exits: north, south.", "r": 0})
        r.loop_here()
        for k in range(R.randrange(5, 9)):
            r.call("act", {"a": "go north"}, {"obs": "A locked door blocks the way. Exits: south.", "r": 0, "done": False}, gap=150)
            if k == 1:
                r.evident()
            r.call("act", {"a": "go south"}, {"obs": "You are in a dark corridor. Exits: north, south.", "r": 0, "done": False}, gap=150)
    return r.end()


def l_delegation3(v):
    """planner -> researcher -> critic -> planner with the same hand-over every round."""
    r = Run(f"loop-delegation-{v}", "crew", True, "handoff_cycle")
    r.say("Goal: produce a competitor matrix for the Q3 board deck.", agent="planner")
    ask = "Find pricing for the three competitors listed in the brief and report back."
    ret = "I could not access the pricing pages (login required). Returning to planner for guidance."
    crit = "The research is incomplete: pricing is missing. Planner, please re-assign the research."
    r.loop_here()
    for k in range(R.randrange(3, 5)):
        r.say(ask, agent="researcher", caller="planner")
        if k == 1:
            # The second identical 401 (the round's repeat is evident from there too).
            r.evident()
        r.call("fetch", {"url": "https://competitor.example.com/pricing"}, {"status": 401, "error": "Unauthorized"}, ok=False, agent="researcher")
        r.say(ret, agent="critic", caller="researcher")
        r.say(crit, agent="planner", caller="critic")
    return r.end("failed")


def l_writer_reviewer(v):
    """writer <-> reviewer with the same draft and the same review each round."""
    r = Run(f"loop-review-{v}", "crew", True, "handoff_cycle")
    draft = prose(45)
    review = "The draft does not address the data-retention question. Please revise section 3."
    r.say(f"Draft:\n{draft}", agent="writer", caller="editor")
    r.loop_here()
    for k in range(R.randrange(3, 5)):
        r.say(f"Draft (revised):\n{draft}", agent="reviewer", caller="writer")
        if k == 1:
            r.evident()
        r.say(review, agent="writer", caller="reviewer")
    return r.end()


def l_403_varying(v):
    """The same 403 for varying arguments (different customer ids, different endpoints)."""
    r = Run(f"loop-403-{v}", "support-agent", True, "repeated_failure")
    r.call("crm_search", {"email": "jane@example.com"}, {"matches": [{"id": "cus_1"}, {"id": "cus_2"}, {"id": "cus_3"}, {"id": "cus_4"}]})
    r.loop_here()
    for k in range(R.randrange(4, 7)):
        if k == 2:
            r.evident()
        cid = f"cus_{hx(14)}"
        out = {"error": {"type": "invalid_request_error", "code": "insufficient_permissions",
                         "message": "The provided key 'rk_live_****' does not have the required permissions for this endpoint on account 'acct_1Nq'.",
                         "request_log_url": f"https://dashboard.example.com/logs/req_{hx(14)}"}, "status": 403}
        if v % 2 == 0:
            r.call("http_request", {"method": "GET", "url": f"https://api.payments.example.com/v1/customers/{cid}/invoices"}, out, ok=False)
        else:
            r.call("billing_api", {"resource": R.choice(["refunds", "charges", "invoices"]), "customer": cid, "limit": R.randrange(5, 50)}, out, ok=False)
    return r.end("failed", "error")


def l_thought_loop(v):
    """The agent keeps producing the same plan; its tool calls bring nothing new."""
    r = Run(f"loop-thought-{v}", "claude-code", True, "content_repetition")
    coding_noise(r, R.randrange(4, 8))
    plan = R.choice(["I need to verify the database migration ran before touching the model. Let me check the migrations folder.",
                     "Before editing the serializer I should confirm which version of the API schema is active. Let me look at the schema file.",
                     "The failing test depends on the fixture data. I'll inspect the fixture loader once more to be sure."])
    r.loop_here()
    for k in range(R.randrange(3, 6)):
        if k == 2:
            r.evident()
        r.say(plan if k % 2 == 0 else plan.replace("Let me", "I'll").replace("once more", "again"))
        r.call("bash", {"command": "ls migrations/ | tail -3"}, bash_out("0041_add_index.py\n0042_tenant_fk.py\n0043_backfill.py"))
    return r.end()


def l_slow_interleaved(v):
    """A 5-6 action loop body with thinking in between; each call returns what it did last time."""
    r = Run(f"loop-slow-{v}", "researcher", True, "repeated_operation")
    coding_noise(r, 3)
    body = [("web_search", {"query": "ministry of finance bond auction schedule q3"}, {"results": [{"url": "https://gov.example/auctions", "title": "Auctions"}]}),
            ("fetch", {"url": "https://gov.example/auctions"}, {"status": 200, "text": "Auction calendar is published quarterly. " + prose(30)}),
            ("extract_table", {"url": "https://gov.example/auctions", "selector": "table.calendar"}, {"rows": []}),
            ("fetch", {"url": "https://gov.example/auctions/archive"}, {"status": 200, "text": "Archive: " + prose(25)}),
            ("web_search", {"query": "bond auction calendar site:gov.example"}, {"results": [{"url": "https://gov.example/auctions", "title": "Auctions"}]})]
    if v % 2 == 1:
        body.append(("read_file", {"path": "notes/auctions.md"}, {"content": "TODO: find Q3 dates"}))
    r.loop_here()
    for k in range(R.randrange(4, 6)):
        for tool, inp, out in body:
            if k == 1 and (tool, inp) == body[-1][:2]:
                r.evident()
            r.call(tool, inp, out, gap=R.randrange(3000, 20000))
            if R.random() < 0.5:
                r.say(f"{prose(8)}; the Q3 dates are still not there.")
    return r.end("completed", "max_steps_reached")


def l_context_balloon(v):
    """The agent re-reads big files over and over; context balloons, outputs stay the same."""
    r = Run(f"loop-balloon-{v}", "openhands", True, "context_pressure")
    coding_noise(r, R.randrange(3, 6))
    big = [f"/workspace/repo/{pyfile()}" for _ in range(2)]
    bodies = [numbered(code_block(60)) for _ in big]
    r.loop_here()
    for k in range(R.randrange(6, 10)):
        if k == 3:
            r.evident()
        j = k % 2
        r.call("str_replace_editor", {"command": "view", "path": big[j]}, bodies[j], grow=R.randrange(6000, 12000))
        if R.random() < 0.4:
            r.say("Let me re-read the file to get the full picture.", grow=R.randrange(200, 600))
    return r.end("failed", "context_limit")


def l_compaction_loop(v):
    """Repeated context compactions with the same summary, nothing done in between."""
    r = Run(f"loop-compaction-{v}", "claude-code", True, "content_repetition")
    coding_noise(r, R.randrange(5, 10))
    summary = ("Summary of the conversation so far: the user asked to migrate the billing module to the new "
               "ledger API. Files touched: app/billing/ledger.py, app/billing/tests/test_ledger.py. Pending: "
               "fix the failing reconciliation test.")
    ledger = numbered(code_block(40))
    r.loop_here()
    for k in range(R.randrange(3, 6)):
        if k == 2:
            r.evident()
        r.say(summary, step_type="compaction", grow=-R.randrange(3000, 6000))
        r.call("Read", {"file_path": "/home/dev/repo/app/billing/ledger.py"}, ledger, grow=R.randrange(9000, 15000))
    return r.end("failed", "context_limit")


def l_rate_limit_forever(v):
    """429 forever with varying retry-after values and request ids."""
    r = Run(f"loop-429-{v}", "research-agent", True, "repeated_failure")
    r.call("web_search", {"query": prose(4)}, {"results": [prose(5)]})
    r.loop_here()
    for k in range(R.randrange(8, 14)):
        if k == 5:
            r.evident()
        out = {"error": {"code": 429, "message": f"Rate limit reached for requests. Limit: 60 / min. Please try again in {R.randrange(1, 40)}s.",
                         "type": "rate_limit_error"}, "request_id": f"req_{hx(24)}"}
        r.call("llm_subcall", {"model": "small", "prompt": "Summarise the following page ..."}, out, ok=False, gap=R.randrange(500, 2500))
    return r.end("failed", "error")


def l_sql_varying_error(v):
    """The SQL agent keeps rewriting a query that always hits the same permission error."""
    r = Run(f"loop-sql-perm-{v}", "sql-analyst", True, "repeated_failure")
    r.call("sql", {"query": "SHOW TABLES"}, {"rows": [["orders"], ["customers"], ["pii_contacts"]]})
    r.loop_here()
    for k in range(R.randrange(4, 7)):
        if k == 2:
            r.evident()
        cols = ", ".join(R.sample(["email", "phone", "name", "country", "created_at"], 3))
        r.call("sql", {"query": f"SELECT {cols} FROM pii_contacts WHERE country = '{R.choice(['DE', 'FR', 'US'])}' LIMIT {R.randrange(10, 100)}"},
               {"error": "ERROR:  permission denied for table pii_contacts\nSQLSTATE: 42501"}, ok=False)
    return r.end("failed")


def l_rl_stuck(v):
    """RL worker bumping into a wall: same action, same observation, tiny latency."""
    r = Run(f"loop-rl-{v}", f"rollout-w{v + 10}", True, "repeated_operation", project="rl-train")
    pos = [3, 4]
    for k in range(R.randrange(5, 15)):
        a = R.choice(["up", "left", "right"])
        pos[0] += 1 if a == "right" else (-1 if a == "left" else 0)
        r.call("step", {"a": a}, {"obs": {"pos": list(pos), "hp": 100}, "r": 0.0, "done": False}, gap=100, latency=5)
    r.loop_here()
    for k in range(R.randrange(8, 20)):
        if k == 2:
            r.evident()
        r.call("step", {"a": "down"}, {"obs": {"pos": list(pos), "hp": 100}, "r": -0.01, "done": False, **({"elapsed_steps": k} if v % 2 else {})}, gap=100, latency=5)
    return r.end("completed", "max_steps_reached")


def l_browser_stuck(v):
    """Clicking the same button; the page never changes (screenshots identical)."""
    r = Run(f"loop-browser-{v}", "browser-agent", True, "cycle")
    r.call("browser_navigate", {"url": "https://shop.example.com/checkout"}, {"title": "Checkout", "status": 200})
    shot = f"s3://shots/{hx(20)}.png"
    dom = hx(16)
    r.loop_here()
    for k in range(R.randrange(4, 7)):
        r.call("browser_click", {"selector": "#place-order", "timeout_ms": 5000}, {"clicked": True})
        if k == 1:
            r.evident()
        r.call("browser_screenshot", {"full_page": False}, {"path": shot, "dom_hash": dom, "text_excerpt": "Checkout - Please accept the terms to continue"})
        if v % 2 == 1:
            r.say("The order was not placed yet; clicking Place order again.")
    return r.end()


def l_browser_timeout(v):
    """Playwright click timeouts on the same element forever (retryable class that never recovers)."""
    r = Run(f"loop-pw-timeout-{v}", "browser-agent", True, "repeated_failure")
    r.call("browser", {"action": "navigate", "url": "https://app.example.com/reports"}, {"title": "Reports"})
    r.loop_here()
    for k in range(R.randrange(7, 11)):
        if k == 5:
            r.evident()
        err = ("TimeoutError: locator.click: Timeout 30000ms exceeded.\nCall log:\n  - waiting for locator(\"button:has-text('Export')\")\n"
               f"  -   locator resolved to <button disabled class=\"btn btn-primary\">Export</button>\n  - attempting click action\n"
               f"  -   waiting for element to be visible, enabled and stable\n  -   element is not enabled - waiting...")
        r.call("browser", {"action": "click", "selector": "button:has-text('Export')"}, {"error": err}, ok=False, gap=31000)
    return r.end("failed", "timeout")


def l_poll_never(v):
    """Polling without any wait, a job stuck in the same state; unrecognised tool names."""
    r = Run(f"loop-poll-stuck-{v}", "etl-agent", True, "repeated_operation")
    job = f"job_{hx(12)}"
    r.call("submit", {"pipeline": "nightly", "params": {"date": "2026-05-10"}}, {"job": job, "state": "PENDING"})
    r.loop_here()
    for k in range(R.randrange(25, 35)):
        if k == 19:
            r.evident()
        r.call("bash", {"command": f"etlctl describe {job} -o json"}, bash_out(json.dumps({"job": job, "state": "PENDING", "queue_position": 7, "checked": iso(r.t)})), gap=R.randrange(400, 1500))
    return r.end("failed", "max_steps_reached")


def l_empty_responses(v):
    r = Run(f"loop-empty-{v}", "chat-agent", True, "content_repetition")
    coding_noise(r, R.randrange(3, 6))
    r.loop_here()
    for k in range(R.randrange(4, 7)):
        if k == 2:
            r.evident()
        r.say("" if k % 2 == 0 else "   ", step_type="message")
    return r.end()


def l_chant(v):
    r = Run(f"loop-chant-{v}", "chat-agent", True, "content_repetition")
    coding_noise(r, R.randrange(3, 6))
    unit = R.choice(["I will now call the tool to check the status of the deployment and then report back. ",
                     "Let me verify the configuration again to make sure the setting is applied correctly. "])
    r.loop_here()
    r.evident()
    r.say("Okay. " + unit * R.randrange(12, 25), step_type="message")
    return r.end()


def l_crew_tool_loop(v):
    """Inside a crew, the researcher repeats the same search with the same result."""
    r = Run(f"loop-crew-tool-{v}", "crew", True, "repeated_operation")
    r.say("Research the vendor's SOC2 status.", agent="researcher", caller="manager")
    r.loop_here()
    for k in range(R.randrange(5, 8)):
        if k == 2:
            r.evident()
        r.call("web_search", {"query": "vendor acme soc2 type ii report", "engine": "bing"},
               {"results": [{"title": "Acme Trust Center", "url": "https://trust.acme.example/"}], "took_ms": R.randrange(80, 400)}, agent="researcher")
        r.say("The trust center does not show the report date. Searching again.", agent="researcher")
    return r.end()


def l_git_cycle(v):
    """A -> B -> C: rebase, conflict, abort, and again."""
    r = Run(f"loop-git-{v}", "openhands", True, "cycle")
    coding_noise(r, R.randrange(3, 6))
    r.loop_here()
    for k in range(R.randrange(3, 5)):
        r.call("bash", {"command": "git rebase origin/main"},
               bash_out("Auto-merging app/billing/ledger.py\nCONFLICT (content): Merge conflict in app/billing/ledger.py\n"
                        "error: could not apply 5d6e7f8... ledger: switch to v2 API", 1))
        r.call("bash", {"command": "git status --short"}, bash_out("UU app/billing/ledger.py"))
        if k == 1:
            r.evident()
        r.call("bash", {"command": "git rebase --abort"}, bash_out("", 0))
    return r.end()


def l_support_lookup_loop(v):
    """Customer-support agent re-fetching the same order and re-reading the same policy."""
    r = Run(f"loop-support-{v}", "support-agent", True, "cycle")
    order = R.randrange(10**6, 10**7)
    r.call("get_customer", {"email": "sam@example.com"}, {"id": "cus_77", "orders": [order]})
    r.loop_here()
    for k in range(R.randrange(3, 5)):
        r.call("get_order", {"order_id": order, "expand": ["items", "shipping"]}, {"id": order, "status": "delivered", "refundable": False,
                                                                                     "items": [{"sku": "A-1", "qty": 1}], "fetched_at": iso(r.t), "trace_id": hx(32)})
        r.call("search_kb", {"q": "refund after delivery policy"}, {"articles": [{"id": 311, "title": "Refunds after delivery", "body": "Refunds are possible within 30 days if the item is unused."}]})
        if k == 1:
            r.evident()
        r.call("check_refund_eligibility", {"order_id": order}, {"eligible": False, "reason": "refund window closed"})
        if R.random() < 0.5:
            r.say("The customer insists; let me re-check the order details.")
    return r.end()


def l_varying_args_same_error(v):
    """Same 'module not found' error whatever the agent tries to run."""
    r = Run(f"loop-modnotfound-{v}", "claude-code", True, "repeated_failure")
    coding_noise(r, R.randrange(3, 6))
    r.loop_here()
    cmds = ["python -m app.worker", "python app/worker.py", "python3 -m app.worker --once", "PYTHONPATH=. python app/worker.py",
            "python -m app.worker --debug", "cd app && python worker.py"]
    for c in cmds[:R.randrange(4, 7)]:
        if c == cmds[2]:
            r.evident()
        tb = traceback("ModuleNotFoundError", "No module named 'ledger_client'", frames=2, seed=v)
        if "-m" in c:
            tb = tb.replace("Traceback (most recent call last):\n", 'Traceback (most recent call last):\n  File "<frozen runpy>", line 198, in _run_module_as_main\n  File "<frozen runpy>", line 88, in _run_code\n')
        r.call("Bash", {"command": c}, tb + "\n[exit code 1]", ok=False)
    return r.end("failed")


# ------------------------------------------------------------------ short loops (added later)
# Appended after the original families so the runs above are unchanged. Written from what the
# peers document as stuck (OpenHands: four identical action-observation pairs, A-B-A-B-A-B,
# three agent messages in a row; Roo Code / Cline: three identical consecutive calls; Gemini
# CLI: a chunk repeated within one response) and from what their users reported as false
# positives (multi-part answers, markdown reports, progress notes that change every call).

def l_oh_four_pairs(v):
    """OpenHands' first scenario: the same command, the same observation, four times."""
    r = Run(f"loop-oh-pairs-{v}", "openhands", True, "repeated_operation")
    coding_noise(r, R.randrange(3, 8))
    cmd = ["cat setup.cfg", "python -c 'import ledger_client'", "ls -la /workspace/repo/build"][v % 3]
    out = bash_out(["[metadata]\nname = app\nversion = 1.4.2", "ModuleNotFoundError: No module named 'ledger_client'", "ls: cannot access '/workspace/repo/build': No such file or directory"][v % 3], [0, 1, 2][v % 3])
    r.loop_here()
    for k in range(4):
        if k == 2:
            r.evident()
        r.call("bash", {"command": cmd}, out)
    return r.end("failed", "max_steps_reached")


def l_oh_alternating(v):
    """OpenHands' alternating pattern: A, B, A, B, A, B with identical observations."""
    r = Run(f"loop-oh-alt-{v}", "openhands", True, "cycle")
    coding_noise(r, R.randrange(3, 6))
    f = f"/workspace/repo/{pyfile()}"
    body = numbered(code_block(8))
    r.loop_here()
    for k in range(3):
        r.call("str_replace_editor", {"command": "view", "path": f}, body)
        if k == 1:
            r.evident()
        r.call("bash", {"command": "python -m pytest -q tests/test_ledger.py"}, bash_out(pytest_out(11, 1, ["test_reconcile"], dur=1.5), 1))
    return r.end()


def l_stream_chant(v):
    """One streamed response that repeats itself (Gemini CLI's content loop)."""
    r = Run(f"loop-stream-chant-{v}", "gemini-cli", True, "content_repetition")
    coding_noise(r, R.randrange(2, 5))
    unit = ["Checking the build output for the failing module now. ", "Retrying. Retrying again. "][v % 2]
    r.loop_here()
    r.evident()
    r.say("Sure. " + unit * [10, 24][v % 2], step_type="message")
    return r.end()


def l_sdk_monologue(v):
    """The agent keeps sending messages without calling a tool or hearing from the user."""
    r = Run(f"loop-sdk-monologue-{v}", "openhands-sdk", True, "content_repetition")
    coding_noise(r, R.randrange(3, 6))
    msgs = ["I'll start by examining the repository structure.", "Let me look into the test failures next.",
            "Now I'm going to check the CI configuration.", "Let me examine the logs to understand the failure."]
    r.loop_here()
    for k, m in enumerate(msgs[:3 + v % 2]):
        if k == 2:
            r.evident()
        r.say(m, step_type="message")
    return r.end()


def h_cline_progress(v):
    """Cline-style calls carry a task_progress note that changes every call; the results change
    too (real work)."""
    r = Run(f"ok-cline-progress-{v}", "cline")
    done = []
    for k in range(R.randrange(5, 8)):
        f = pyfile()
        done.append(f)
        note = "\n".join(f"- [x] {d}" for d in done) + "\n- [ ] run tests"
        r.call("read_file", {"path": f, "task_progress": note}, numbered(code_block(6)))
        r.call("replace_in_file", {"path": f, "diff": f"- {R.choice(NOUNS)}\n+ {R.choice(NOUNS)}", "task_progress": note}, f"The content was successfully saved to {f}.")
    r.call("execute_command", {"command": "pytest -q", "task_progress": "- [x] all files\n- [x] run tests"}, pytest_out(30, 0, []))
    return r.end()


def h_report_answer(v):
    """A long markdown answer: a table, a checklist with a shared prefix, a box diagram."""
    r = Run(f"ok-report-{v}", "chat-agent")
    coding_noise(r, 2)
    rows = "\n".join(f"| {R.choice(NOUNS)} | {R.randrange(1000)} | {R.choice(['ok', 'degraded'])} |" for _ in range(25))
    checks = "\n".join(f"- [ ] Verify the replica lag on the {R.choice(NOUNS)} cluster in region {k}" for k in range(15))
    diagram = "\n".join(["+------------+      +------------+"] + ["|            | ---> |            |"] * 8 + ["+------------+      +------------+"])
    r.say(f"## Status\n\n| service | p99 | state |\n|---|---|---|\n{rows}\n\n## Checklist\n\n{checks}\n\n## Flow\n\n{diagram}\n", step_type="message")
    r.say("Anything else you want me to look at?", step_type="message")
    r.say("Yes: check the ledger service too.", step_type="user")
    r.call("http_request", {"method": "GET", "url": "https://status.internal/ledger"}, {"status": 200, "p99_ms": R.randrange(80, 400)})
    r.say("The ledger service is healthy.", step_type="message")
    return r.end()


def h_parts_answer(v):
    """A long explanation sent as several messages, each with new content."""
    r = Run(f"ok-parts-{v}", "chat-agent")
    coding_noise(r, 2)
    topics = R.sample(NOUNS, 4)
    for k in range(3 + v % 2):
        t = topics[k]
        facts = ", ".join(f"`{ident()}` {R.choice(['returns', 'raises', 'caches', 'retries'])} {R.choice(NOUNS)}s after {R.randrange(2, 90)} ms"
                          for _ in range(4))
        r.say(f"({k + 1}/{3 + v % 2}) On the {t} path: {facts}. See {pyfile()} lines {R.randrange(10, 400)}-{R.randrange(400, 800)}.", step_type="message")
    return r.end()


# ------------------------------------------------------------------ assembly

HEALTHY = [(h_long_coding, 3), (h_testfix, 4), (h_kubectl_poll, 3), (h_ci_poll_same, 3), (h_bg_process, 2),
           (h_retry_recover, 4), (h_reread_after_edit, 3), (h_config_reads, 3), (h_pagination, 3),
           (h_browser_task, 2), (h_research, 2), (h_paraphrase_productive, 2), (h_support_batch, 2),
           (h_sql_explore, 2), (h_sql_backfill_watch, 2), (h_rl_rollout, 2), (h_crew_converge, 3),
           (h_crew_qa, 2), (h_debug_session, 1), (h_long_data, 1), (h_edit_retry_different, 2), (h_docker_health, 2)]
LOOPING = [(l_edit_same_fail, 3), (l_edit_claude_recoverable, 2), (l_volatile_status, 3), (l_tmpdir_rerun, 2),
           (l_paraphrase_search, 3), (l_pingpong, 3), (l_delegation3, 2), (l_writer_reviewer, 2), (l_403_varying, 2),
           (l_thought_loop, 3), (l_slow_interleaved, 2), (l_context_balloon, 2), (l_compaction_loop, 1),
           (l_rate_limit_forever, 2), (l_sql_varying_error, 2), (l_rl_stuck, 2), (l_browser_stuck, 2),
           (l_browser_timeout, 1), (l_poll_never, 1), (l_empty_responses, 1), (l_chant, 1), (l_crew_tool_loop, 2),
           (l_git_cycle, 2), (l_support_lookup_loop, 2), (l_varying_args_same_error, 2),
           (l_oh_four_pairs, 3), (l_oh_alternating, 2), (l_stream_chant, 2), (l_sdk_monologue, 2)]
HEALTHY_MORE = [(h_cline_progress, 2), (h_report_answer, 2), (h_parts_answer, 2)]


def main():
    runs = []
    for fam, n in HEALTHY + LOOPING + HEALTHY_MORE:
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
