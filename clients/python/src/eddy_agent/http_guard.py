"""HttpGuard: a guard that follows its runs over `eddy ingest-http`'s project signal stream.

One background thread holds one server-sent events connection per process to
`GET /v1/ingest/agent/signals`, authenticated with an ingest API key: the bridge sends only that
key's project's signals and run ends, and the guard keeps those of its watched runs. Compared to
the Kafka `Guard`, which reads every partition of the signals topic in every agent process, the
broker serves the topic once per bridge instead of once per process, and a process never sees
another project's verdicts.

While it watches at most `max_narrowed_runs` runs, the guard asks the bridge for those runs
only (`?run_id=...`) and reconnects, resuming from its last event id, when it starts watching
another: each process then receives its own runs' signals and no one else's. Past that many it
follows the whole project and keeps its runs' events itself.

Every event carries an SSE id; after a dropped connection (a bridge restart, a load balancer's
idle cut, a network blip) the guard reconnects with backoff and `Last-Event-ID`, and the bridge
resends what it still holds after that id, or its table of verdicts (`resync`) when it no longer
does. Only the standard library is used (`http.client`), so the guard adds no dependency.
"""
from __future__ import annotations

import http.client
import json
import logging
import random
import re
import socket
import ssl
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple
from urllib.parse import urlencode, urlsplit

from ._config import env as _env
from ._verdicts import LoopDetected
from .guard import _GuardBase

log = logging.getLogger("eddy_agent.http_guard")

ROUTE = "/v1/ingest/agent/signals"

# The run id of an event's JSON without parsing it all: eddy writes `run_id` before the
# free-form fields, and a quote inside a string value is escaped, so the first match is the key.
_RUN_ID = re.compile(r'"run_id":"([^"\\]*)"')


class HttpGuardError(Exception):
    """The bridge refused the stream for a reason retrying will not fix by itself (a wrong key)."""


