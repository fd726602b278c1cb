"""HttpGuard against a small server-sent events server in the test: what the guard asks for,
what it does with each event, and how it comes back after the connection goes."""
import json
import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from eddy_agent import HttpGuard, LoopDetected


def signal(event_id, severity, run_id="r1", project_id="p"):
    kind = "loop_detected" if severity in ("alert", "stop") else "loop_warning"
    return {"kind": kind, "event_id": event_id, "project_id": project_id, "run_id": run_id,
            "step_index": 9, "ts": "2026-01-01T00:00:00Z", "detector": "cycle",
            "severity": severity, "pattern": "a -> b", "fingerprint": "f", "hits": 3,
            "step_indices": [1, 2, 3], "first_step_index": 1, "evidence": {},
            "advice": f"eddy: stop doing a -> b ({event_id})"}


def sse(name, data, event_id=None):
    out = f"event: {name}\n"
    if event_id is not None:
        out += f"id: {event_id}\n"
    return out + f"data: {json.dumps(data)}\n\n"


class Bridge:
    """Answers each connection with the next script: (status, headers, chunks, keep_open).
    A chunk is a string to send; the connection is then held until `release` (keep_open) or
    closed. Each request's headers are recorded."""

    def __init__(self):
        self.scripts = queue.Queue()
        self.requests = queue.Queue()
        self.release = threading.Event()
        bridge = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                bridge.requests.put((self.path, dict(self.headers)))
                status, headers, chunks, keep_open = bridge.scripts.get(timeout=10)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if status != 200:
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for c in chunks:
                    self.wfile.write(c.encode())
                    self.wfile.flush()
                if keep_open:
                    bridge.release.wait(10)
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/base"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def serve(self, chunks, keep_open=True, status=200, headers=None):
        self.scripts.put((status, headers or {}, chunks, keep_open))

    def request(self):
        return self.requests.get(timeout=10)

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def bridge():
    b = Bridge()
    yield b
    b.close()


