"""Emitter: an agent's steps to eddy's input topic, as v1 contract events.

Key = run_id and librdkafka's `murmur2_random` partitioner put a run where Kafka's Java clients
(and `eddy replay --partitions N`) would, so every producer of the topic agrees and eddy sees a
run's steps in order. Produce calls only queue the event: librdkafka batches (`linger.ms`) and
sends from its own thread, so a step never waits on the network.
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional

from confluent_kafka import Producer

from ._config import kafka_conf, setting
from .guard import Guard

_UNSET: Any = object()


def _now_ms() -> int:
    return int(time.time() * 1000)


class Emitter:
    """v1 events to Kafka; `step_index` is counted per run unless given."""

    def __init__(
        self,
        brokers: Optional[str] = None,
        topic: Optional[str] = None,
        project_id: Optional[str] = None,
        *,
        agent_name: Optional[str] = None,
        guard: Optional[Any] = None,
        first_step_index: int = 1,
        on_error: Optional[Callable[[str], None]] = None,
        **producer_conf: Any,
    ):
        project_id = setting(project_id, "EDDY_PROJECT_ID")
        if not project_id:
            raise ValueError("project_id is required (or set EDDY_PROJECT_ID): eddy keys runs by "
                             "(project_id, run_id)")
        self.topic = setting(topic, "EDDY_INPUT_TOPIC", "agent.steps")
        self.project_id = project_id
        self.agent_name = setting(agent_name, "EDDY_AGENT_NAME")
        self.guard = guard
        self.first_step_index = first_step_index
        self.on_error = on_error
        self.errors: List[str] = []
        self._next_index: Dict[str, int] = {}
        self._lock = threading.Lock()
        conf = {
            # Kafka's Java partitioner: a run lands where every other producer puts it.
            "partitioner": "murmur2_random",
            # acks=all, and no duplicate or reordered step on a retry.
            "enable.idempotence": True,
            # Small: a verdict can only come after the step that shows the loop is sent.
            "linger.ms": 5,
            "compression.type": "lz4",
            "logger": logging.getLogger("eddy_agent.kafka"),
        }
        # Brokers and security from the arguments or EDDY_*; the caller's properties and
        # confluent-kafka callbacks (error_cb, oauth_cb...) over everything, untouched.
        conf.update(kafka_conf(brokers, producer_conf))
        self._producer = Producer(conf)
        # Events librdkafka's queue had no room for, oldest first (AsyncEmitter only: the
        # blocking Emitter waits instead). While any is held, later ones queue behind it so a
        # run's events keep their order.
        self._backlog: List[tuple] = []
        self._wait_when_full = True

    # ------------------------------------------------------------------ the three kinds
    def run_started(
        self,
        run_id: Optional[str] = None,
        *,
        agent_name: Optional[str] = None,
        input: Optional[str] = None,
        metadata: Optional[Dict[str, Any]] = None,
        ts: Any = None,
        project_id: Optional[str] = None,
        watch: bool = True,
        extra: Optional[Dict[str, Any]] = None,
    ) -> str:
        """Start a run (a new uuid4 when `run_id` is None) and, with a guard, watch it."""
        run_id = run_id or str(uuid.uuid4())
        name = agent_name or self.agent_name
        if not name:
            raise ValueError("agent_name is required for run_started (or give Emitter(agent_name=...))")
        project = project_id or self.project_id
        if watch and self.guard is not None:
            # Before the event is sent: no signal of the run can precede it.
            self.guard.watch(run_id, project)
        with self._lock:
            self._next_index.setdefault(run_id, self.first_step_index)
        self._send(run_id, "run_started", project, ts,
                   {"agent_name": name, "input": input, "metadata": metadata}, extra)
        return run_id

    def step(
        self,
        run_id: str,
        *,
        step_type: str = "tool_call",
        step_index: Optional[int] = None,
        content: Optional[str] = None,
        tool_name: Optional[str] = None,
        tool_input: Any = _UNSET,
        tool_output: Any = _UNSET,
        tool_success: Any = _UNSET,
        tool_latency_ms: Optional[float] = None,
        tokens: Optional[int] = None,
        cost_usd: Optional[float] = None,
        tokens_in_context: Optional[int] = None,
        agent: Optional[str] = None,
        caller: Optional[str] = None,
        metadata: Optional[Dict[str, Any]] = None,
        signal_event_id: Optional[str] = None,
        ts: Any = None,
        project_id: Optional[str] = None,
        extra: Optional[Dict[str, Any]] = None,
    ) -> int:
        """Send one step; returns its step_index. `tool_input`/`tool_output` take any JSON value
        (None is sent as JSON null); `tool_success=None` is sent as null (unknown).
        `step_type="steer"` with `signal_event_id` reports that a guard steered the agent
        (`steering.report`)."""
        with self._lock:
            if step_index is None:
                step_index = self._next_index.get(run_id, self.first_step_index)
            self._next_index[run_id] = max(self._next_index.get(run_id, 0), step_index + 1)
        fields = {
            "step_index": step_index, "step_type": step_type, "content": content,
            "tool_name": tool_name, "tool_latency_ms": tool_latency_ms, "tokens": tokens,
            "cost_usd": cost_usd, "tokens_in_context": tokens_in_context, "agent": agent,
            "caller": caller, "metadata": metadata, "signal_event_id": signal_event_id,
        }
        fields = {k: v for k, v in fields.items() if v is not None}
        # These three may be sent as an explicit null; leaving them out is a different event.
        for k, v in (("tool_input", tool_input), ("tool_output", tool_output),
                     ("tool_success", tool_success)):
            if v is not _UNSET:
                fields[k] = v
        self._send(run_id, "step", project_id or self.project_id, ts, fields, extra, prune=False)
        return step_index

    def run_finished(
        self,
        run_id: str,
        *,
        status: Optional[str] = None,
        termination_reason: Optional[str] = None,
        output: Optional[str] = None,
        reported_loop_detected: Optional[bool] = None,
        reported_loop_step_index: Optional[int] = None,
        reported_totals: Optional[Dict[str, Any]] = None,
        ts: Any = None,
        project_id: Optional[str] = None,
        extra: Optional[Dict[str, Any]] = None,
    ) -> None:
        """End a run. A run its guard stopped ends as every hook of the package ends one:
        `status="failed"`, `termination_reason="loop_detected"`, unless others are given; any
        other run `status="completed"`."""
        stopped = self.guard is not None and self.guard.stopped(run_id) is not None
        if status is None:
            status = "failed" if stopped else "completed"
        if termination_reason is None and stopped:
            termination_reason = "loop_detected"
        with self._lock:
            self._next_index.pop(run_id, None)
        self._send(run_id, "run_finished", project_id or self.project_id, ts, {
            "status": status, "termination_reason": termination_reason, "output": output,
            "reported_loop_detected": reported_loop_detected,
            "reported_loop_step_index": reported_loop_step_index,
            "reported_totals": reported_totals,
        }, extra)

    # ------------------------------------------------------------------ delivery
    def poll(self, timeout: float = 0) -> int:
        """Serve delivery reports (done on every send too)."""
        return self._producer.poll(timeout)

    def flush(self, timeout: float = 30.0) -> int:
        """Wait until every queued event is delivered; returns how many are still queued."""
        left = self._producer.flush(timeout)
        if left:
            self._error(f"{left} events not delivered within {timeout}s")
        return left

    def close(self, timeout: float = 30.0) -> List[str]:
        """Flush, and return the delivery errors seen (empty when all went through)."""
        self.flush(timeout)
        return list(self.errors)

    def __enter__(self) -> "Emitter":
        return self

    def __exit__(self, *exc) -> None:
        self.flush()

    def _error(self, text: str) -> None:
        self.errors.append(text)
        if self.on_error is not None:
            self.on_error(text)

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self._error(f"{msg.key()!r}: {err}")

    def _send(self, run_id: str, kind: str, project_id: str, ts: Any, fields: Dict[str, Any],
              extra: Optional[Dict[str, Any]], prune: bool = True) -> None:
        if not run_id:
            raise ValueError("run_id must be a non-empty string")
        event = {"v": 1, "kind": kind, "project_id": project_id, "run_id": run_id,
                 "ts": _now_ms() if ts is None else ts}
        event.update({k: v for k, v in fields.items() if v is not None} if prune else fields)
        if extra:
            event.update(extra)
        value = json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        key = run_id.encode("utf-8")
        if self._backlog:
            self._backlog.append((key, value))
            return
        while True:
            try:
                self._producer.produce(self.topic, key=key, value=value,
                                       on_delivery=self._delivered)
                break
            except BufferError:
                # librdkafka's local queue is full (queue.buffering.max.*): the broker is away
                # or slower than the fleet. Waiting is the only way not to drop the step.
                if not self._wait_when_full:
                    self._backlog.append((key, value))
                    return
                self._producer.poll(0.05)
        self._producer.poll(0)

    def _drain_backlog(self) -> bool:
        """Hand held events to librdkafka while it has room; True once none is held."""
        while self._backlog:
            key, value = self._backlog[0]
            try:
                self._producer.produce(self.topic, key=key, value=value,
                                       on_delivery=self._delivered)
            except BufferError:
                self._producer.poll(0)
                return False
            self._backlog.pop(0)
        return True


class AsyncEmitter:
    """`Emitter` for asyncio agents: `await run_started / step / run_finished / flush`, none of
    which blocks the event loop. An event is queued in librdkafka as with `Emitter` (no network
    wait); when librdkafka's queue is full (the broker away), the event is held and the call
    awaits room in short sleeps instead of blocking the loop. Same arguments as `Emitter`."""

    #: How long a call waits between tries while librdkafka's queue is full.
    retry_s = 0.05

    def __init__(self, *args: Any, **kwargs: Any):
        self.sync = Emitter(*args, **kwargs)
        self.sync._wait_when_full = False
        # Calls from several tasks: one at a time through the bookkeeping and the backlog.
        self._lock = asyncio.Lock()

    @property
    def guard(self) -> Any:
        return self.sync.guard

    @property
    def errors(self) -> List[str]:
        return self.sync.errors

    async def _room(self) -> None:
        while not self.sync._drain_backlog():
            await asyncio.sleep(self.retry_s)

    async def run_started(self, run_id: Optional[str] = None, **kwargs: Any) -> str:
        async with self._lock:
            run_id = self.sync.run_started(run_id, **kwargs)
            await self._room()
            return run_id

    async def step(self, run_id: str, **kwargs: Any) -> int:
        async with self._lock:
            index = self.sync.step(run_id, **kwargs)
            await self._room()
            return index

    async def run_finished(self, run_id: str, **kwargs: Any) -> None:
        async with self._lock:
            self.sync.run_finished(run_id, **kwargs)
            await self._room()

    async def flush(self, timeout: float = 30.0) -> int:
        """Wait (in a worker thread) until every event is delivered; returns how many were not."""
        async with self._lock:
            await self._room()
        return await asyncio.get_running_loop().run_in_executor(None, self.sync.flush, timeout)

    async def close(self, timeout: float = 30.0) -> List[str]:
        await self.flush(timeout)
        return list(self.sync.errors)

    async def __aenter__(self) -> "AsyncEmitter":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.flush()
