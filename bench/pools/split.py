"""Two pools against one: the load split over two namespaces of one server, both on the first
PostgreSQL (``one``) or one on each of two PostgreSQL clusters (``two``), alternately; a
database-heavy pair of workloads (batches of 100: the database spends more CPU per message than
the server, bench/README.md "Pools")."""

from __future__ import annotations

from typing import Any

from app.embedded import LocalCluster
from bench.pools import measures
from bench.pools.tenants import Tenant

SETUPS = ("one", "two")
WORKLOADS = ("enqueue_b100", "process_b100")
BATCH = 100
CLIENTS = 8
"""Concurrent clients per namespace (16 in all)."""


def measure_run(
    setups: dict[str, list[Tenant]],
    clusters: dict[str, LocalCluster],
    size: dict[str, Any],
    run: int,
    rates: dict[str, float],
    checks: list[dict[str, Any]],
    taskset: str | None = None,
) -> dict[str, dict[str, Any]]:
    """One run of both workloads on both setups, which goes first alternating between runs."""
    order = SETUPS if run % 2 == 0 else SETUPS[::-1]
    out: dict[str, dict[str, Any]] = {workload: {} for workload in WORKLOADS}
    for workload in WORKLOADS:
        for setup in order:
            label = f"{setup} pool{'s' if setup == 'two' else ''}"
            if workload == "enqueue_b100":
                result = measures.enqueue(
                    f"{label} enqueue b{BATCH}",
                    setups[setup],
                    clusters,
                    clients=CLIENTS,
                    batch=BATCH,
                    size=size,
                    queue=f"enq-{run}",
                    checks=checks,
                    taskset=taskset,
                )
            else:
                result = measures.process(
                    f"{label} dequeue+ack b{BATCH}",
                    setups[setup],
                    clusters,
                    clients=CLIENTS,
                    batch=BATCH,
                    size=size,
                    queue=f"proc-{run}",
                    rate_guess=rates.get(setup, size["guess_b100"]),
                    checks=checks,
                    taskset=taskset,
                )
                rates[setup] = result["rate"] or rates.get(setup, size["guess_b100"])
            out[workload][setup] = result
    return out
