"""The pools bench's figures, from the measurements' raw results (no I/O): CPU per message of
each process, per-run ratios of one setup against another with their spread, and the capacity
model built from the database's CPU per message (docs/scaling.md, "Capacity model")."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from bench.stats import median

TARGET_OVERHEAD = 1.05
"""Issue #18: routing may cost at most 5 % of the server's CPU per request."""
UTILISATION = 0.7
"""The share of a pool's cores the capacity model plans to use (headroom for peaks, vacuum,
checkpoints and a failover's catch-up)."""
LIFECYCLES: dict[str, tuple[str, str]] = {
    "one message per request": ("enqueue_b1", "process_b1"),
    "100 messages per request": ("enqueue_b100", "process_b100"),
}
"""A message's life on the database: enqueued once, then dequeued and completed once."""
RATES = (1_000, 5_000, 20_000, 100_000)
"""The loads (msg/s through their whole life) the worked examples size pools for."""
POOL_CORES = (4, 8, 16)
"""The pool sizes (cores of the database server) the worked examples count."""


def per_message_us(cpu_s: float | None, messages: float) -> float | None:
    """Microseconds of CPU per message; None without messages."""
    if cpu_s is None or not messages:
        return None
    return cpu_s / messages * 1e6


def database_cpu_s(cpu: dict[str, Any]) -> float:
    """CPU seconds of every PostgreSQL of a measurement (one figure, or one per cluster)."""
    value = cpu["postgres_cpu_s"]
    return float(sum(value.values()) if isinstance(value, dict) else value)


FIGURES = (
    "rate",
    "server_us",
    "database_us",
    "generator_us",
    "total_us",
    "server_net_us",
    "database_net_us",
    "others_cores",
    "busy_cores",
    "iowait_cores",
)


def figures(
    result: dict[str, Any], idle_server: float = 0.0, idle_database: float = 0.0
) -> dict[str, float | None]:
    """One measurement's rate; the CPU each process spent per message it handled (warm-up and
    tail included, as its CPU is) and in all; the server's and the database's net of what they
    spend idle (``idle_*``: cores busy with nothing to do, over the measurement's wall time);
    and the cores the machine's other processes kept busy meanwhile, the cores busy in all and
    those idle waiting for I/O (near the machine's cores busy, and no I/O wait: CPU was the
    bound)."""
    cpu, handled = result["cpu"], result["handled"]
    ours = cpu["server_cpu_s"] + database_cpu_s(cpu) + cpu["loadgen_cpu_s"]
    busy, wall = cpu.get("machine_busy_s"), cpu.get("wall_s") or 0.0
    return {
        "rate": result["rate"],
        "server_us": per_message_us(cpu["server_cpu_s"], handled),
        "database_us": per_message_us(database_cpu_s(cpu), handled),
        "generator_us": per_message_us(cpu["loadgen_cpu_s"], handled),
        "total_us": per_message_us(ours, handled),
        "server_net_us": per_message_us(cpu["server_cpu_s"] - idle_server * wall, handled),
        "database_net_us": per_message_us(database_cpu_s(cpu) - idle_database * wall, handled),
        "others_cores": max(0.0, busy - ours) / wall if busy is not None and wall else None,
        "busy_cores": busy / wall if busy is not None and wall else None,
        "iowait_cores": cpu["machine_iowait_s"] / wall
        if "machine_iowait_s" in cpu and wall
        else None,
    }


def spread(values: Iterable[float | None]) -> dict[str, Any]:
    """Median, min, max and the values themselves (Nones left out)."""
    clean = [v for v in values if v is not None]
    return {
        "median": median(clean),
        "min": min(clean) if clean else None,
        "max": max(clean) if clean else None,
        "runs": clean,
    }


def _ratio(b: float | None, a: float | None) -> float | None:
    return b / a if a and b is not None else None


def compare(
    runs: Sequence[dict[str, Any]],
    workload: str,
    base: str,
    other: str,
    idle: dict[str, tuple[float, float]] | None = None,
) -> dict[str, Any]:
    """``other`` against ``base`` over the runs of ``workload``: the medians of each figure for
    both, and each figure's ratio other/base, taken run by run (each pair measured back to
    back), with its spread. ``idle`` gives each setup's idle (server, database) cores."""
    idle = idle or {}
    pairs = [
        (
            figures(r[workload][base], *idle.get(base, (0.0, 0.0))),
            figures(r[workload][other], *idle.get(other, (0.0, 0.0))),
        )
        for r in runs
        if workload in r and base in r[workload] and other in r[workload]
    ]
    out: dict[str, Any] = {"n": len(pairs)}
    for key in FIGURES:
        out[key] = {
            base: median(a[key] for a, _ in pairs),
            other: median(b[key] for _, b in pairs),
            "ratio": spread(_ratio(b[key], a[key]) for a, b in pairs),
        }
    return out


def cores_needed(rate: float, cpu_us_per_msg: float, utilisation: float = UTILISATION) -> float:
    """Cores a database needs to carry ``rate`` msg/s at ``cpu_us_per_msg`` of its CPU per
    message, kept at ``utilisation``: rate x CPU per message / utilisation."""
    return rate * cpu_us_per_msg / 1e6 / utilisation


