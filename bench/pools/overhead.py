"""Routing overhead: ``enqueue_b1`` and ``process_b1`` on the server without pools (``single``)
and on the server whose namespace lives on a second pool (``routed``), alternately."""

from __future__ import annotations

from typing import Any

from app.embedded import LocalCluster
from bench.pools import measures
from bench.pools.tenants import Tenant

SYSTEMS = ("single", "routed")
"""(a) no ``SUNDIAL_POOLS``, the namespace on the single database; (b) the namespace on a second
pool, every request routed."""
WORKLOADS = ("enqueue_b1", "process_b1")
CLIENTS = 8
"""Concurrent clients, as the suite's one-message rows."""


def measure_run(
    tenants: dict[str, Tenant],
    clusters: dict[str, LocalCluster],
    size: dict[str, Any],
    run: int,
    rates: dict[str, float],
    checks: list[dict[str, Any]],
    taskset: str | None = None,
) -> dict[str, dict[str, Any]]:
    """One run of both workloads on both servers, which goes first alternating between runs."""
    order = SYSTEMS if run % 2 == 0 else SYSTEMS[::-1]
    out: dict[str, dict[str, Any]] = {workload: {} for workload in WORKLOADS}
    for workload in WORKLOADS:
        for system in order:
            tenant = tenants[system]
            if workload == "enqueue_b1":
                result = measures.enqueue(
                    f"{system} enqueue b1",
                    [tenant],
                    clusters,
                    clients=CLIENTS,
                    batch=1,
                    size=size,
                    queue=f"enq-{run}",
                    checks=checks,
                    taskset=taskset,
                )
            else:
                result = measures.process(
                    f"{system} dequeue+complete b1",
                    [tenant],
                    clusters,
                    clients=CLIENTS,
                    batch=1,
                    size=size,
                    queue=f"proc-{run}",
                    rate_guess=rates.get(system, size["guess_b1"]),
                    checks=checks,
                    taskset=taskset,
                )
                rates[system] = result["rate"] or rates.get(system, size["guess_b1"])
            out[workload][system] = result
    return out
