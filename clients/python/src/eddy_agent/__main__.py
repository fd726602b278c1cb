"""`python -m eddy_agent replay FILE`: what `eddy replay FILE` prints, from the wheel's engine.

For notebooks and for checking a trace in a project's own CI without the eddy binary: the output
events on stdout, one JSON line each, skipped lines and the closing count on stderr.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from . import _engine


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m eddy_agent",
                                description="eddy's engine, in this process")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("replay", help="run the detectors over JSONL v1 events (FILE or - for "
                                      "stdin); print output events")
    r.add_argument("file")
    r.add_argument("--config", default=os.environ.get("EDDY_CONFIG"),
                   help="TOML config file, as for eddy (also EDDY_CONFIG)")
    r.add_argument("--partitions", type=int, default=1,
                   help="hash runs to this many partitions, as the producer does")
    r.add_argument("--summary", action="store_true",
                   help="print a per-run summary table on stderr")
    args = p.parse_args(argv)

    out = sys.stdout.buffer
    err = sys.stderr
    try:
        _lines, events, malformed, outputs, table = _engine.replay(
            args.file,
            lambda line: out.write(line.encode("utf-8") + b"\n"),
            lambda n, why: print(f"line {n}: skipped: {why}", file=err),
            config=args.config, partitions=args.partitions, summary=args.summary)
    except (OSError, ValueError) as e:
        out.flush()
        print(f"Error: {e}", file=err)
        return 1
    out.flush()
    if table is not None:
        err.write(table)
    print(f"replayed {events} events ({malformed} malformed lines skipped), {outputs} output "
          f"events", file=err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
