"""Clients configured the way the server is: EDDY_* variables, explicit arguments winning, and
confluent-kafka's callbacks reaching librdkafka as given (real clients, no broker needed)."""
import asyncio
import logging
import queue
import time

import pytest

from eddy_agent import AsyncEmitter, Emitter, Guard
from eddy_agent._config import conf_key, kafka_conf

NOWHERE = "127.0.0.1:1"  # nothing listens: librdkafka reports transport errors


@pytest.fixture
def eddy_env(monkeypatch):
    for k, v in {"EDDY_KAFKA_BROKERS": "env-kafka:9092", "EDDY_INPUT_TOPIC": "env.steps",
                 "EDDY_OUTPUT_TOPIC": "env.signals", "EDDY_PROJECT_ID": "env-proj",
                 "EDDY_AGENT_NAME": "env-bot", "EDDY_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                 "EDDY_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
                 "EDDY_KAFKA_SASL_USERNAME": "svc", "EDDY_KAFKA_SASL_PASSWORD": "s3cret",
                 "EDDY_KAFKA_SSL_CA_LOCATION": "/etc/eddy/ca.pem"}.items():
        monkeypatch.setenv(k, v)
    return monkeypatch


def test_the_servers_variables_configure_the_clients(eddy_env):
    conf = kafka_conf(None, {})
    assert conf == {"bootstrap.servers": "env-kafka:9092", "security.protocol": "SASL_SSL",
                    "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "svc",
                    "sasl.password": "s3cret", "ssl.ca.location": "/etc/eddy/ca.pem"}
    # An argument, then a keyword property, win over the environment.
    conf = kafka_conf("arg:9092", {"sasl_username": "kw", "linger_ms": 7})
    assert conf["bootstrap.servers"] == "arg:9092"
    assert (conf["sasl.username"], conf["linger.ms"]) == ("kw", 7)
    eddy_env.setenv("EDDY_KAFKA_SECURITY_PROTOCOL", "")  # empty is unset, as for the server
    assert "security.protocol" not in kafka_conf(None, {})


def test_emitter_and_guard_read_names_and_topics_from_the_environment(eddy_env):
    # Security off again: librdkafka would want a real CA file.
    for k in ("EDDY_KAFKA_SECURITY_PROTOCOL", "EDDY_KAFKA_SASL_MECHANISM",
              "EDDY_KAFKA_SASL_USERNAME", "EDDY_KAFKA_SASL_PASSWORD",
              "EDDY_KAFKA_SSL_CA_LOCATION"):
        eddy_env.delenv(k)
    e = Emitter()
    assert (e.topic, e.project_id, e.agent_name) == ("env.steps", "env-proj", "env-bot")
    e2 = Emitter(NOWHERE, "arg.steps", "arg-proj", agent_name="arg-bot")
    assert (e2.topic, e2.project_id, e2.agent_name) == ("arg.steps", "arg-proj", "arg-bot")
    g = Guard(start=False)
    assert g.topic == "env.signals"
    g.close()
    eddy_env.delenv("EDDY_KAFKA_BROKERS")
    with pytest.raises(ValueError, match="EDDY_KAFKA_BROKERS"):
        Emitter()
    eddy_env.delenv("EDDY_PROJECT_ID")
    with pytest.raises(ValueError, match="EDDY_PROJECT_ID"):
        Emitter(NOWHERE)


def test_confluent_kafka_keys_are_passed_untouched():
    for k in ("error_cb", "stats_cb", "throttle_cb", "oauth_cb", "on_delivery", "logger"):
        assert conf_key(k) == k
    assert conf_key("linger_ms") == "linger.ms"
    assert conf_key("sasl.oauthbearer.config") == "sasl.oauthbearer.config"


def until(q, timeout, poll):
    """The first item the client's callback put on `q`, serving its callbacks meanwhile."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        poll(0.1)
        try:
            return q.get_nowait()
        except queue.Empty:
            pass
    raise AssertionError("the callback was never called")


def test_callbacks_given_are_the_ones_librdkafka_calls():
    quiet = logging.getLogger("test.quiet")
    errors, stats, tokens = queue.Queue(), queue.Queue(), queue.Queue()
    e = Emitter(NOWHERE, project_id="p", error_cb=errors.put, stats_cb=stats.put,
                statistics_interval_ms=50, logger=quiet)
    assert until(errors, 15, e.poll) is not None
    assert '"rxbytes"' in until(stats, 15, e.poll)
    g = Guard(NOWHERE, start=False, error_cb=errors.put, logger=quiet)
    while not errors.empty():
        errors.get_nowait()
    assert until(errors, 15, g._consumer.poll) is not None
    g._consumer.close()
    # OAUTHBEARER (and AWS MSK IAM's signer) needs the token callback: librdkafka asks it at
    # once, with the sasl.oauthbearer.config given.

    def oauth_cb(config):
        tokens.put(config)
        return "token", time.time() + 60

    Emitter(NOWHERE, project_id="p", security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER", oauth_cb=oauth_cb,
            **{"sasl.oauthbearer.config": "scope=eddy"}, logger=quiet)
    assert tokens.get(timeout=15) == "scope=eddy"


class FullProducer:
    """librdkafka's queue full for the first `full` produce calls, then room."""

    def __init__(self, full):
        self.full = full
        self.records = []

    def produce(self, topic, key=None, value=None, on_delivery=None):
        if self.full > 0:
            self.full -= 1
            raise BufferError("Local: Queue full")
        self.records.append(key)

    def poll(self, timeout=0):
        return 0

    def flush(self, timeout=None):
        return 0


def test_async_emitter_waits_for_room_without_blocking_the_loop():
    async def main():
        e = AsyncEmitter(NOWHERE, project_id="p", agent_name="bot")
        e.retry_s = 0.01
        e.sync._producer = FullProducer(full=5)
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        t = asyncio.ensure_future(ticker())
        run = await e.run_started("r1")
        assert await e.step(run, tool_name="search", tool_input={"q": 1}) == 1
        await e.run_finished(run)
        assert await e.flush() == 0
        t.cancel()
        # The loop ran while the queue was full, and the events kept their order.
        assert ticks >= 2
        assert e.sync._producer.records == [b"r1"] * 3
        assert e.sync._backlog == []

    asyncio.run(main())


class Stopped:
    def __init__(self, runs):
        self.runs = runs

    def watch(self, run_id, project_id=None):
        pass

    def stopped(self, run_id):
        return object() if run_id in self.runs else None


def test_a_stopped_run_ends_failed_with_loop_detected(emitter):
    from conftest import events

    emitter.guard = Stopped({"stuck"})
    emitter.run_finished("stuck")
    emitter.run_finished("fine")
    emitter.run_finished("stuck2", status="completed", termination_reason="timeout")
    ends = [(v["run_id"], v["status"], v.get("termination_reason")) for v in events(emitter)]
    assert ends == [("stuck", "failed", "loop_detected"), ("fine", "completed", None),
                    ("stuck2", "completed", "timeout")]
