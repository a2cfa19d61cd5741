"""``python -m bench.sqs [--quick | --full] [--runs N] [--workers N] [--taskset CPUS] [--out DIR]
[--keep]``: the SQS bench on its own."""

from __future__ import annotations

import argparse
from pathlib import Path

import bench.sqs
from bench.harness import BENCH
from bench.sqs.run import run


def main(argv: list[str] | None = None) -> int:
    """Parse the options and run; 130 when interrupted (after cleaning up and reporting)."""
    parser = argparse.ArgumentParser(prog="python -m bench.sqs", description=bench.sqs.__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="3 runs of 6,000 messages (default)")
    mode.add_argument("--full", action="store_true", help="5 runs of 20,000 messages")
    parser.add_argument("--runs", type=int, help="alternating runs (medians)")
    parser.add_argument("--workers", type=int, default=2, help="server worker processes")
    parser.add_argument("--taskset", help="CPU list for the generators (taskset -c)")
    parser.add_argument("--out", type=Path, default=BENCH / "out", help="where results go")
    parser.add_argument("--keep", action="store_true", help="keep the database and logs")
    args = parser.parse_args(argv)
    try:
        return run(
            full=args.full,
            runs=args.runs,
            workers=args.workers,
            out=args.out,
            keep=args.keep,
            taskset=args.taskset,
        )
    except KeyboardInterrupt:
        return 130  # cleaned up and reported by run()


if __name__ == "__main__":
    raise SystemExit(main())
