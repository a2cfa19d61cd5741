"""One measurement of the pools bench: enqueue, or dequeue + acknowledge over a prefilled backlog,
on one or more namespaces at once (a queue of its own in each, a generator per namespace), with
the suite's timing rules and its correctness checks, the queues dropped afterwards."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.embedded import LocalCluster
from bench.checks import record
from bench.pools.loads import run_loads, run_one
from bench.pools.tenants import Tenant, checkpoint
from bench.prepare import prefill


def enqueue(
    label: str,
    tenants: Sequence[Tenant],
    clusters: dict[str, LocalCluster],
    *,
    clients: int,
    batch: int,
    size: dict[str, Any],
    queue: str,
    checks: list[dict[str, Any]],
    taskset: str | None = None,
) -> dict[str, Any]:
    """``clients`` producers per namespace POST ``batch`` messages per request, back to back."""
    qids = [t.create_queue(queue) for t in tenants]
    checkpoint(*clusters.values())
    spec = {
        "mode": "enqueue",
        "clients": clients,
        "batch": batch,
        "warmup": size["warmup"],
        "duration": size["duration"],
    }
    server = tenants[0].server
    result = run_loads(
        server,
        [(t, {**spec, "queue_path": t.queue_path(queue)}) for t in tenants],
        clusters,
        taskset=taskset,
    )
    for tenant, qid in zip(tenants, qids, strict=True):
        got = result["tenants"][tenant.name]
        stored = sum(tenant.counts(qid).values())
        record(
            checks,
            f"{label} {tenant.name}: rows stored == messages acknowledged, no errors",
            stored == got["enqueued_total"] and got["errors"] == 0,
            {"stored": stored, "acknowledged": got["enqueued_total"], "errors": got["errors"]},
        )
        tenant.drop_queue(qid)
    return result


def backlog_for(rate: float, size: dict[str, Any]) -> int:
    """Messages enough for a namespace's run at ``rate`` (its own share), as the suite sizes
    them: 2.5 times the generator's whole run."""
    return max(2_000, int(rate * (size["warmup"] + size["duration"] + 1.0) * 2.5))


def process(
    label: str,
    tenants: Sequence[Tenant],
    clusters: dict[str, LocalCluster],
    *,
    clients: int,
    batch: int,
    size: dict[str, Any],
    queue: str,
    rate_guess: float,
    checks: list[dict[str, Any]],
    taskset: str | None = None,
) -> dict[str, Any]:
    """``clients`` consumers per namespace dequeue ``batch`` and acknowledge them (a complete
    per message for 1, a batch ack otherwise), back to back, over a backlog prefilled in SQL
    and sized from ``rate_guess`` (msg/s of the whole measurement); the rest drained after."""
    qids = [t.create_queue(queue) for t in tenants]
    n = backlog_for(rate_guess / len(tenants), size)
    for tenant, qid in zip(tenants, qids, strict=True):
        prefill(tenant, qid, n)
    checkpoint(*clusters.values())
    spec = {
        "mode": "process",
        "clients": clients,
        "batch": batch,
        "warmup": size["warmup"],
        "duration": size["duration"],
    }
    server = tenants[0].server
    result = run_loads(
        server,
        [(t, {**spec, "queue_path": t.queue_path(queue)}) for t in tenants],
        clusters,
        taskset=taskset,
    )
    result["backlog"] = n
    for tenant, qid in zip(tenants, qids, strict=True):
        got = result["tenants"][tenant.name]
        rest = run_one(
            server,
            tenant,
            {
                "mode": "process",
                "queue_path": tenant.queue_path(queue),
                "clients": clients,
                "batch": 100,
                "drain": True,
            },
        )
        counts = tenant.counts(qid)
        record(
            checks,
            f"{label} {tenant.name}: completed == enqueued, no duplicates, no errors",
            counts == {"completed": n}
            and got["completed_total"] + rest["completed_total"] == n
            and got["duplicates"] + rest["duplicates"] == 0
            and got["errors"] + rest["errors"] == 0,
            {
                "enqueued": n,
                "counts": counts,
                "ran_out": got["ran_out"],
                "duplicates": got["duplicates"] + rest["duplicates"],
                "errors": got["errors"] + rest["errors"],
            },
        )
        tenant.drop_queue(qid)
    return result