class HttpGuard(_GuardBase):
    """Watches runs like `Guard`, fed by eddy's HTTP bridge instead of Kafka.

    `url` is the bridge's base URL (`http://eddy-ingest:8080`), `api_key` an ingest API key of
    the project whose runs are watched; both default to `EDDY_INGEST_URL` / `EDDY_INGEST_API_KEY`.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        api_key: Optional[str] = None,
        min_severity: str = "stop",
        *,
        on_stop: Optional[Callable[[LoopDetected], None]] = None,
        wait_ready: Optional[float] = 10.0,
        max_watched: int = 100_000,
        steer_on: Optional[str] = "alert",
        max_steers: int = 3,
        start: bool = True,
        read_timeout_s: float = 45.0,
        backoff_s: Tuple[float, float] = (0.1, 5.0),
        ssl_context: Optional[ssl.SSLContext] = None,
        headers: Optional[Dict[str, str]] = None,
        max_narrowed_runs: int = 200,
    ):
        super().__init__(min_severity, on_stop, max_watched, steer_on, max_steers)
        url = url or _env("EDDY_INGEST_URL")
        api_key = api_key or _env("EDDY_INGEST_API_KEY")
        if not url:
            raise ValueError("url is required (or set EDDY_INGEST_URL): the base URL of eddy ingest-http")
        if not api_key:
            raise ValueError("api_key is required (or set EDDY_INGEST_API_KEY): an ingest API key")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http(s)://host[:port][/prefix], not {url!r}")
        self.url = url
        self._api_key = api_key
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._path = parts.path.rstrip("/") + ROUTE
        self._ssl = ssl_context
        self._extra_headers = dict(headers or {})
        # The bridge's keep-alive comes every 15 s: three missed is a dead connection that no
        # FIN or RST announced (a NAT or load balancer forgot it).
        self._read_timeout = read_timeout_s
        self._backoff = backoff_s
        # No `min_severity` asked of the bridge: verdict() and signals() report every severity,
        # and steering acts on alerts below the stop.
        self.max_narrowed_runs = max_narrowed_runs
        # A run was watched since the stream's list was taken: reconnect with the new list.
        self._stale = False
        self.last_event_id: Optional[str] = None
        self._conn: Optional[http.client.HTTPConnection] = None
        # The connection's socket, kept apart: http.client drops `conn.sock` once a response that
        # ends with the connection is open, and close() must still reach it.
        self._sock: Optional[socket.socket] = None
        self._conn_lock = threading.Lock()
        self.connects = 0
        self.resyncs = 0
        self.events = 0
        # `signal` and `run_terminated` events received, of any run.
        self.updates = 0
        self.bytes = 0
        self._thread = threading.Thread(target=self._run, name="eddy-agent-http-guard",
                                        daemon=True)
        if start:
            self.start(wait_ready)

    _shared: Dict[tuple, "HttpGuard"] = {}
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls, url: Optional[str] = None, api_key: Optional[str] = None,
               min_severity: str = "stop", **kwargs: Any) -> "HttpGuard":
        """The process's one guard for (url, api_key, min_severity, steer_on), made on first use
        (with `kwargs`): every agent of the process shares its one connection."""
        url = url or _env("EDDY_INGEST_URL")
        api_key = api_key or _env("EDDY_INGEST_API_KEY")
        key = (url, api_key, min_severity, kwargs.get("steer_on", "alert"))
        return cls._one_per_process(key, lambda: cls(url, api_key, min_severity, **kwargs))

    def wait_ready(self, timeout: float) -> bool:
        """True once the stream is open and following (a signal from then on is not missed)."""
        ok = self._ready.wait(timeout)
        if not ok:
            log.warning("eddy http guard: no stream from %s after %.1fs; still trying", self.url,
                        timeout)
        return ok

    def watch(self, run_id: str, project_id: Optional[str] = None) -> None:
        """Act on this run's signals. A narrowed stream is reopened with the run added (resuming
        after its last event, so nothing in between is lost)."""
        new = not self._verdicts.is_watched(run_id)
        super().watch(run_id, project_id)
        if new and self.max_narrowed_runs > 0:
            with self._conn_lock:
                self._stale = True
            self._drop_connection()

    def _query(self) -> str:
        """The stream's query: the watched runs, while few enough; else the whole project."""
        with self._conn_lock:
            self._stale = False
        runs = list(self._verdicts._runs)
        if self.max_narrowed_runs <= 0 or len(runs) > self.max_narrowed_runs:
            return ""
        # An empty run_id first: a guard watching nothing asks for nothing, not for everything.
        return "?" + urlencode([("run_id", "")] + [("run_id", r) for r in runs])

    @property
    def connected(self) -> bool:
        return self._ready.is_set()

    def stats(self) -> Dict[str, int]:
        v = self._verdicts
        return {"received": v.received, "duplicates": v.duplicates, "ignored": v.ignored,
                "connects": self.connects, "resyncs": self.resyncs, "events": self.events,
                "updates": self.updates, "bytes": self.bytes}

    def close(self, timeout: float = 10.0) -> None:
        self._closing.set()
        self._drop_connection()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _drop_connection(self) -> None:
        """Cut the current connection: its blocked read returns and the thread moves on."""
        with self._conn_lock:
            sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # ------------------------------------------------------------------ stream thread
    def _run(self) -> None:
        delay = self._backoff[0]
        while not self._closing.is_set():
            wait = None
            renew = False
            try:
                wait = self._follow()
                if self._ready.is_set():
                    delay = self._backoff[0]  # it was up: the next try is soon
            except HttpGuardError as e:
                log.error("eddy http guard: %s", e)
                self.errors.append(str(e))
                delay = self._backoff[1]
            except (OSError, http.client.HTTPException, ValueError) as e:
                log.debug("eddy http guard: stream from %s lost: %r", self.url, e)
            except Exception as e:  # the guard must never take the agent down
                log.exception("eddy http guard: stream thread error")
                self.errors.append(repr(e))
            finally:
                self._ready.clear()
                with self._conn_lock:
                    conn, self._conn, self._sock = self._conn, None, None
                    renew = self._stale
                if conn is not None:
                    conn.close()
            if self._closing.is_set():
                break
            if renew:
                continue  # cut on purpose, for a new list of runs: at once
            # Jitter: a thousand guards cut off by one bridge restart do not come back at once.
            pause = wait if wait is not None else delay * random.uniform(0.5, 1.0)
            self._closing.wait(pause)
            delay = min(delay * 2, self._backoff[1])

    def _connection(self) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=self._read_timeout,
                                               context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=self._read_timeout)

    def _follow(self) -> Optional[float]:
        """One connection, followed until it ends. Returns how long to wait before the next one
        when the bridge said (503 Retry-After), else None."""
        path = self._path + self._query()
        conn = self._connection()
        conn.connect()
        with self._conn_lock:
            self._conn, self._sock = conn, conn.sock
            # Watched after the list was taken, before the socket was there to cut.
            stale = self._stale
        if self._closing.is_set() or stale:
            return None
        headers = {"Authorization": f"Bearer {self._api_key}", "Accept": "text/event-stream",
                   "Cache-Control": "no-cache", **self._extra_headers}
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = self.last_event_id
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        if resp.status == 503:
            # The bridge is still reading the signals topic back after its start.
            try:
                return float(resp.getheader("Retry-After") or 1)
            except ValueError:
                return 1.0
        if resp.status in (401, 403):
            raise HttpGuardError(f"{self.url} refused the API key ({resp.status})")
        if resp.status != 200:
            raise http.client.HTTPException(f"{self.url}: HTTP {resp.status}")
        self.connects += 1
        self._read_events(resp)
        return None

    def _read_events(self, resp: http.client.HTTPResponse) -> None:
        # Server-sent events (WHATWG HTML §9.2): fields until a blank line, then dispatch.
        name, data, event_id = "", [], None
        while not self._closing.is_set():
            raw = resp.readline()
            if not raw:
                return  # the bridge ended the stream (shutdown): reconnect
            self.bytes += len(raw)
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line == "":
                if data or name:
                    self._dispatch(name or "message", "\n".join(data), event_id)
                name, data, event_id = "", [], None
                continue
            if line.startswith(":"):
                continue  # keep-alive
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
            elif field == "id" and "\0" not in value:
                event_id = value

    def _dispatch(self, name: str, data: str, event_id: Optional[str]) -> None:
        self.events += 1
        if name == "ready":
            self._ready.set()
        elif name == "resync":
            self.resyncs += 1
        elif name in ("signal", "run_terminated"):
            self.updates += 1
            m = _RUN_ID.search(data)
            # Following a whole project, most events are other runs': not worth parsing.
            if m is None or self._verdicts.is_watched(m.group(1)):
                try:
                    event = json.loads(data)
                except ValueError:
                    event = None
                run_id = event.get("run_id") if isinstance(event, dict) else None
                if isinstance(run_id, str) and self._verdicts.is_watched(run_id):
                    self._offer(event)
        # Only once the event is taken: a connection lost while handling it resends it.
        if event_id is not None:
            self.last_event_id = event_id
