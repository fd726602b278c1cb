"""Steering: before eddy stops a looping agent, it can tell the agent what it is doing wrong.

On an `alert` (configurable with `steer_on`), the guard hands the agent eddy's corrective
message once per loop: the signal's `advice`, built by eddy from the signal (what repeats, since
which step, the evidence, what to try instead). A framework hook puts it into the agent's next
model call and reports it to eddy as a `steer` step, so the run shows it was steered and, at its
end, whether the loop came back.

A `stop` on a loop the agent was not told about yet (eddy stops at conclusive evidence, often
with no alert before it) is steered first too, for a run whose hook asks for steers: the agent
gets one chance. eddy re-arms its detectors on the `steer` step, so a loop that goes on after it
is stopped again at once, and that stop raises `LoopDetected`. A run only ever `check`ed (no
hook asking for steers) is stopped on its first stop. At most `max_steers` steers per run.

    steer = steer_or_stop(guard, emitter, run_id)   # raises LoopDetected on a stop
    if steer is not None:
        messages.append({"role": "user", "content": steer.message})

The hooks (`eddy_agent.middleware`, `eddy_agent.langgraph`, `eddy_agent.openai_agents`) take any
guard and emitter with the small interfaces below (`SteeringGuard`, `StepSink`): the Kafka
`Guard` and `Emitter`, or an in-process guard with the same methods.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Protocol, Set, Tuple, runtime_checkable

from ._signals import LoopDetected, severity_rank

STEER_STEP_TYPE = "steer"


@dataclass(frozen=True)
class Steer:
    """What the guard hands the agent once per loop: `message` goes into its next model call."""

    run_id: str
    message: str
    event_id: str
    detector: str
    severity: str
    pattern: str
    step_index: Optional[int]
    first_step_index: Optional[int]
    signal: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, signal: Dict[str, Any]) -> "Steer":
        return cls(
            run_id=signal.get("run_id", ""),
            message=advice_of(signal),
            event_id=signal.get("event_id", ""),
            detector=signal.get("detector", ""),
            severity=signal.get("severity", ""),
            pattern=signal.get("pattern", ""),
            step_index=signal.get("step_index"),
            first_step_index=signal.get("first_step_index"),
            signal=signal,
        )


def advice_of(signal: Dict[str, Any]) -> str:
    """The signal's `advice`; for a signal from a worker older than steering, eddy's own
    fallback sentence built from its pattern."""
    advice = signal.get("advice")
    if isinstance(advice, str) and advice:
        return advice
    return (f"eddy: this run is repeating itself. Since step {signal.get('first_step_index')}: "
            f"{signal.get('pattern', '')}. Repeating it will not help: try a different approach, "
            f"or say what is blocking you.")


@runtime_checkable
class SteeringGuard(Protocol):
    """What a hook needs of a guard (the Kafka `Guard`, or an in-process one)."""

    def watch(self, run_id: str, project_id: Optional[str] = None) -> None:
        """Act on this run's signals."""

    def check(self, run_id: str) -> None:
        """Raise `LoopDetected` once eddy said stop for the run. Never waits."""

    def steer(self, run_id: str) -> Optional[Steer]:
        """The run's next steer, once per loop (then None until another loop). Never waits."""

    def stopped(self, run_id: str) -> Optional[LoopDetected]:
        """The run's stop, not raised, or None."""


@runtime_checkable
class StepSink(Protocol):
    """What a hook needs of an emitter: the three v1 events (`Emitter`'s keywords)."""

    def run_started(self, run_id: Optional[str] = None, **fields: Any) -> str:
        ...

    def step(self, run_id: str, **fields: Any) -> int:
        ...

    def run_finished(self, run_id: str, **fields: Any) -> None:
        ...


def steer_or_stop(guard: Optional[SteeringGuard], emitter: Optional[StepSink],
                  run_id: str) -> Optional[Steer]:
    """Before the agent's next model call: raise `LoopDetected` on a stop; else the steer to
    put into the call (reported to eddy as a `steer` step), or None."""
    if guard is None:
        return None
    guard.check(run_id)
    take = getattr(guard, "steer", None)  # a guard from before steering only stops
    steer = take(run_id) if take is not None else None
    if steer is not None and emitter is not None:
        report(emitter, run_id, steer)
    return steer


