"""``python -m bench.sqs [--quick | --full] [--runs N] [--workers N] [--taskset CPUS] [--out DIR]
[--keep]``: the SQS bench on its own."""

from __future__ import annotations

import bench.sqs
from bench import standalone
from bench.sqs.run import run

WORDS = standalone.Words(
    quick="3 runs of 6,000 messages (default)",
    full="5 runs of 20,000 messages",
    runs="alternating runs (medians)",
    workers="server worker processes",
    taskset="CPU list for the generators (taskset -c)",
    keep="keep the database and logs",
)


def main(argv: list[str] | None = None) -> int:
    """Parse the options and run."""
    return standalone.main(
        argv, prog="python -m bench.sqs", description=bench.sqs.__doc__, words=WORDS, run=run
    )


if __name__ == "__main__":
    raise SystemExit(main())
