"""The SQS bench's figures, from the measurements' raw results (no I/O): each phase's rate and the
CPU each process spent per message, the medians over runs, and the per-run ratios of the SQS door
against the REST API (each pair measured back to back) with their spread."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bench.stats import median

SQS = "sqs"
REST = "rest"
BEST = "rest_b100"
"""The REST API at its own best batch size, for reference (not part of the pair)."""
DOORS = (SQS, REST, BEST)
PHASES = ("produce", "consume")
BOTH = "produce + consume"
"""A message's whole trip: sent, then received and deleted (a rate of 1 / (1/p + 1/c))."""
FIGURES = (
    "rate",
    "server_us",
    "database_us",
    "generator_us",
    "total_us",
    "others_cores",
    "busy_cores",
    "p50_ms",
    "p99_ms",
)
RATIOS = ("rate", "server_us", "database_us", "generator_us", "total_us")
"""The figures whose SQS/REST ratio is reported."""
ADDITIVE = ("server_us", "database_us", "generator_us", "total_us")
"""CPU per message: a message's trip costs its produce's and its consume's."""


def order(run: int) -> tuple[str, ...]:
    """Which door goes first in run ``run``: SQS and REST alternate (each pair back to back),
    the REST API's best batch size last."""
    pair = (SQS, REST) if run % 2 == 0 else (REST, SQS)
    return (*pair, BEST)


def per_message_us(cpu_s: float | None, messages: float) -> float | None:
    """Microseconds of CPU per message; None without messages."""
    if cpu_s is None or not messages:
        return None
    return cpu_s / messages * 1e6


def figures(result: dict[str, Any]) -> dict[str, float | None]:
    """One phase of one door: messages per second, the CPU each process spent per message (the
    server's workers and supervisor, PostgreSQL, the generator's clients) and in all, the cores
    the machine's other processes kept busy meanwhile and the cores busy in all, and the
    request latency (for consume, a receive and its delete)."""
    cpu, n = result["cpu"], result["messages"]
    ours = cpu["server_cpu_s"] + cpu["postgres_cpu_s"] + cpu["generator_cpu_s"]
    busy, wall = cpu.get("machine_busy_s"), cpu.get("wall_s") or 0.0
    latency = result.get("latency_ms") or {}
    return {
        "rate": result["rate"],
        "server_us": per_message_us(cpu["server_cpu_s"], n),
        "database_us": per_message_us(cpu["postgres_cpu_s"], n),
        "generator_us": per_message_us(cpu["generator_cpu_s"], n),
        "total_us": per_message_us(ours, n),
        "others_cores": max(0.0, busy - ours) / wall if busy is not None and wall else None,
        "busy_cores": busy / wall if busy is not None and wall else None,
        "p50_ms": latency.get("p50"),
        "p99_ms": latency.get("p99"),
    }


def trip(produced: dict[str, float | None], consumed: dict[str, float | None]) -> dict[str, Any]:
    """A message's whole trip from its produce's and its consume's figures: the rate of doing
    both in turn, and the CPU of both."""
    out: dict[str, float | None] = dict.fromkeys(FIGURES)
    p, c = produced["rate"], consumed["rate"]
    out["rate"] = 1 / (1 / p + 1 / c) if p and c else None
    for key in ADDITIVE:
        a, b = produced[key], consumed[key]
        out[key] = a + b if a is not None and b is not None else None
    return out


def spread(values: Iterable[float | None]) -> dict[str, Any]:
    """Median, min, max and the values themselves (Nones left out)."""
    clean = [v for v in values if v is not None]
    return {
        "median": median(clean),
        "min": min(clean) if clean else None,
        "max": max(clean) if clean else None,
        "runs": clean,
    }


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``; None when either is missing or ``b`` is 0."""
    return a / b if a is not None and b else None


def run_figures(run: dict[str, Any]) -> dict[str, dict[str, dict[str, float | None]]]:
    """One run's figures: door → phase (and the whole trip) → figures."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for door, phases in run.items():
        if door not in DOORS:
            continue
        figs = {phase: figures(phases[phase]) for phase in PHASES if phase in phases}
        if all(phase in figs for phase in PHASES):
            figs[BOTH] = trip(figs["produce"], figs["consume"])
        out[door] = figs
    return out


def summarise(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per phase (and the whole trip): each door's medians over the runs; the SQS door against
    the REST API at the same batch size, each figure's ratio taken run by run, with its spread;
    and the SQS door's rate against the REST API's at its best batch size."""
    per_run = [run_figures(r) for r in runs]
    out: dict[str, Any] = {"n": len(per_run), "phases": {}}
    for phase in (*PHASES, BOTH):
        doors = {}
        for door in DOORS:
            figs = [r[door][phase] for r in per_run if phase in r.get(door, {})]
            if figs:
                doors[door] = {key: median(f[key] for f in figs) for key in FIGURES}
        pairs = [
            (r[SQS][phase], r[REST][phase])
            for r in per_run
            if phase in r.get(SQS, {}) and phase in r.get(REST, {})
        ]
        best = [
            ratio(r[SQS][phase]["rate"], r[BEST][phase]["rate"])
            for r in per_run
            if phase in r.get(SQS, {}) and phase in r.get(BEST, {})
        ]
        out["phases"][phase] = {
            "doors": doors,
            "sqs_rest": {key: spread(ratio(s[key], r[key]) for s, r in pairs) for key in RATIOS},
            "sqs_best_rate": spread(best),
        }
    return out
