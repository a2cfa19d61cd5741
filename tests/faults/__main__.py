"""Run a longer fault campaign and print its report.

Usage (from the top of the checkout)::

    .venv/bin/python -m tests.faults --duration 300            # 5 minutes of traffic and faults
    .venv/bin/python -m tests.faults --duration 300 --seed 7 --verbose --keep
    .venv/bin/python -m tests.faults --ha --duration 300        # on a pg_auto_failover formation

Every fault type of :data:`tests.faults.config.FAULTS` is injected in shuffled rounds, one after
another with ``--gap`` seconds of undisturbed traffic before each, until ``--duration`` seconds
of traffic have passed; then producers stop, the system drains and the checks run. ``--faults``
restricts the campaign to some fault types (e.g. ``--faults leader_partition,leader_pause``);
``--no-proxy`` runs without the TCP proxies (and without their faults).

``--ha`` runs the servers on a pg_auto_failover formation (a monitor, a primary and its
synchronous standby; needs ``pg_autoctl``) and injects the faults of
:data:`tests.faults.config.HA_CAMPAIGN_FAULTS`: the formation's own (``switchover``,
``kill_primary``, ``stop_standby``) and the server faults that need no proxy. The report gives
the write outage of every fault, and per fault type (count, median, max).

The exit status is 0 when no violation was found, 1 otherwise; the working directory (database
data and logs, server logs) is kept when a violation is found, or always with ``--keep``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.faults.campaign import run_campaign
from tests.faults.config import FAULTS, HA_FAULTS, CampaignConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.faults", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of traffic")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gap", type=float, default=3.0, help="seconds between faults")
    parser.add_argument(
        "--faults",
        help="comma-separated fault types to inject (default: every one that applies), among "
        + ", ".join(FAULTS + HA_FAULTS),
    )
    parser.add_argument("--no-proxy", action="store_true", help="servers connect directly")
    parser.add_argument(
        "--ha", action="store_true", help="run on a pg_auto_failover formation, with its faults"
    )
    parser.add_argument("--workdir", type=Path, help="where the cluster and logs go")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    parser.add_argument("--verbose", action="store_true", help="log faults as they happen")
    args = parser.parse_args(argv)
    config = CampaignConfig(
        duration=args.duration,
        seed=args.seed,
        faults=[f.strip() for f in args.faults.split(",") if f.strip()] if args.faults else None,
        repeat=True,
        gap=args.gap,
        use_proxy=not args.no_proxy,
        ha=args.ha,
        workdir=args.workdir,
        keep_workdir=args.keep,
        verbose=args.verbose,
    )
    report = run_campaign(config)
    print(report.format())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
