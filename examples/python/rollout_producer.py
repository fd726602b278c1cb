#!/usr/bin/env python3
"""An RL rollout worker that reports every environment step to eddy (contract v1).

Each episode is one run: `run_started`, one `step` per env.step() call, `run_finished`. Messages
are keyed by run_id, so a run stays on one partition and eddy sees its steps in order.

    pip install confluent-kafka
    python3 examples/python/rollout_producer.py --brokers 127.0.0.1:19092 --topic agent.steps

`partitioner=murmur2_random` makes librdkafka hash keys as Kafka's Java clients do, so every
producer of the topic (and `eddy replay --partitions N`) puts a run on the same partition.
Prints one line per episode: {"run_id": ..., "events": N, "stuck": bool}.
"""
import argparse
import json
import sys
import time
import uuid

from confluent_kafka import Producer


class EventSink:
    """v1 events to Kafka, key = run_id; delivery failures are collected, not ignored."""

    def __init__(self, brokers, topic, project_id):
        self.topic = topic
        self.project_id = project_id
        self.errors = []
        self.producer = Producer({
            "bootstrap.servers": brokers,
            "partitioner": "murmur2_random",
            "enable.idempotence": True,   # acks=all, no duplicates or reordering on retry
            "linger.ms": 20,              # batch steps of many envs; never blocks env.step()
            "compression.type": "lz4",
        })

    def _delivered(self, err, msg):
        if err is not None:
            self.errors.append(f"{msg.key()!r}: {err}")

    def emit(self, run_id, kind, **fields):
        event = {"v": 1, "kind": kind, "project_id": self.project_id, "run_id": run_id,
                 "ts": int(time.time() * 1000), **fields}
        while True:
            try:
                self.producer.produce(self.topic, key=run_id, value=json.dumps(event),
                                      on_delivery=self._delivered)
                break
            except BufferError:           # local queue full: let it drain, then retry
                self.producer.poll(0.1)
        self.producer.poll(0)             # serve delivery callbacks

    def close(self, timeout=30):
        left = self.producer.flush(timeout)
        if left:
            self.errors.append(f"{left} events not delivered within {timeout}s")
        return self.errors


class GridEnv:
    """A toy corridor: move right to reach the goal. A wall at `wall` blocks a stuck policy."""

    def __init__(self, length=6, wall=None):
        self.length, self.wall, self.pos = length, wall, 0

    def step(self, action):
        target = self.pos + (1 if action == "right" else -1)
        if self.wall is not None and target >= self.wall:
            target = self.pos             # bumps into the wall: nothing changes
        self.pos = max(0, target)
        done = self.pos >= self.length
        return {"pos": self.pos, "reward": 1.0 if done else 0.0, "done": done}


def rollout(sink, episode, stuck, max_steps=12):
    run_id = str(uuid.uuid4())
    sink.emit(run_id, "run_started", agent_name="ppo-rollout-worker",
              metadata={"episode": episode, "policy": "ppo-v3"})
    env = GridEnv(wall=3 if stuck else None)
    n, obs = 0, {"done": False}
    while not obs["done"] and n < max_steps:
        n += 1
        action = "right"
        obs = env.step(action)
        sink.emit(run_id, "step", step_index=n, step_type="tool_call", agent="policy",
                  tool_name="env.step", tool_input={"action": action}, tool_output=obs,
                  tool_success=True, tool_latency_ms=1, tokens=0)
    reason = "clean" if obs["done"] else "max_steps_reached"
    sink.emit(run_id, "run_finished", status="completed", termination_reason=reason)
    return {"run_id": run_id, "events": n + 2, "stuck": stuck}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="agent.steps")
    ap.add_argument("--project", default="rl-training")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--stuck-every", type=int, default=2, help="every Nth episode hits a wall")
    args = ap.parse_args()

    sink = EventSink(args.brokers, args.topic, args.project)
    for ep in range(args.episodes):
        stuck = args.stuck_every > 0 and ep % args.stuck_every == args.stuck_every - 1
        print(json.dumps(rollout(sink, ep, stuck)), flush=True)
    errors = sink.close()
    if errors:
        sys.exit("delivery failed: " + "; ".join(errors[:5]))


if __name__ == "__main__":
    main()
