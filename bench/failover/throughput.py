"""Throughput, single node against the formation: enqueue b1 and dequeue + complete b1 on both,
the order alternating between runs, each checked for lost or duplicated messages."""

from __future__ import annotations

from typing import Any

from app.embedded.formation import Formation
from bench.checks import record
from bench.failover.databases import SYSTEMS, formation_cpu
from bench.harness import Environment
from bench.prepare import prefill

CLIENTS = 8
"""Concurrent clients of each throughput measurement, as the suite's enqueue/process rows."""
RATE_GUESS = 1_000
"""msg/s guessed for sizing the first processing backlog (later ones use the measured rate)."""


def measure_pair(
    envs: dict[str, Environment],
    formation: Formation,
    size: dict[str, Any],
    run: int,
    rates: dict[str, float],
    checks: list[dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    """One run of both workloads on both systems, the order alternating between runs."""
    order = SYSTEMS if run % 2 == 0 else SYSTEMS[::-1]
    out: dict[str, dict[str, Any]] = {"enqueue_b1": {}, "process_b1": {}}
    for workload in out:
        for system in order:
            env = envs[system]
            before = formation_cpu(formation)
            if workload == "enqueue_b1":
                result = _enqueue(env, size, run, checks, system)
            else:
                result = _process(env, size, run, checks, system, rates)
            if system == "formation":
                after = formation_cpu(formation)
                result["cpu"]["formation_cpu_s"] = {
                    name: round(after[name] - before.get(name, 0.0), 2) for name in after
                }
            out[workload][system] = result
    return out


def _enqueue(
    env: Environment, size: dict[str, Any], run: int, checks: list[dict[str, Any]], system: str
) -> dict[str, Any]:
    name = f"enq-{run}"
    queue_id = env.create_queue(name)
    env.checkpoint()
    result = env.loadgen(
        {
            "mode": "enqueue",
            "queue_path": env.queue_path(name),
            "clients": CLIENTS,
            "batch": 1,
            "warmup": size["warmup"],
            "duration": size["duration"],
        }
    )
    stored = sum(env.counts(queue_id).values())
    record(
        checks,
        f"{system} enqueue b1: rows stored == messages acknowledged, no errors",
        stored == result["enqueued_total"] and result["errors"] == 0,
        {"stored": stored, "acknowledged": result["enqueued_total"], "errors": result["errors"]},
    )
    env.drop_queue(queue_id)
    return result


def _process(
    env: Environment,
    size: dict[str, Any],
    run: int,
    checks: list[dict[str, Any]],
    system: str,
    rates: dict[str, float],
) -> dict[str, Any]:
    name = f"proc-{run}"
    queue_id = env.create_queue(name)
    rate = rates.get(system, RATE_GUESS)
    backlog = max(2_000, int(rate * (size["warmup"] + size["duration"]) * 2.5))
    prefill(env, queue_id, backlog)
    env.checkpoint()
    path = env.queue_path(name)
    result = env.loadgen(
        {
            "mode": "process",
            "queue_path": path,
            "clients": CLIENTS,
            "batch": 1,
            "warmup": size["warmup"],
            "duration": size["duration"],
        }
    )
    rates[system] = result["rate"] or rate
    rest = env.loadgen(
        {"mode": "process", "queue_path": path, "clients": CLIENTS, "batch": 100, "drain": True}
    )
    counts = env.counts(queue_id)
    record(
        checks,
        f"{system} dequeue+complete b1: completed == enqueued, no duplicates, no errors",
        counts == {"completed": backlog}
        and result["completed_total"] + rest["completed_total"] == backlog
        and result["duplicates"] + rest["duplicates"] == 0
        and result["errors"] + rest["errors"] == 0,
        {
            "enqueued": backlog,
            "counts": counts,
            "ran_out": result["ran_out"],
            "errors": result["errors"] + rest["errors"],
        },
    )
    env.drop_queue(queue_id)
    return result
