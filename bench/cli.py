"""``python -m bench``: the command line of the suite (and of the failover, pools and sqs benches,
which run only when named), see bench/README.md."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.harness import BENCH
from bench.run import run as run_suite
from bench.sizes import FULL, QUICK, WORKLOADS

NAMED_ONLY = ("failover", "pools", "sqs")
"""Benches of their own, with their own servers and databases, run only when named."""
DESCRIPTION = (
    "The workloads, the run loop and the report. See bench/README.md for what each workload does."
)


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run the failover and pools benches if named, then the suite's
    selected workloads; 1 if a correctness check of any failed."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=DESCRIPTION)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="short runs, small backlogs (default)")
    mode.add_argument("--full", action="store_true", help="the issue's real sizes (10M backlog)")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=(*WORKLOADS, *NAMED_ONLY),
        help="run only these workloads (failover, pools and sqs run only when named:"
        " bench/failover/, bench/pools/, bench/sqs/)",
    )
    parser.add_argument("--runs", type=int, help="repetitions per workload (median is reported)")
    parser.add_argument("--out", type=Path, default=BENCH / "out", help="where results go")
    parser.add_argument("--workers", type=int, default=2, help="server worker processes")
    parser.add_argument("--no-peer", action="store_true", help="skip PgQueuer")
    parser.add_argument("--no-profile", action="store_true", help="skip the py-spy profile")
    parser.add_argument(
        "--taskset", help="CPU list for the load generator and pgbench, e.g. 1 (taskset -c)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (database, logs)")
    parser.add_argument("--soak-seconds", type=float, help="length of the soak (default by mode)")
    parser.add_argument("--soak-rate", type=int, help="messages per second in the soak")
    args = parser.parse_args(argv)
    size = dict(FULL if args.full else QUICK)
    if args.soak_seconds is not None:
        size["soak_seconds"] = args.soak_seconds
    if args.soak_rate is not None:
        size["soak_rate"] = args.soak_rate
    runs = args.runs or size["runs"]
    selected = args.only or list(WORKLOADS)
    args.out.mkdir(parents=True, exist_ok=True)
    named_status = 0
    if "failover" in selected:
        # Its own servers and databases (a single node and a formation).
        from bench.failover.run import run as run_failover

        named_status = run_failover(
            full=args.full, runs=args.runs, workers=args.workers, out=args.out, keep=args.keep
        )
    if "pools" in selected:
        # Its own servers and databases (two PostgreSQL clusters).
        from bench.pools.run import run as run_pools

        named_status |= run_pools(
            full=args.full,
            runs=args.runs,
            workers=args.workers,
            out=args.out,
            keep=args.keep,
            taskset=args.taskset,
        )
    if "sqs" in selected:
        # Its own server and database: the SQS door against the REST API.
        from bench.sqs.run import run as run_sqs

        named_status |= run_sqs(
            full=args.full,
            runs=args.runs,
            workers=args.workers,
            out=args.out,
            keep=args.keep,
            taskset=args.taskset,
        )
    if any(name in NAMED_ONLY for name in selected):
        selected = [name for name in selected if name not in NAMED_ONLY]
        if not selected:
            return named_status
    status = run_suite(
        size=size,
        runs=runs,
        selected=selected,
        out=args.out,
        workers=args.workers,
        taskset=args.taskset,
        keep=args.keep,
        peer=not args.no_peer,
        profile=not args.no_profile,
    )
    return 1 if status or named_status else 0
