import json

import pytest


class RecordingProducer:
    """Stands in for confluent_kafka.Producer where only the produced records matter."""

    def __init__(self):
        self.records = []

    def produce(self, topic, key=None, value=None, on_delivery=None):
        self.records.append((topic, key, json.loads(value)))

    def poll(self, timeout=0):
        return 0

    def flush(self, timeout=None):
        return 0


@pytest.fixture
def emitter():
    from eddy_agent import Emitter

    # Never connects: the producer is replaced before anything is sent.
    e = Emitter("127.0.0.1:1", topic="t.steps", project_id="acme", agent_name="bot")
    e._producer = RecordingProducer()
    return e


def events(emitter):
    return [v for _, _, v in emitter._producer.records]
