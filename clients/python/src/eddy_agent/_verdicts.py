"""What the guard knows about watched runs: pure bookkeeping, no Kafka, no threads of its own.

The guard's consumer thread calls `offer()` with each decoded output event of a watched run;
agent threads call `stop_of()` (a dict lookup) before each step, and `steer()` before a model
call (see `steering`). Signals are delivered at least
once, so a repeated `event_id` is counted and otherwise ignored: a run stops once, however many
copies of its stop signal arrive.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Dict, List, Optional

from ._signals import RANK, SEVERITIES, SIGNAL_KINDS, LoopDetected, severity_rank
from .steering import Steering

__all__ = ["SEVERITIES", "SIGNAL_KINDS", "LoopDetected", "Verdicts", "severity_rank"]


class _Run:
    __slots__ = ("project_id", "seen", "signals", "strongest", "stop", "terminated", "steerable")

    def __init__(self, project_id: Optional[str]):
        self.project_id = project_id
        self.seen: set = set()
        self.signals: List[Dict[str, Any]] = []
        self.strongest: Optional[Dict[str, Any]] = None
        self.stop: Optional[LoopDetected] = None
        self.terminated: Optional[Dict[str, Any]] = None
        # A hook asked for this run's steers (`steer()`): its agent can be steered, so a stop
        # on a loop it was not told about yet becomes a steer first (see `Steering.hold_stop`).
        # A run only ever `check`ed is stopped on its first stop, as before steering.
        self.steerable = False


class Verdicts:
    """Watched runs and the signals that arrived for them."""

    def __init__(self, min_severity: str = "stop", max_watched: int = 100_000,
                 steer_on: Optional[str] = "alert", max_steers: int = 3):

        self.min_rank = severity_rank(min_severity)
        self.steering = Steering(steer_on, max_steers)
        self.min_severity = min_severity
        self.max_watched = max_watched
        self._runs: "OrderedDict[str, _Run]" = OrderedDict()
        # Only the stopped runs, so the agent's check is one lookup in a small dict.
        self._stops: Dict[str, LoopDetected] = {}
        self._lock = threading.Lock()
        self.received = 0
        self.duplicates = 0
        self.ignored = 0

    # ---- agent side
    def watch(self, run_id: str, project_id: Optional[str] = None) -> None:
        with self._lock:
            if run_id in self._runs:
                if project_id is not None and self._runs[run_id].project_id is None:
                    self._runs[run_id].project_id = project_id
                return
            self._runs[run_id] = _Run(project_id)
            while len(self._runs) > self.max_watched:
                old, _ = self._runs.popitem(last=False)
                self._stops.pop(old, None)
                self.steering.forget(old)

    def unwatch(self, run_id: str) -> None:
        with self._lock:
            self._runs.pop(run_id, None)
            self._stops.pop(run_id, None)
            self.steering.forget(run_id)

    def is_watched(self, run_id: str) -> bool:
        return run_id in self._runs

    def stop_of(self, run_id: str) -> Optional[LoopDetected]:
        return self._stops.get(run_id)

    def check(self, run_id: str) -> None:
        stop = self._stops.get(run_id)
        if stop is not None:
            # A fresh exception per raise: re-raising one instance would grow its traceback.
            raise LoopDetected(stop.signal)

    def steer(self, run_id: str):
        """The run's pending steer (`steering.Steer`), handed over once; None once it stopped.
        Asking marks the run as one whose agent can be steered."""
        if run_id in self._stops:
            return None
        run = self._runs.get(run_id)
        if run is not None and not run.steerable:
            with self._lock:
                run.steerable = True
        return self.steering.take(run_id)

    def verdict(self, run_id: str) -> Optional[Dict[str, Any]]:
        """The strongest signal of the run so far (first of equals), whatever min_severity."""
        run = self._runs.get(run_id)
        return run.strongest if run else None

    def signals(self, run_id: str) -> List[Dict[str, Any]]:
        run = self._runs.get(run_id)
        return list(run.signals) if run else []

    def terminated(self, run_id: str) -> Optional[Dict[str, Any]]:
        run = self._runs.get(run_id)
        return run.terminated if run else None

    # ---- consumer side
    def offer(self, event: Dict[str, Any]) -> Optional[LoopDetected]:
        """Take one output event; returns the LoopDetected when this event newly stops its run."""
        if not isinstance(event, dict):
            self.ignored += 1
            return None
        run_id = event.get("run_id")
        with self._lock:
            run = self._runs.get(run_id) if isinstance(run_id, str) else None
            if run is None or (run.project_id is not None and event.get("project_id") != run.project_id):
                self.ignored += 1
                return None
            event_id = event.get("event_id")
            if event_id in run.seen:
                self.duplicates += 1
                return None
            if event_id is not None:
                run.seen.add(event_id)
            self.received += 1
            kind = event.get("kind")
            if kind == "run_terminated":
                run.terminated = event
                return None
            if kind not in SIGNAL_KINDS:
                self.ignored += 1
                return None
            rank = RANK.get(event.get("severity"), -1)
            run.signals.append(event)
            if run.strongest is None or rank > RANK.get(run.strongest.get("severity"), -1):
                run.strongest = event
            if run.stop is None and rank >= self.min_rank:
                if run.steerable and self.steering.hold_stop(event):
                    return None  # steered first; a stop after the steer stops the run
                run.stop = LoopDetected(event)
                self._stops[run_id] = run.stop
                return run.stop
            if run.stop is None:
                self.steering.offer(event)
            return None
