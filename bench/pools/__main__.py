"""``python -m bench.pools [--quick | --full] [--runs N] [--workers N] [--taskset CPUS] [--out DIR]
[--keep]``: the pools bench on its own."""

from __future__ import annotations

import bench.pools
from bench import standalone
from bench.pools.run import run

WORDS = standalone.Words(
    quick="3 runs of 0.5 + 2 s (default)",
    full="5 runs of 2 + 10 s",
    runs="alternating runs per phase (medians)",
    workers="worker processes per server",
    taskset="CPU list for the load generators (taskset -c)",
    keep="keep the databases and logs",
)


def main(argv: list[str] | None = None) -> int:
    """Parse the options and run."""
    return standalone.main(
        argv, prog="python -m bench.pools", description=bench.pools.__doc__, words=WORDS, run=run
    )


if __name__ == "__main__":
    raise SystemExit(main())
