"""Local: eddy's engine inside the agent's process. No Kafka, no ClickHouse, no servers.

    from eddy_agent import Local

    eddy = Local()                              # or Local("eddy.toml"): eddy run's own config
    eddy.step(run, tool_name="search", tool_input=args, tool_output=out)
    eddy.check(run)                             # raises LoopDetected once eddy says stop

The detectors are eddy's own (the wheel's native module is built from the same crate as the
`eddy` binary), fed the same v1 event JSON, so a run gets exactly the signals `eddy replay` and
the fleet's workers give it, and gets them before `step` returns: the verdict is there before
the agent's next call.

A `Local` is written to like an `Emitter` (the same `run_started` / `step` / `run_finished`
keywords) and checked like a `Guard` (`check`, `steer`, `stopped`, `verdict`, `signals`): every
hook that takes an emitter and a guard (`steering.StepSink`, `steering.SteeringGuard`) takes a
`Local` as both. Moving to the fleet is one line: build an
`Emitter(brokers, project_id=..., guard=Guard.shared(brokers))` instead. `tee=Emitter(...)`
keeps the engine here and also sends every event to the fleet's input topic.

Memory stays bounded for a long-lived process by the engine's own rules: a run ends with
`run_finished`, or when idle for `idle_timeout_ms` of event time (the workers' rule), or by
eviction past `max_open_runs`; an ended run's state is dropped at once.
"""
from __future__ import annotations

import json
import logging
import os
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from . import _engine
from ._verdicts import SIGNAL_KINDS, LoopDetected, Verdicts
from .emitter import Emitter, _now_ms
from .steering import Steer

log = logging.getLogger("eddy_agent.local")

PathLike = Union[str, "os.PathLike[str]"]
Event = Union[Dict[str, Any], str, bytes]


