"""The command line of a bench that runs on its own (``python -m bench.pools``,
``python -m bench.sqs``): the same options for each, with its own words for them."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.harness import BENCH


@dataclass(frozen=True)
class Words:
    """What a bench says of its options in ``--help``."""

    quick: str
    full: str
    runs: str
    workers: str
    taskset: str
    keep: str


def main(
    argv: list[str] | None,
    *,
    prog: str,
    description: str | None,
    words: Words,
    run: Callable[..., int],
) -> int:
    """Parse the options and call ``run``; 130 when interrupted (after it cleaned up and
    reported)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help=words.quick)
    mode.add_argument("--full", action="store_true", help=words.full)
    parser.add_argument("--runs", type=int, help=words.runs)
    parser.add_argument("--workers", type=int, default=2, help=words.workers)
    parser.add_argument("--taskset", help=words.taskset)
    parser.add_argument("--out", type=Path, default=BENCH / "out", help="where results go")
    parser.add_argument("--keep", action="store_true", help=words.keep)
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
