"""``python -m bench.pools [--quick | --full] [--runs N] [--workers N] [--taskset CPUS] [--out DIR]
[--keep]``: the pools bench on its own."""

from __future__ import annotations

import argparse
from pathlib import Path

import bench.pools
from bench.harness import BENCH
from bench.pools.run import run


def main(argv: list[str] | None = None) -> int:
    """Parse the options and run; 130 when interrupted (after cleaning up and reporting)."""
    parser = argparse.ArgumentParser(prog="python -m bench.pools", description=bench.pools.__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="3 runs of 0.5 + 2 s (default)")
    mode.add_argument("--full", action="store_true", help="5 runs of 2 + 10 s")
    parser.add_argument("--runs", type=int, help="alternating runs per phase (medians)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes per server")
    parser.add_argument("--taskset", help="CPU list for the load generators (taskset -c)")
    parser.add_argument("--out", type=Path, default=BENCH / "out", help="where results go")
    parser.add_argument("--keep", action="store_true", help="keep the databases and logs")
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
