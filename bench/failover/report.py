"""The failover bench's report: throughput and CPU of both systems, the write outage of each
fault against its target, the machine and the correctness checks."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from bench.failover.databases import SYSTEMS
from bench.failover.outage import LABELS, TARGETS
from bench.failover.writers import PRODUCERS, REQUEST_TIMEOUT, RETRY_PAUSE
from bench.harness import Environment
from bench.machine import cpu_model
from bench.stats import median


def _num(x: float | None, digits: int = 2) -> str:
    if x is None or x != x:  # None or NaN
        return "—"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.{digits}f}"


def _lat(runs: list[dict[str, Any]], op: str) -> str:
    p50 = median([r["latency_ms"][op]["p50"] for r in runs])
    p99 = median([r["latency_ms"][op]["p99"] for r in runs])
    return f"{_num(p50)} / {_num(p99)}"


def _throughput_lines(res: dict[str, Any]) -> list[str]:
    throughput = res["throughput"]
    lines = [
        "",
        "Throughput, 8 clients, 1 message per request (msg/s):",
        "",
        "| workload | single node | formation (sync standby) | formation/single"
        " | p50/p99 ms single | p50/p99 ms formation |",
        "|---|---|---|---|---|---|",
    ]
    for workload, label, op in (
        ("enqueue_b1", "enqueue", "enqueue"),
        ("process_b1", "dequeue + complete", "dequeue"),
    ):
        runs = {s: [r[workload][s] for r in throughput if workload in r] for s in SYSTEMS}
        if not runs["single"]:
            continue
        ratios = [
            r[workload]["formation"]["rate"] / r[workload]["single"]["rate"]
            for r in throughput
            if r[workload]["single"]["rate"]
        ]
        lines.append(
            f"| {label} | {_num(median([x['rate'] for x in runs['single']]))} "
            f"| {_num(median([x['rate'] for x in runs['formation']]))} "
            f"| {_num(median(ratios))} | {_lat(runs['single'], op)} "
            f"| {_lat(runs['formation'], op)} |"
        )
    per_run = "; ".join(
        f"{label} "
        + ", ".join(
            f"{_num(r[workload]['single']['rate'])}/{_num(r[workload]['formation']['rate'])}"
            for r in throughput
        )
        for workload, label in (("enqueue_b1", "enqueue"), ("process_b1", "dequeue + complete"))
    )
    lines += [
        "",
        f"Per run, single/formation msg/s (odd runs measure the single node first, even runs"
        f" the formation): {per_run}.",
        "",
        "CPU seconds per measurement (median over runs): server workers, the database (single:"
        " its PostgreSQL; formation: each keeper with its PostgreSQL), the load generator.",
        "",
        "| workload | system | wall s | server | database | of which primary / standby /"
        " monitor | generator |",
        "|---|---|---|---|---|---|---|",
    ]
    for workload in ("enqueue_b1", "process_b1"):
        for system in SYSTEMS:
            cpus = [r[workload][system]["cpu"] for r in throughput if workload in r]
            if not cpus:
                continue
            parts = ""
            if system == "formation":
                database = [sum(c["formation_cpu_s"].values()) for c in cpus]
                roles = res.get("roles", {})
                parts = " / ".join(
                    _num(
                        median([c["formation_cpu_s"].get(roles.get(role, role), 0.0) for c in cpus])
                    )
                    for role in ("primary", "standby", "monitor")
                )
            else:
                database = [c["postgres_cpu_s"] for c in cpus]
            lines.append(
                f"| {workload} | {system} | {_num(median([c['wall_s'] for c in cpus]))} "
                f"| {_num(median([c['server_cpu_s'] for c in cpus]))} "
                f"| {_num(median(database))} | {parts or '—'} "
                f"| {_num(median([c['loadgen_cpu_s'] for c in cpus]))} |"
            )
    return lines


def render_report(res: dict[str, Any]) -> str:
    m = res.get("machine", {})
    throughput = res.get("throughput", [])
    lines = [
        f"## Sundial failover bench — {res['mode']} mode, {len(throughput)} alternating run(s)"
        f" (medians), {res.get('elapsed_s')} s",
    ]
    if throughput:
        lines += _throughput_lines(res)
    outage = res.get("outage")
    if outage and outage.get("events"):
        lines += [
            "",
            f"Write outage: the longest gap between consecutive 2xx answers to a steady producer"
            f" ({PRODUCERS} requesters, 1 message per request, {REQUEST_TIMEOUT:g} s timeout,"
            f" retry after {RETRY_PAUSE * 1000:.0f} ms):",
            "",
            "| fault | n | outage median s | outage max s | target | met? "
            "| database alone, median / max s | formation's own time, median s"
            " | failed requests |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for kind in ("switchover", "kill"):
            events = [e for e in outage["events"] if e["kind"] == kind]
            if not events:
                continue
            gaps = [e["outage_s"] for e in events]
            failed: Counter[str] = Counter()
            for e in events:
                failed.update(e["failures"])
            worst = max(gaps)
            alone = [e["database_outage_s"] for e in events]
            lines.append(
                f"| {LABELS[kind]} | {len(events)} | {_num(median(gaps))} | {_num(worst)} "
                f"| <= {TARGETS[kind]:g} s | {'yes' if worst <= TARGETS[kind] else 'NO'} "
                f"| {_num(median(alone))} / {_num(max(alone))} "
                f"| {_num(median([e['formation_s'] for e in events]), 1)} "
                f"| {', '.join(f'{k} x{v}' for k, v in sorted(failed.items())) or 'none'} |"
            )
        rejoins = [e for e in outage["events"] if "rejoin_s" in e]
        if rejoins:
            lines += [
                "",
                "After each kill the node was started again and rejoined as the standby in "
                + ", ".join(f"{e['rejoin_s']:.1f} s" for e in rejoins)
                + "; the longest gap between 2xx answers meanwhile: "
                + ", ".join(f"{e['rejoin_gap_s']:.2f} s" for e in rejoins)
                + ".",
            ]
        lines += [
            "",
            "Faults in order: "
            + "; ".join(
                f"{e['kind']} {e['from']}→{e['to']} {e['outage_s']:.2f} s" for e in outage["events"]
            )
            + f". {outage.get('acknowledged', 0):,} enqueues acknowledged in all.",
        ]
    lines += [
        "",
        f"Machine: {m.get('cores')} cores ({m.get('cpu')}), PostgreSQL {m.get('postgresql')}, "
        f"{m.get('server_workers')} server workers per server, both servers over TCP loopback. "
        f"Formation primary: {m.get('formation_settings')}.",
        f"Load average before/after: {res.get('loadavg_before')} → {res.get('loadavg_after')}.",
    ]
    checks = res.get("checks", [])
    bad = [c for c in checks if not c["ok"]]
    lines += ["", f"Correctness checks: {len(checks) - len(bad)}/{len(checks)} passed."]
    lines += [f"- FAILED: {c['check']}: {c}" for c in bad]
    if res.get("error"):
        lines += ["", f"The run stopped early: {res['error']}"]
    return "\n".join(lines) + "\n"


def machine(envs: dict[str, Environment], workers: int) -> dict[str, Any]:
    """Cores, CPU, PostgreSQL's version and the formation primary's durability settings."""
    with envs["single"].connect() as conn:
        version = conn.execute("SHOW server_version").fetchone()
    with envs["formation"].connect() as conn:
        settings = conn.execute(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name IN ('fsync',"
            " 'synchronous_commit',"
            " 'synchronous_standby_names', 'full_page_writes', 'shared_buffers') ORDER BY name"
        ).fetchall()
    return {
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "postgresql": version[0] if version else None,
        "formation_settings": ", ".join(f"{k}={v}" for k, v in settings),
        "server_workers": workers,
    }
