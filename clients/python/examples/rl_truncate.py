#!/usr/bin/env python3
"""RL rollouts whose stuck episodes eddy truncates.

A FrozenLake policy that, every other episode, keeps walking into the west wall: the state
never changes. The EddyEpisodes wrapper reports each env.step() to eddy and truncates the
episode once eddy's stop verdict arrives, instead of burning the step budget.

    pip install ./clients/python gymnasium
    python3 clients/python/examples/rl_truncate.py --brokers 127.0.0.1:9092

Prints one JSON line per episode: steps taken, how it ended and eddy's detector if it stopped.
"""
import argparse
import json
import time

import gymnasium

from eddy_agent import Emitter, Guard
from eddy_agent.gymnasium import EddyEpisodes

LEFT, DOWN, RIGHT, UP = range(4)
# On the 4x4 map, this walks from the start to the goal without touching a hole.
SAFE_PATH = [DOWN, DOWN, RIGHT, RIGHT, DOWN, RIGHT]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="127.0.0.1:9092")
    ap.add_argument("--steps-topic", default="agent.steps")
    ap.add_argument("--signals-topic", default="agent.signals")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--max-steps", type=int, default=200)
    ap.add_argument("--step-ms", type=float, default=50, help="time one policy step takes")
    args = ap.parse_args()

    guard = Guard(args.brokers, topic=args.signals_topic)
    eddy = Emitter(args.brokers, topic=args.steps_topic, project_id="rl-training", guard=guard)
    env = EddyEpisodes(gymnasium.make("FrozenLake-v1", is_slippery=False), eddy,
                       agent_name="frozenlake-ppo")
    for episode in range(args.episodes):
        stuck = episode % 2 == 1
        obs, info = env.reset(seed=episode)
        run_id = info["eddy_run_id"]
        steps, ended = 0, "max_steps"
        for t in range(args.max_steps):
            action = LEFT if stuck else SAFE_PATH[t % len(SAFE_PATH)]
            obs, reward, terminated, truncated, info = env.step(action)
            if "eddy_stop" in info:
                ended = "eddy_stop"
                break
            steps += 1
            if terminated or truncated:
                ended = "goal" if reward > 0 else "terminated"
                break
            time.sleep(args.step_ms / 1000)
        stop = info.get("eddy_stop")
        print(json.dumps({"episode": episode, "run_id": run_id, "stuck": stuck,
                          "steps": steps, "ended": ended,
                          "detector": stop.detector if stop else None}), flush=True)
    env.close()
    eddy.flush()
    guard.close()


if __name__ == "__main__":
    main()
