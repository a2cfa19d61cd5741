"""``python -m bench.failover [--quick | --full] [--runs N] [--workers N] [--out DIR] [--keep]``:
the failover bench on its own."""

from __future__ import annotations

import argparse
from pathlib import Path

import bench.failover
from bench.failover.run import run
from bench.harness import BENCH


def main(argv: list[str] | None = None) -> int:
    """Parse the options and run; 130 when interrupted (after cleaning up and reporting)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.failover", description=bench.failover.__doc__
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="short runs, few faults (default)")
    mode.add_argument("--full", action="store_true", help="longer runs, more faults")
    parser.add_argument("--runs", type=int, help="alternating throughput runs (medians)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes per server")
    parser.add_argument("--out", type=Path, default=BENCH / "out", help="where results go")
    parser.add_argument("--keep", action="store_true", help="keep the databases and logs")
    args = parser.parse_args(argv)
    try:
        return run(
            full=args.full, runs=args.runs, workers=args.workers, out=args.out, keep=args.keep
        )
    except KeyboardInterrupt:
        return 130  # cleaned up and reported by run()


if __name__ == "__main__":
    raise SystemExit(main())