def eventually(cond, timeout=10.0):
    """Wait for a condition set by the guard's thread (no fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def guard_for(bridge, **kw):
    stops = queue.Queue()
    g = HttpGuard(bridge.url, "kw_test", on_stop=stops.put, backoff_s=(0.01, 0.05), **kw)
    g.stops = stops
    return g


def test_the_project_stream_is_asked_for_with_the_key(bridge):
    bridge.serve([sse("ready", {"project_id": "p"}, "e-0")])
    g = guard_for(bridge)
    try:
        assert g.connected, "ready once the bridge says it follows"
        path, headers = bridge.request()
        # Watching nothing yet: it asks for nothing (an empty run list), not the whole project.
        assert path == "/base/v1/ingest/agent/signals?run_id="
        assert headers["Authorization"] == "Bearer kw_test"
        assert headers["Accept"] == "text/event-stream"
        assert "Last-Event-ID" not in headers
        g.watch("r1", "p")
        g.check("r1")
    finally:
        g.close()
    assert not g._thread.is_alive()


def test_signals_arrive_on_one_stream_and_a_reconnect_resumes_after_the_last_id(bridge):
    # First connection: a warning, a signal of an unwatched run, then the bridge goes away.
    bridge.serve([sse("ready", {}, "e-1"),
                  sse("signal", signal("w", "warn"), "e-2"),
                  sse("signal", signal("x", "stop", run_id="other"), "e-3")], keep_open=False)
    # The second: a 503 while the restarted bridge reads back, then the stream with the stop,
    # a copy of it, and the run's end.
    bridge.serve([], status=503, headers={"Retry-After": "0"})
    bridge.serve([sse("resync", {}),
                  sse("signal", signal("w", "warn")),
                  sse("ready", {}, "f-7"),
                  ": keep-alive\n\n",
                  sse("signal", signal("s", "stop"), "f-8"),
                  sse("signal", signal("s", "stop"), "f-9"),
                  sse("run_terminated", {"kind": "run_terminated", "project_id": "p",
                                         "run_id": "r1"}, "f-10")])
    g = guard_for(bridge, start=False)
    g.watch("r1", "p")
    g.start(wait_ready=None)
    try:
        stop = g.stops.get(timeout=10)
        assert stop.event_id == "s" and stop.run_id == "r1"
        with pytest.raises(LoopDetected):
            g.check("r1")
        assert [s["event_id"] for s in g.signals("r1")] == ["w", "s"]
        assert g.stopped("other") is None
        _, first = bridge.request()
        assert "Last-Event-ID" not in first
        # Every later request resumes after the last event taken, not the last one sent.
        _, second = bridge.request()
        _, third = bridge.request()
        assert second["Last-Event-ID"] == "e-3" and third["Last-Event-ID"] == "e-3"
        eventually(lambda: g.terminated("r1") is not None)
        assert g.stops.empty(), "a copy of the stop does not fire again"
    finally:
        g.close()
    assert g.stats()["duplicates"] == 2  # the warning after the resync, and the stop's copy
    assert g.stats()["connects"] == 2 and g.stats()["resyncs"] == 1
    assert g.last_event_id == "f-10"
    assert g.terminated("r1") == {"kind": "run_terminated", "project_id": "p", "run_id": "r1"}


def test_watching_a_run_reopens_the_narrowed_stream_from_the_last_id(bridge):
    bridge.serve([sse("ready", {}, "e-5")])
    bridge.serve([sse("signal", signal("s", "stop", run_id="r 1"), "e-6"), sse("ready", {}, "e-6")])
    g = guard_for(bridge, max_narrowed_runs=1)
    try:
        assert bridge.request()[0].endswith("/signals?run_id=")
        g.watch("r 1", "p")
        path, headers = bridge.request()
        assert path.endswith("/signals?run_id=&run_id=r+1"), path
        assert headers["Last-Event-ID"] == "e-5"
        assert g.stops.get(timeout=10).run_id == "r 1"
        g.watch("r 1")  # already watched: the stream stays
        bridge.serve([sse("ready", {}, "e-7")])
        g.watch("r2", "p")  # past max_narrowed_runs: the whole project
        path, headers = bridge.request()
        assert path.endswith("/signals"), path
        assert headers["Last-Event-ID"] == "e-6"
        assert bridge.requests.empty()
    finally:
        g.close()


def test_a_guard_that_never_narrows_follows_the_project_from_the_start(bridge):
    bridge.serve([sse("ready", {}, "e-0")])
    g = guard_for(bridge, max_narrowed_runs=0)
    try:
        assert bridge.request()[0].endswith("/signals")
        g.watch("r1", "p")
        assert bridge.requests.empty() and g.connected
    finally:
        g.close()


def test_another_projects_run_of_the_same_id_does_not_stop(bridge):
    bridge.serve([sse("ready", {}, "e-0"),
                  sse("signal", signal("b", "stop", project_id="q"), "e-1"),
                  sse("signal", signal("a", "stop"), "e-2")])
    g = guard_for(bridge, start=False)
    g.watch("r1", "p")
    g.start(wait_ready=None)
    try:
        assert g.stops.get(timeout=10).event_id == "a"
    finally:
        g.close()


def test_steering_is_the_guards(bridge):
    # An alert is a steer, once; a stop after it stops the run.
    bridge.serve([sse("ready", {}, "e-0"), sse("signal", signal("al", "alert"), "e-1")])
    g = guard_for(bridge, start=False)
    g.watch("r1", "p")
    g.start(wait_ready=10)
    try:
        got = []
        eventually(lambda: got.append(g.steer("r1")) or got[-1] is not None)
        steer = got[-1]
        assert steer.message == "eddy: stop doing a -> b (al)"
        assert g.steer("r1") is None
        g.check("r1")
    finally:
        g.close()


def test_a_refused_key_is_reported_and_retried(bridge):
    bridge.serve([], status=401)
    bridge.serve([sse("ready", {}, "e-0")])
    g = guard_for(bridge, wait_ready=10)
    try:
        assert g.connected
        assert g.errors and "refused the API key (401)" in g.errors[0]
    finally:
        g.close()


def test_close_ends_a_stream_that_is_waiting():
    b = Bridge()
    b.serve([sse("ready", {}, "e-0")])
    g = HttpGuard(b.url, "kw_test")
    try:
        assert g.connected
        g.close(timeout=5)
        assert not g._thread.is_alive()
    finally:
        b.close()


def test_url_and_key_come_from_the_environment(monkeypatch, bridge):
    with pytest.raises(ValueError, match="EDDY_INGEST_URL"):
        HttpGuard(start=False)
    monkeypatch.setenv("EDDY_INGEST_URL", bridge.url)
    monkeypatch.setenv("EDDY_INGEST_API_KEY", "kw_env")
    bridge.serve([sse("ready", {}, "e-0")])
    g = HttpGuard()
    try:
        assert bridge.request()[1]["Authorization"] == "Bearer kw_env"
        # An argument wins over the environment.
        assert HttpGuard("http://elsewhere:1", start=False).url == "http://elsewhere:1"
        bridge.serve([sse("ready", {}, "e-0")])
        assert HttpGuard.shared() is HttpGuard.shared()
    finally:
        g.close()
        for s in list(HttpGuard._shared.values()):
            s.close()
        HttpGuard._shared.clear()