def pools_needed(
    rate: float, cpu_us_per_msg: float, cores_per_pool: int, utilisation: float = UTILISATION
) -> int:
    """Pools of ``cores_per_pool`` cores that carry ``rate`` msg/s (at least one)."""
    return max(1, math.ceil(cores_needed(rate, cpu_us_per_msg, utilisation) / cores_per_pool))


def rate_per_pool(cpu_us_per_msg: float, cores: int, utilisation: float = UTILISATION) -> float:
    """msg/s one pool of ``cores`` cores carries at ``utilisation``."""
    return cores * utilisation * 1e6 / cpu_us_per_msg


def lifecycle_costs(database_us: dict[str, float | None]) -> dict[str, float]:
    """The database's CPU for a message's whole life (enqueue + dequeue and complete), per kind
    of client, from the CPU per message of each operation (left out when one is missing)."""
    out = {}
    for label, (enq, proc) in LIFECYCLES.items():
        a, b = database_us.get(enq), database_us.get(proc)
        if a is not None and b is not None:
            out[label] = a + b
    return out


def capacity_rows(
    costs: dict[str, float],
    rates: Sequence[int] = RATES,
    pool_cores: Sequence[int] = POOL_CORES,
    utilisation: float = UTILISATION,
) -> list[dict[str, Any]]:
    """The worked examples: for each kind of client and load, the database cores needed and the
    pools of each size that carry it."""
    return [
        {
            "lifecycle": label,
            "rate": rate,
            "cores": cores_needed(rate, cost, utilisation),
            "pools": {n: pools_needed(rate, cost, n, utilisation) for n in pool_cores},
        }
        for label, cost in costs.items()
        for rate in rates
    ]


def _workloads(runs: Sequence[dict[str, Any]]) -> list[str]:
    seen: list[str] = []
    for r in runs:
        seen += [w for w in r if w not in seen]
    return seen


def _mean_idle(phase: dict[str, Any] | list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """One phase's idle cores of each server and cluster: the mean of its measurements (before
    and after its runs)."""
    readings = phase if isinstance(phase, list) else [phase]
    out: dict[str, dict[str, float]] = {"servers": {}, "clusters": {}}
    for kind in out:
        names = {n for r in readings for n in r[kind]}
        out[kind] = {n: sum(r[kind].get(n, 0.0) for r in readings) / len(readings) for n in names}
    return out


def idle_cores(idle: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Each setup's idle (server, database) cores, from the idle measurements of each phase: the
    overhead phase's two servers share one PostgreSQL; the split phase's one server serves
    both setups, and its database is both clusters."""
    out: dict[str, tuple[float, float]] = {}
    if idle.get("overhead"):
        phase = _mean_idle(idle["overhead"])
        database = sum(phase["clusters"].values())
        for system in ("single", "routed"):
            out[system] = (phase["servers"].get(system, 0.0), database)
    if idle.get("split"):
        phase = _mean_idle(idle["split"])
        database = sum(phase["clusters"].values())
        server = sum(phase["servers"].values())
        out["one"] = out["two"] = (server, database)
    return out


LOOKUPS_PER_MESSAGE = {"enqueue_b1": 2, "process_b1": 4}
"""Routed lookups per message (the token's and the queue's, per request): one request per
enqueued message, two (dequeue, complete) per processed one."""


def router_share(router: dict[str, Any], server_us: dict[str, float | None]) -> dict[str, Any]:
    """What the router's measured cost per lookup adds to each workload's server CPU per
    message (``server_us``: the single database's), as a fraction."""
    out = {}
    for workload, lookups in LOOKUPS_PER_MESSAGE.items():
        base = server_us.get(workload)
        if base:
            out[workload] = router["added_ns"] * lookups / 1_000 / base
    return out


def summarise(res: dict[str, Any]) -> dict[str, Any]:
    """The run's figures: the routing overhead (routed against single) and two pools against
    one, per workload; the database's CPU per message of each operation net of its idle CPU
    (on the single database, and on one pool), and what a served pool spends idle; a message's
    life; and the capacity model's worked examples."""
    idle = idle_cores(res.get("idle", {}))
    overhead = {
        w: compare(res.get("overhead", []), w, "single", "routed", idle)
        for w in _workloads(res.get("overhead", []))
    }
    split = {
        w: compare(res.get("split", []), w, "one", "two", idle)
        for w in _workloads(res.get("split", []))
    }
    database_us = {w: c["database_net_us"]["single"] for w, c in overhead.items()}
    database_us |= {w: c["database_net_us"]["one"] for w, c in split.items()}
    costs = lifecycle_costs(database_us)
    split_idle = res.get("idle", {}).get("split")
    pool_idle = _mean_idle(split_idle)["clusters"].get("second") if split_idle else None
    router = res.get("router")
    shares = (
        router_share(router, {w: c["server_us"]["single"] for w, c in overhead.items()})
        if router
        else {}
    )
    return {
        "overhead": overhead,
        "split": split,
        "idle": idle,
        "pool_idle_cores": pool_idle,
        "router_share": shares,
        "database_us": database_us,
        "lifecycle_us": costs,
        "utilisation": UTILISATION,
        "capacity": capacity_rows(costs),
    }