class Local(Emitter):
    """The engine in this process: an `Emitter` whose steps go to eddy's detectors here (and,
    with `tee`, to Kafka too), and the guard that answers for them at once."""

    def __init__(
        self,
        config: Optional[PathLike] = None,
        *,
        toml: Optional[str] = None,
        project_id: str = "default",
        agent_name: str = "agent",
        min_severity: str = "stop",
        steer_on: Optional[str] = "alert",
        max_steers: int = 3,
        tee: Optional[Emitter] = None,
        partitions: int = 1,
        on_stop: Optional[Callable[[LoopDetected], None]] = None,
        on_error: Optional[Callable[[str], None]] = None,
        first_step_index: int = 1,
        max_watched: int = 100_000,
        max_terminated: int = 1024,
    ):
        """`config`: an eddy TOML file (its `[engine]` table; `EDDY_ENGINE__*` variables apply as
        for every eddy command), or `toml`: the same as text. `steer_on`: signals from this
        severity (below stop) become a corrective message for the agent once per loop (`steer`;
        None: never); a stop on a loop the agent was not told about yet is steered first, for a
        run whose hook asks for steers, at most `max_steers` times per run (see `steering`).
        `partitions`: hash runs to this many engines as a fleet of that many input
        partitions would (idle timeouts then agree with it). `tee`: an Emitter that also gets
        every event."""
        # Not Emitter.__init__: nothing here talks to Kafka (the tee does, on its own).
        if not project_id:
            raise ValueError("project_id is required: eddy keys runs by (project_id, run_id)")
        self.project_id = project_id
        self.agent_name = agent_name
        self.first_step_index = first_step_index
        self.topic = None
        self.tee = tee
        self.on_stop = on_stop
        self.on_error = on_error
        self.errors: List[str] = []
        self.guard = self
        self._next_index: Dict[str, int] = {}
        self._lock = threading.Lock()
        self._engine = _engine.Engine(None if config is None else os.fspath(config), toml=toml,
                                      partitions=partitions)
        self._verdicts = Verdicts(min_severity, max_watched, steer_on=steer_on,
                                  max_steers=max_steers)
        self._terminated: "OrderedDict[str, Dict[str, Any]]" = OrderedDict()
        self._max_terminated = max_terminated
        # One event at a time through the engine and the bookkeeping, in the order applied.
        self._apply_lock = threading.Lock()

    # ------------------------------------------------------------------ feeding the engine
    def observe(self, run_id: str, step: Optional[Dict[str, Any]] = None,
                **fields: Any) -> List[Dict[str, Any]]:
        """Run the detectors on one step of `run_id` now; returns the run's signals it caused
        (loop_warning / loop_detected dicts, eddy's signal JSON). `step` (and keywords) hold the
        v1 step fields (`tool_name`, `tool_input`, `tool_output`, `content`, `step_type`, ...);
        `step_type` defaults to tool_call, `step_index` is counted per run, `ts` is now.
        Raises ValueError for a step eddy would reject."""
        body = dict(step or {}, **fields)
        project = body.pop("project_id", None) or self.project_id
        with self._lock:
            index = body.get("step_index")
            if index is None:
                index = body["step_index"] = self._next_index.get(run_id, self.first_step_index)
            if isinstance(index, int):
                self._next_index[run_id] = max(self._next_index.get(run_id, 0), index + 1)
        ts = body.pop("ts", None)
        event = {"v": 1, "kind": "step", "project_id": project, "run_id": run_id,
                 "ts": _now_ms() if ts is None else ts, "step_type": "tool_call"}
        event.update(body)
        _, outs = self._apply(run_id, event, strict=True)
        return [o for o in outs if o.get("kind") in SIGNAL_KINDS and o.get("run_id") == run_id]

    def observe_event(self, event: Event) -> List[Dict[str, Any]]:
        """Apply one whole v1 event (a dict, or its JSON text); returns every output event it
        caused, in order: exactly what `eddy replay` prints for it (a run ended by its idle
        timeout included). Raises ValueError for an event eddy would reject."""
        return self._observe_event(event)[1]

    def observe_event_json(self, event: Event) -> List[str]:
        """`observe_event`, with the output events as eddy's own JSON text: byte for byte the
        lines `eddy replay` prints (to forward them as they are)."""
        return self._observe_event(event)[0]

    def _observe_event(self, event: Event) -> Tuple[List[str], List[Dict[str, Any]]]:
        if isinstance(event, dict):
            run_id = event.get("run_id")
            return self._apply(run_id if isinstance(run_id, str) else "", event, strict=True)
        text = event.decode("utf-8") if isinstance(event, (bytes, bytearray)) else event
        result = self._outputs(text)
        if self.tee is not None:
            parsed = json.loads(text)
            self._tee(str(parsed.get("run_id", "")), parsed)
        return result

    def _send(self, run_id: str, kind: str, project_id: str, ts: Any, fields: Dict[str, Any],
              extra: Optional[Dict[str, Any]], prune: bool = True) -> None:
        # Emitter's event, built as it builds it; delivered to the engine instead of a producer.
        if not run_id:
            raise ValueError("run_id must be a non-empty string")
        event = {"v": 1, "kind": kind, "project_id": project_id, "run_id": run_id,
                 "ts": _now_ms() if ts is None else ts}
        event.update({k: v for k, v in fields.items() if v is not None} if prune else fields)
        if extra:
            event.update(extra)
        self._apply(run_id, event, strict=False)

    def _apply(self, run_id: str, event: Dict[str, Any],
               strict: bool) -> Tuple[List[str], List[Dict[str, Any]]]:
        # The Emitter's encoding: keelwave's fingerprint hashes `tool_input`'s own bytes.
        text = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
        try:
            result = self._outputs(text)
        except ValueError as e:
            if strict:
                raise
            # Like a delivery error of the Emitter: the agent goes on, the error is kept.
            self._error(f"{run_id!r}: eddy rejected the {event.get('kind')} event: {e}")
            return [], []
        if self.tee is not None:
            self._tee(run_id, event)
        return result

    def _outputs(self, text: str) -> Tuple[List[str], List[Dict[str, Any]]]:
        with self._apply_lock:
            lines = self._engine.observe(text)
            if not lines:
                return lines, []
            outs = [json.loads(line) for line in lines]
            stops = [s for s in map(self._take, outs) if s is not None]
        for stop in stops:
            if self.on_stop is not None:
                try:
                    self.on_stop(stop)
                except Exception:
                    log.exception("eddy local guard: on_stop callback failed")
        return lines, outs

    def _take(self, out: Dict[str, Any]) -> Optional[LoopDetected]:
        run_id, kind = out.get("run_id"), out.get("kind")
        if kind == "run_terminated":
            # The engine dropped the run; so does the guard (its stop was read before the end).
            self._verdicts.unwatch(run_id)
            self._terminated[run_id] = out
            while len(self._terminated) > self._max_terminated:
                self._terminated.popitem(last=False)
            return None
        self._verdicts.watch(run_id, out.get("project_id"))
        return self._verdicts.offer(out)

    def _tee(self, run_id: str, event: Dict[str, Any]) -> None:
        rest = {k: v for k, v in event.items()
                if k not in ("v", "kind", "project_id", "run_id", "ts")}
        self.tee._send(run_id, event.get("kind", ""), event.get("project_id", ""),
                       event.get("ts"), rest, None, prune=False)

    # ------------------------------------------------------------------ the guard's side
    @property
    def min_severity(self) -> str:
        return self._verdicts.min_severity

    def watch(self, run_id: str, project_id: Optional[str] = None) -> None:
        """Every run the engine sees is watched; kept for the guard's interface."""

    def unwatch(self, run_id: str) -> None:
        self._verdicts.unwatch(run_id)

    def check(self, run_id: str) -> None:
        """Raise `LoopDetected` if the run got a signal of at least `min_severity`."""
        stop = self._verdicts._stops.get(run_id)
        if stop is not None:
            raise LoopDetected(stop.signal)

    async def acheck(self, run_id: str) -> None:
        self.check(run_id)

    def stopped(self, run_id: str) -> Optional[LoopDetected]:
        return self._verdicts.stop_of(run_id)

    def steer(self, run_id: str) -> Optional[Steer]:
        """eddy's corrective message for the run, once per loop: on a signal of at least
        `steer_on` (default alert), or on the first stop of a loop it was not told about yet:
        asking marks the run as steerable, so that stop is held for the steer and only a stop
        after it raises. A hook puts `.message` into the agent's next model call and reports it (`steering.steer_or_stop` does both). A dict lookup."""
        return self._verdicts.steer(run_id)

    @property
    def steer_on(self) -> Optional[str]:
        return self._verdicts.steering.steer_on

    def verdict(self, run_id: str) -> Optional[Dict[str, Any]]:
        """The strongest signal of the (open) run, of any severity, or None."""
        return self._verdicts.verdict(run_id)

    def signals(self, run_id: str) -> List[Dict[str, Any]]:
        """Every signal of the (open) run, in order."""
        return self._verdicts.signals(run_id)

    def terminated(self, run_id: str) -> Optional[Dict[str, Any]]:
        """eddy's run_terminated record of one of the last `max_terminated` runs that ended."""
        return self._terminated.get(run_id)

    @property
    def open_runs(self) -> int:
        return self._engine.open_runs

    @property
    def ended_runs(self) -> int:
        """Keys of ended runs the engine remembers (so a late event cannot reopen them)."""
        return self._engine.ended_runs

    def stats(self) -> Dict[str, int]:
        v = self._verdicts
        return {"received": v.received, "duplicates": v.duplicates, "ignored": v.ignored,
                "open_runs": self.open_runs, "ended_runs": self.ended_runs,
                "errors": len(self.errors)}

    # ------------------------------------------------------------------ the emitter's side
    def poll(self, timeout: float = 0) -> int:
        return self.tee.poll(timeout) if self.tee is not None else 0

    def flush(self, timeout: float = 30.0) -> int:
        return self.tee.flush(timeout) if self.tee is not None else 0

    def close(self, timeout: float = 30.0) -> List[str]:
        """Flush the tee, if any; the errors seen (rejected events, the tee's delivery errors)."""
        tee_errors = self.tee.close(timeout) if self.tee is not None else []
        return list(self.errors) + list(tee_errors)

    def __enter__(self) -> "Local":
        return self

    def __exit__(self, *exc) -> None:
        self.flush()


def replay(file: PathLike, config: Optional[PathLike] = None,
           partitions: int = 1) -> List[Dict[str, Any]]:
    """`eddy replay FILE` in this process: the output events of a JSONL trace, as dicts."""
    out: List[Dict[str, Any]] = []
    _engine.replay(os.fspath(file), lambda line: out.append(json.loads(line)),
                   lambda n, why: log.warning("line %d: skipped: %s", n, why),
                   config=None if config is None else os.fspath(config), partitions=partitions)
    return out