def report(emitter: StepSink, run_id: str, steer: Steer) -> int:
    """Tell eddy the agent was steered: a `steer` step with the message and the signal's id
    (eddy records it on the run; its detectors never see it)."""
    return emitter.step(run_id, step_type=STEER_STEP_TYPE, content=steer.message,
                        signal_event_id=steer.event_id or None)


class _RunSteering:
    __slots__ = ("pending", "keys", "handed_at", "handed")

    def __init__(self) -> None:
        self.pending: Optional[Steer] = None
        # (detector, fingerprint) of every signal taken as one loop already steered (or pending)
        self.keys: Set[Tuple[str, str]] = set()
        # The step of the signal last handed to the agent: a repetition that began at or before
        # it is the loop the agent was already told about.
        self.handed_at: Optional[int] = None
        self.handed = 0


class Steering:
    """Which signals become a steer: pure bookkeeping, fed by the guard's consumer thread (or an
    in-process engine) and read by the agent's thread.

    A signal of at least `steer_on` and below `stop` becomes the run's pending steer unless its
    loop was steered already: the same (detector, fingerprint), or a repetition that began no
    later than the signal last handed over. So one loop is steered once, however many detectors
    and levels report it, and a new loop after it is steered again. A `stop` is offered through
    `hold_stop`, which the guard asks only for runs whose agent can be steered.
    """

    def __init__(self, steer_on: Optional[str] = "alert", max_steers: int = 3):
        if steer_on is not None and severity_rank(steer_on) >= severity_rank("stop"):
            raise ValueError("steer_on must be below stop (a stop raises LoopDetected), or None")
        if max_steers < 1:
            raise ValueError("max_steers must be at least 1 (steer_on=None turns steering off)")
        self.steer_on = steer_on
        self.max_steers = max_steers
        self._rank = None if steer_on is None else severity_rank(steer_on)
        self._runs: Dict[str, _RunSteering] = {}
        self._lock = threading.Lock()

    def offer(self, signal: Dict[str, Any]) -> Optional[Steer]:
        """Take one distinct signal of a watched run; returns the steer it made pending, if any."""
        if self._rank is None:
            return None
        try:
            rank = severity_rank(signal.get("severity", ""))
        except ValueError:
            return None
        if rank < self._rank or rank >= severity_rank("stop"):
            return None
        run_id = signal.get("run_id")
        if not isinstance(run_id, str):
            return None
        key = (str(signal.get("detector", "")), str(signal.get("fingerprint", "")))
        with self._lock:
            run = self._runs.setdefault(run_id, _RunSteering())
            if key in run.keys:
                return None
            run.keys.add(key)
            began = signal.get("first_step_index")
            if run.pending is not None:
                return None  # one loop, reported by another detector: one steer
            if run.handed_at is not None and isinstance(began, int) and began <= run.handed_at:
                return None
            if run.handed >= self.max_steers:
                return None
            run.pending = Steer.of(signal)
            return run.pending

    def hold_stop(self, signal: Dict[str, Any]) -> bool:
        """A stop of a run whose agent can be steered: True when it becomes (or joins) the run's
        pending steer instead of stopping the run, because the agent was not told about this
        loop yet. False (stop now) for a loop that went on after its steer, a budget (not a
        loop: nothing to steer), steering off, or a run steered `max_steers` times already."""
        if self._rank is None or signal.get("detector") == "budget":
            return False
        run_id = signal.get("run_id")
        if not isinstance(run_id, str):
            return False
        began = signal.get("first_step_index")
        with self._lock:
            run = self._runs.setdefault(run_id, _RunSteering())
            if run.handed_at is not None and (not isinstance(began, int) or began <= run.handed_at):
                return False
            if run.pending is None:
                if run.handed >= self.max_steers:
                    return False
                run.pending = Steer.of(signal)
            run.keys.add((str(signal.get("detector", "")), str(signal.get("fingerprint", ""))))
            return True

    def take(self, run_id: str) -> Optional[Steer]:
        """The run's pending steer, handed over once."""
        run = self._runs.get(run_id)
        if run is None or run.pending is None:
            return None
        with self._lock:
            steer, run.pending = run.pending, None
            if steer is not None:
                run.handed += 1
                at = steer.step_index
                if isinstance(at, int):
                    run.handed_at = at if run.handed_at is None else max(run.handed_at, at)
            return steer

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._runs.pop(run_id, None)
