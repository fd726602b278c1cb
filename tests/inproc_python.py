"""Feeds a JSONL trace to eddy_agent.Local one event at a time, as an agent would, and prints the
output events the guard returned, as eddy's JSON lines (tests/inproc.rs compares them with
`eddy replay`).

    inproc_python.py FILE [--partitions N] [--config F] [--as-dicts OUT]

`--as-dicts OUT`: hand each event to the guard as a dict (so the package serialises it, as its
Emitter would put it on the topic) and write those serialised events to OUT, for replay.
"""
import argparse
import json
import sys

from eddy_agent import Local

p = argparse.ArgumentParser()
p.add_argument("file")
p.add_argument("--partitions", type=int, default=1)
p.add_argument("--config")
p.add_argument("--as-dicts")
args = p.parse_args()

eddy = Local(args.config, partitions=args.partitions)
out = sys.stdout
sent = open(args.as_dicts, "w", encoding="utf-8") if args.as_dicts else None
skipped = 0
with open(args.file, "rb") as f:
    for raw in f:
        line = raw.strip()
        if not line:
            continue
        try:
            if sent is not None:
                event = json.loads(line)
                lines = eddy.observe_event_json(event)
                sent.write(json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n")
            else:
                lines = eddy.observe_event_json(line)
        except ValueError:
            skipped += 1
            continue
        for o in lines:
            out.write(o + "\n")
if sent is not None:
    sent.close()
print(f"skipped {skipped}, open {eddy.open_runs}, ended {eddy.ended_runs}", file=sys.stderr)
