"""Guard: one background Kafka consumer of eddy's signals topic per process.

It joins no consumer group and commits nothing: it assigns itself every partition of the topic,
starting at the first signal written since the guard started (less `lookback_s` for clock skew),
and checks for new partitions every `refresh_s`. librdkafka reconnects by itself after a broker
restart and the assignment resumes where it was. Records whose key (eddy keys signals by run id)
is not a watched run are dropped before their JSON is read, so a fleet-wide topic costs little.
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from ._config import kafka_conf, setting
from ._verdicts import LoopDetected, Verdicts
from .steering import Steer

log = logging.getLogger("eddy_agent.guard")


class _GuardBase:
    """What every guard does on the agent's side, whatever brings it the signals: the Kafka
    `Guard` and the HTTP `HttpGuard` differ only in their background thread, which hands each
    decoded output event of a watched run to `_offer`."""

    def __init__(self, min_severity: str, on_stop: Optional[Callable[[LoopDetected], None]],
                 max_watched: int, steer_on: Optional[str], max_steers: int):
        self.on_stop = on_stop
        self._verdicts = Verdicts(min_severity, max_watched, steer_on=steer_on,
                                  max_steers=max_steers)
        self._ready = threading.Event()
        self._closing = threading.Event()
        self._waiters: Dict[str, List[tuple]] = {}
        self._waiters_lock = threading.Lock()
        self.errors: List[str] = []

    def start(self, wait_ready: Optional[float] = 10.0) -> None:
        """Start the background thread (done by the constructor unless `start=False`)."""
        self._thread.start()
        if wait_ready:
            self.wait_ready(wait_ready)

    @classmethod
    def _one_per_process(cls, key: tuple, make: Callable[[], Any]) -> Any:
        """The process's one guard of this class for `key` (a closed one is replaced), made by
        `make` on first use. Each class keeps its own `_shared` table and lock."""
        with cls._shared_lock:
            g = cls._shared.get(key)
            if g is None or g._closing.is_set():
                g = cls._shared[key] = make()
            return g

    @property
    def min_severity(self) -> str:
        return self._verdicts.min_severity

    def watch(self, run_id: str, project_id: Optional[str] = None) -> None:
        """Act on this run's signals (only of `project_id`, when given)."""
        self._verdicts.watch(run_id, project_id)

    def unwatch(self, run_id: str) -> None:
        self._verdicts.unwatch(run_id)

    def check(self, run_id: str) -> None:
        """Raise `LoopDetected` if a signal of at least `min_severity` arrived for the run.

        A dict lookup: call it before every tool call, it never waits on the network."""
        stop = self._verdicts._stops.get(run_id)
        if stop is not None:
            raise LoopDetected(stop.signal)

    def steer(self, run_id: str) -> Optional[Steer]:
        """eddy's corrective message for the run, once per loop: on a signal of at least
        `steer_on` (default alert), or on the first stop of a loop it was not told about yet:
        asking marks the run as steerable, so that stop is held for the steer and only a stop
        after it raises. A framework hook puts `.message` into the agent's next model call and reports it (`steering.steer_or_stop` does both). A dict
        lookup, like `check`."""
        return self._verdicts.steer(run_id)

    @property
    def steer_on(self) -> Optional[str]:
        return self._verdicts.steering.steer_on

    def stopped(self, run_id: str) -> Optional[LoopDetected]:
        """The run's stop (not raised), or None."""
        return self._verdicts.stop_of(run_id)

    def verdict(self, run_id: str) -> Optional[Dict[str, Any]]:
        """The strongest signal received for the run, of any severity, or None."""
        return self._verdicts.verdict(run_id)

    def signals(self, run_id: str) -> List[Dict[str, Any]]:
        """Every distinct signal received for the run, in arrival order."""
        return self._verdicts.signals(run_id)

    def terminated(self, run_id: str) -> Optional[Dict[str, Any]]:
        """eddy's run_terminated record for the run, once it arrived."""
        return self._verdicts.terminated(run_id)

    async def wait_for_stop(self, run_id: str, timeout: Optional[float] = None) -> LoopDetected:
        """Resolve with the run's `LoopDetected` (not raised) once it stops; asyncio.TimeoutError
        after `timeout`. Cancel-safe."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._waiters_lock:
            stop = self._verdicts.stop_of(run_id)
            if stop is not None:
                return stop
            self._waiters.setdefault(run_id, []).append((loop, fut))
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            with self._waiters_lock:
                ws = self._waiters.get(run_id, [])
                if (loop, fut) in ws:
                    ws.remove((loop, fut))
                if not ws:
                    self._waiters.pop(run_id, None)

    async def acheck(self, run_id: str) -> None:
        """`check` for coroutines (it does not wait either)."""
        self.check(run_id)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self, timeout: float = 10.0) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ delivery
    def _offer(self, event: Dict[str, Any]) -> None:
        stop = self._verdicts.offer(event)
        if stop is not None:
            self._fire(stop.run_id, stop)

    def _fire(self, run_id: str, stop: LoopDetected) -> None:
        with self._waiters_lock:
            waiters = self._waiters.pop(run_id, [])
        for loop, fut in waiters:
            loop.call_soon_threadsafe(lambda f=fut: f.done() or f.set_result(stop))
        if self.on_stop is not None:
            try:
                self.on_stop(stop)
            except Exception:
                log.exception("eddy guard: on_stop callback failed")


class Guard(_GuardBase):
    """Watches runs and turns eddy's verdicts into `LoopDetected` at the agent's next check, and
    its alerts into a corrective message for the agent's next model call (`steer`)."""

    def __init__(
        self,
        brokers: Optional[str] = None,
        topic: Optional[str] = None,
        min_severity: str = "stop",
        *,
        on_stop: Optional[Callable[[LoopDetected], None]] = None,
        lookback_s: float = 30.0,
        refresh_s: float = 5.0,
        wait_ready: Optional[float] = 10.0,
        max_watched: int = 100_000,
        steer_on: Optional[str] = "alert",
        max_steers: int = 3,
        start: bool = True,
        **consumer_conf: Any,
    ):
        super().__init__(min_severity, on_stop, max_watched, steer_on, max_steers)
        self.topic = setting(topic, "EDDY_OUTPUT_TOPIC", "agent.signals")
        self._start_ms = int((time.time() - lookback_s) * 1000)
        self._refresh_s = refresh_s
        conf = {
            # librdkafka wants a group id even for assign(); a fresh one, never joined or committed.
            "group.id": f"eddy-agent-guard-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # A recreated topic (offsets out of range) is read from its start: all of it is new.
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "socket.keepalive.enable": True,
            "reconnect.backoff.max.ms": 1000,
            # librdkafka's own lines (a broker away, reconnects) go to logging, not stderr.
            "logger": logging.getLogger("eddy_agent.kafka"),
        }
        # Brokers and security from the arguments or EDDY_*; the caller's properties and
        # confluent-kafka callbacks (error_cb, oauth_cb...) over everything, untouched.
        conf.update(kafka_conf(brokers, consumer_conf))
        self._consumer = Consumer(conf)
        self._assigned: set = set()
        self._thread = threading.Thread(target=self._run, name="eddy-agent-guard", daemon=True)
        if start:
            self.start(wait_ready)

    _shared: Dict[tuple, "Guard"] = {}
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls, brokers: Optional[str] = None, topic: Optional[str] = None,
               min_severity: str = "stop", **kwargs: Any) -> "Guard":
        """The process's one guard for (brokers, topic, min_severity, steer_on), made on first
        use (with `kwargs`): every agent of the process shares its consumer thread."""
        brokers = setting(brokers, "EDDY_KAFKA_BROKERS")
        topic = setting(topic, "EDDY_OUTPUT_TOPIC", "agent.signals")
        key = (brokers, topic, min_severity, kwargs.get("steer_on", "alert"))
        return cls._one_per_process(key, lambda: cls(brokers, topic, min_severity, **kwargs))

    # ------------------------------------------------------------------ agent side
    def wait_ready(self, timeout: float) -> bool:
        """True once every partition of the topic is assigned (the topic may not exist yet)."""
        ok = self._ready.wait(timeout)
        if not ok:
            log.warning("eddy guard: %s not assigned after %.1fs; signals since start are still read "
                        "once it is", self.topic, timeout)
        return ok

    def stats(self) -> Dict[str, int]:
        v = self._verdicts
        return {"received": v.received, "duplicates": v.duplicates, "ignored": v.ignored,
                "partitions": len(self._assigned)}

    def close(self, timeout: float = 10.0) -> None:
        self._closing.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        else:
            self._consumer.close()

    # ------------------------------------------------------------------ consumer thread
    def _run(self) -> None:
        c = self._consumer
        next_refresh = 0.0
        try:
            while not self._closing.is_set():
                now = time.monotonic()
                if now >= next_refresh:
                    self._refresh()
                    next_refresh = now + (self._refresh_s if self._ready.is_set() else 0.5)
                if not self._assigned:
                    # A poll, not a sleep: it serves the callbacks (error_cb, stats_cb) while
                    # the topic is not there yet.
                    c.poll(0.1)
                    continue
                # poll() returns at the first record; consume() would wait for its whole batch
                # or the timeout. What else is already here is then drained without waiting.
                first = c.poll(0.1)
                if first is None:
                    continue
                for m in [first] + c.consume(num_messages=1000, timeout=0):
                    err = m.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            log.debug("eddy guard: %s", err)
                        continue
                    self._take(m.key(), m.value())
        except Exception as e:  # the guard must never take the agent down
            log.exception("eddy guard: consumer thread failed")
            self.errors.append(repr(e))
        finally:
            try:
                c.close()
            except Exception:
                pass

    def _take(self, key: Optional[bytes], value: Optional[bytes]) -> None:
        if key is None or value is None:
            return
        run_id = key.decode("utf-8", "replace")
        if not self._verdicts.is_watched(run_id):
            return
        try:
            event = json.loads(value)
        except ValueError:
            return
        self._offer(event)

    def _refresh(self) -> None:
        """Assign partitions not assigned yet, each from the first signal since the guard started."""
        c = self._consumer
        try:
            md = c.list_topics(self.topic, timeout=5)
            t = md.topics.get(self.topic)
            if t is None or t.error is not None or not t.partitions:
                return
            new = [p for p in t.partitions if p not in self._assigned]
            if not new:
                self._ready.set()
                return
            by_time = c.offsets_for_times(
                [TopicPartition(self.topic, p, self._start_ms) for p in new], timeout=5)
            tps = []
            for tp in by_time:
                off = tp.offset
                if off < 0:
                    # Nothing written since the start: begin at today's end, fixed now, so a
                    # signal produced between this call and the first fetch is not skipped.
                    off = c.get_watermark_offsets(TopicPartition(self.topic, tp.partition), timeout=5)[1]
                tps.append(TopicPartition(self.topic, tp.partition, off))
            c.incremental_assign(tps)
            self._assigned.update(tp.partition for tp in tps)
            self._ready.set()
        except KafkaException as e:
            log.debug("eddy guard: partition refresh failed (will retry): %s", e)
