"""Sundial on a replicated database (issue #15), in one run: what synchronous replication costs
in throughput against a single node, and how long writes stop during a planned switchover and
after the sudden loss of the primary. bench/README.md ("Failover") says how to read it.

``python -m bench --only failover [--quick | --full]``, or ``python -m bench.failover``.

Two real ``sundial serve`` processes run side by side for the whole run: one on a single
embedded PostgreSQL (:class:`app.embedded.LocalCluster`), one on a pg_auto_failover formation
(:class:`app.embedded.formation.Formation`: a monitor, a primary, its synchronous standby). Both
reach their database over TCP loopback (the formation's URL names its nodes by host and port),
so the only difference measured is replication. The load generator is the suite's
(``bench.loadgen``).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import os
import platform
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp
import psutil
import psycopg

from app.embedded import LocalCluster
from app.embedded.formation import Formation, NodeState
from bench.harness import BENCH, Database, Environment, median

QUICK: dict[str, Any] = {
    "mode": "quick",
    "runs": 3,
    "warmup": 0.5,
    "duration": 2.0,
    "switchovers": 2,
    "kills": 1,
}
FULL: dict[str, Any] = {
    "mode": "full",
    "runs": 5,
    "warmup": 2.0,
    "duration": 10.0,
    "switchovers": 5,
    "kills": 3,
}
CLIENTS = 8
"""Concurrent clients of each throughput measurement, as the suite's enqueue/process rows."""
RATE_GUESS = 1_000
"""msg/s guessed for sizing the first processing backlog (later ones use the measured rate)."""

PROBE_PAUSE = 0.01
"""Seconds between two commits of the database-alone probe (:class:`SqlProbe`)."""
PRODUCERS = 4
"""Concurrent requesters of the steady producer during the fault injection."""
REQUEST_TIMEOUT = 1.0
"""Seconds a producer's request may take; one a failover left hanging is abandoned and retried."""
RETRY_PAUSE = 0.02
"""Seconds between a failed request and its retry. Deliberately not the server's Retry-After:
the gap then measures the server's recovery, not a client's back-off."""
STEADY_GAP = 0.5
"""The service is steady while 2xx answers come less than this many seconds apart..."""
STEADY_SPAN = 2.0
"""...for this many seconds: required before each fault and, after it, to call it over."""
FAILOVER_TIMEOUT = 60.0
REJOIN_TIMEOUT = 180.0
TARGETS = {"switchover": 2.0, "kill": 15.0}
"""The issue's write-outage targets, seconds: planned switchover, unplanned loss of the primary."""
LABELS = {"switchover": "planned switchover", "kill": "unplanned: primary SIGKILLed"}
SYSTEMS = ("single", "formation")


# --- the two databases ---------------------------------------------------------------------------


class TcpCluster(LocalCluster):
    """An embedded cluster whose server is given the TCP URL rather than the unix socket, as the
    formation's is: the comparison then measures replication, not the transport."""

    @property
    def local_sqlalchemy_url(self) -> str:
        return self.sqlalchemy_url


class FormationDatabase:
    """A formation as :class:`bench.harness.Database`: the server's URL, a libpq DSN for the
    harness's own queries, the data directory whose postmaster's CPU it counts (the primary's),
    and ``stop`` (the formation is stopped by whoever created it)."""

    def __init__(self, formation: Formation) -> None:
        self.formation = formation

    @property
    def local_sqlalchemy_url(self) -> str:
        return self.formation.sqlalchemy_url

    @property
    def libpq_dsn(self) -> str:
        return self.formation.libpq_dsn

    @property
    def data_dir(self) -> Path:
        primary = self.formation.primary()
        return self.formation.data_dir(primary.name if primary else "node1")

    def stop(self, mode: str = "fast") -> None:
        del mode


def healthy(nodes: list[NodeState]) -> bool:
    """A primary with its synchronous standby, both where the monitor wants them."""
    return sorted(node.reported for node in nodes if node.settled) == ["primary", "secondary"]


def formation_cpu(formation: Formation) -> dict[str, float]:
    """CPU seconds so far of each keeper's process tree (pg_autoctl, its PostgreSQL and every
    backend, exited ones included), by node name."""
    wanted = {str(formation.data_dir(name)): name for name in ("monitor", "node1", "node2")}
    totals: dict[str, float] = {}
    for proc in psutil.process_iter(["cmdline"]):
        argv = proc.info["cmdline"] or []
        if len(argv) >= 4 and argv[1:3] == ["run", "--pgdata"] and argv[3] in wanted:
            totals[wanted[argv[3]]] = _tree_cpu(proc)
    return totals


def _tree_cpu(root: psutil.Process) -> float:
    total = 0.0
    with contextlib.suppress(psutil.Error):
        for proc in (root, *root.children(recursive=True)):
            with contextlib.suppress(psutil.Error):
                t = proc.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
    return total


# --- throughput: single node against the formation, alternately ----------------------------------


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
    _check(
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
    from bench.suite import prefill  # the suite imports this module lazily, never at the top

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
    _check(
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


# --- write outage: a steady producer while the formation fails over ------------------------------


class Producer(threading.Thread):
    """Enqueues one message per request, from ``PRODUCERS`` concurrent requesters, until
    stopped. Each message has an id of its own, resent as is until acknowledged, so a retry of
    a request whose answer was lost cannot store it twice. Records when every 2xx answer came
    (``time.monotonic``) and every failure."""

    def __init__(self, base: str, token: str, queue_path: str) -> None:
        super().__init__(name="producer", daemon=True)
        self.base = base
        self.token = token
        self.path = f"{queue_path}/messages"
        self.stopping = threading.Event()
        self.ok_times: list[float] = []
        self.acknowledged: list[str] = []
        self.failures: list[tuple[float, str]] = []
        self.steady_since = float("inf")

    def run(self) -> None:
        asyncio.run(self._produce())

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=REQUEST_TIMEOUT + 5)

    async def _produce(self) -> None:
        async with aiohttp.ClientSession(
            base_url=self.base,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
        ) as session:
            await asyncio.gather(*(self._requester(session, n) for n in range(PRODUCERS)))

    async def _requester(self, session: aiohttp.ClientSession, n: int) -> None:
        seq = 0
        while not self.stopping.is_set():
            message_id = f"out-{n}-{seq}"
            body = {"messages": [{"id": message_id, "payload": {"n": n, "seq": seq}}]}
            try:
                async with session.post(self.path, json=body) as answer:
                    await answer.read()
                outcome = str(answer.status)
            except (aiohttp.ClientError, TimeoutError) as error:
                outcome = type(error).__name__
            now = time.monotonic()
            if outcome.startswith("2"):
                if now - (self.ok_times[-1] if self.ok_times else -1e9) > STEADY_GAP:
                    self.steady_since = now
                self.ok_times.append(now)
                self.acknowledged.append(message_id)
                seq += 1
            else:
                self.failures.append((now, outcome))
                await asyncio.sleep(RETRY_PAUSE)

    def wait_steady(self, after: float, timeout: float) -> float:
        """Wait until 2xx answers have come less than ``STEADY_GAP`` apart for ``STEADY_SPAN``
        seconds since ``after`` (or before it); when that steady stretch began.

        Raises:
            TimeoutError: not within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            now = time.monotonic()
            since = max(self.steady_since, after)
            last = self.ok_times[-1] if self.ok_times else -1e9
            if now - since >= STEADY_SPAN and now - last < STEADY_GAP:
                return since
            if not self.is_alive():
                raise RuntimeError("the producer stopped")
            if now > deadline:
                raise TimeoutError(
                    f"writes not steady within {timeout:.0f} s; last failures {self.failures[-5:]}"
                )
            time.sleep(0.05)

    def failures_between(self, start: float, end: float) -> dict[str, int]:
        return dict(Counter(what for t, what in self.failures if start <= t <= end))


class SqlProbe(threading.Thread):
    """The database alone, for comparison: one connection through the formation's multi-host
    DSN (as the server's) commits a write (``SELECT txid_current()``, which assigns a
    transaction id, so its commit waits for the standby) every ``PROBE_PAUSE`` seconds,
    reconnecting after any error. Records when each commit returned."""

    def __init__(self, dsn: str) -> None:
        super().__init__(name="sql-probe", daemon=True)
        self.dsn = dsn
        self.stopping = threading.Event()
        self.ok_times: list[float] = []

    def run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        while not self.stopping.is_set():
            try:
                if conn is None:
                    conn = psycopg.connect(self.dsn, connect_timeout=2, autocommit=True)
                conn.execute("SELECT txid_current()")
                self.ok_times.append(time.monotonic())
                pause = PROBE_PAUSE
            except psycopg.Error:
                if conn is not None:
                    conn.close()
                conn = None
                pause = RETRY_PAUSE
            self.stopping.wait(pause)
        if conn is not None:
            conn.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=10)


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest interval between consecutive 2xx answers, from the last one before
    ``start`` to the first one after ``end``."""
    ordered = sorted(times)
    first = max(bisect.bisect_right(ordered, start) - 1, 0)
    last = bisect.bisect_left(ordered, end) + 1
    return max((b - a for a, b in pairwise(ordered[first:last])), default=float("nan"))


def inject(
    kind: str,
    formation: Formation,
    producer: Producer,
    probe: SqlProbe,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """One fault on a healthy formation under steady writes; what the writers saw."""
    formation.wait_until(healthy, REJOIN_TIMEOUT, "a primary and a caught-up standby")
    producer.wait_steady(time.monotonic(), FAILOVER_TIMEOUT)
    primary = formation.primary()
    assert primary is not None
    started = time.monotonic()
    if kind == "switchover":
        formation.switchover(timeout=FAILOVER_TIMEOUT)
    else:
        formation.kill_node(primary.name)
        formation.wait_until(
            lambda nodes: any(n.writable and n.name != primary.name for n in nodes),
            FAILOVER_TIMEOUT,
            "a new primary",
        )
    formation_done = time.monotonic()
    steady = producer.wait_steady(formation_done, FAILOVER_TIMEOUT)
    new_primary = formation.primary()
    event: dict[str, Any] = {
        "kind": kind,
        "from": primary.name,
        "to": new_primary.name if new_primary else None,
        "outage_s": longest_gap(producer.ok_times, started, steady),
        "database_outage_s": longest_gap(probe.ok_times, started, steady),
        "formation_s": formation_done - started,
        "writes_steady_after_s": steady - started,
        "failures": producer.failures_between(started, steady),
    }
    if kind == "kill":
        restarted = time.monotonic()
        formation.start_node(primary.name)
        formation.wait_until(healthy, REJOIN_TIMEOUT, f"{primary.name} back as the standby")
        rejoined = time.monotonic()
        steady = producer.wait_steady(rejoined, FAILOVER_TIMEOUT)
        event["rejoin_s"] = rejoined - restarted
        event["rejoin_gap_s"] = longest_gap(producer.ok_times, restarted, steady)
    log(
        f"  {kind}: {event['from']} -> {event['to']}, write outage {event['outage_s']:.2f} s"
        f" (database alone {event['database_outage_s']:.2f} s; the formation took"
        f" {event['formation_s']:.1f} s), failed requests "
        f"{event['failures'] or 'none'}"
        + (
            f"; rejoined in {event['rejoin_s']:.1f} s, longest gap meanwhile "
            f"{event['rejoin_gap_s']:.2f} s"
            if kind == "kill"
            else ""
        )
    )
    return event


def measure_outages(
    env: Environment,
    formation: Formation,
    size: dict[str, Any],
    checks: list[dict[str, Any]],
    log: Callable[[str], None],
    outage: dict[str, Any],
) -> None:
    """Every fault in turn; each event goes into ``outage["events"]`` as soon as it is measured,
    so a run that fails later still reports it."""
    assert env.server is not None
    queue_id = env.create_queue("outage")
    producer = Producer(env.server.base, env.server.token, env.queue_path("outage"))
    probe = SqlProbe(formation.libpq_dsn)
    producer.start()
    probe.start()
    faults = ["switchover"] * size["switchovers"] + ["kill"] * size["kills"]
    events: list[dict[str, Any]] = outage.setdefault("events", [])
    try:
        for number, kind in enumerate(faults, 1):
            log(f"fault {number}/{len(faults)}: {LABELS[kind]}")
            events.append(inject(kind, formation, producer, probe, log))
    finally:
        producer.stop()
        probe.stop()
        outage["acknowledged"] = len(producer.acknowledged)
    formation.wait_writable(FAILOVER_TIMEOUT)
    with env.connect() as conn:
        rows = conn.execute("SELECT id FROM messages WHERE queue_id = %s", (queue_id,)).fetchall()
    stored = {row[0] for row in rows}
    lost = set(producer.acknowledged) - stored
    _check(
        checks,
        "outage: every acknowledged enqueue is stored after the failovers",
        not lost,
        {"acknowledged": len(set(producer.acknowledged)), "lost": sorted(lost)[:20]},
    )
    answers = Counter(what for _, what in producer.failures)
    unexpected = {what: n for what, n in answers.items() if what[:1].isdigit() and what != "503"}
    _check(
        checks,
        "outage: the server answered only 2xx or 503 (never a 500)",
        not unexpected,
        {"unexpected": unexpected},
    )
    outage["failures"] = dict(answers)
    env.drop_queue(queue_id)


# --- report --------------------------------------------------------------------------------------


def _check(checks: list[dict[str, Any]], label: str, ok: bool, detail: dict[str, Any]) -> None:
    checks.append({"check": label, "ok": bool(ok), **detail})
    if not ok:
        print(f"  !! correctness check FAILED: {label}: {detail}", flush=True)


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


def _machine(envs: dict[str, Environment], workers: int) -> dict[str, Any]:
    with envs["single"].connect() as conn:
        version = conn.execute("SHOW server_version").fetchone()
    with envs["formation"].connect() as conn:
        settings = conn.execute(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name IN ('fsync',"
            " 'synchronous_commit',"
            " 'synchronous_standby_names', 'full_page_writes', 'shared_buffers') ORDER BY name"
        ).fetchall()
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "postgresql": version[0] if version else None,
        "formation_settings": ", ".join(f"{k}={v}" for k, v in settings),
        "server_workers": workers,
    }


# --- the run -------------------------------------------------------------------------------------


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM interrupts the run as Ctrl-C does, so that it cleans up on either."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _uninterrupted() -> Iterator[None]:
    """Cleaning up is not cut short by a second Ctrl-C: the formation's keepers are detached
    and would otherwise outlive the run."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(
    *, full: bool = False, runs: int | None = None, workers: int = 2, out: Path, keep: bool = False
) -> int:
    """The whole failover bench; 1 if a correctness check failed (targets are only reported)."""
    size = dict(FULL if full else QUICK)
    runs = runs or size["runs"]
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {msg}", flush=True)

    root = Path(tempfile.mkdtemp(prefix="sundial-bench-failover-"))
    formation = Formation(root / "formation")
    envs = {
        system: Environment(workers=workers, keep=keep, root=root / f"server-{system}")
        for system in SYSTEMS
    }
    checks: list[dict[str, Any]] = []
    res: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": size["mode"],
        "sizes": {**size, "runs": runs},
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
        "checks": checks,
        "throughput": [],
    }
    try:
        with _terminate_as_interrupt():
            log(f"starting a single PostgreSQL and a formation in {root}")
            for env in envs.values():
                env.root.mkdir(parents=True)
            single = TcpCluster(envs["single"].root / "postgres")
            single.ensure_initialized()
            single.start()
            envs["single"].cluster = single
            formation.up()
            databases: dict[str, Database] = {
                "single": single,
                "formation": FormationDatabase(formation),
            }
            for system, env in envs.items():
                log(f"starting `sundial serve` ({workers} workers) on the {system}")
                env.server = env.serve(databases[system])
            res["machine"] = _machine(envs, workers)
            primary = formation.primary()
            standby = next(n.name for n in formation.nodes() if n.reported == "secondary")
            res["roles"] = {"primary": primary.name if primary else "", "standby": standby}
            rates: dict[str, float] = {}
            for run_no in range(runs):
                log(f"run {run_no + 1}/{runs}: enqueue b1 and dequeue+complete b1, both systems")
                pair = measure_pair(envs, formation, size, run_no, rates, checks)
                res["throughput"].append(pair)
                log(
                    "  "
                    + "; ".join(
                        f"{w} " + ", ".join(f"{s} {pair[w][s]['rate']:,.0f}/s" for s in SYSTEMS)
                        for w in pair
                    )
                )
            log(
                f"write outage: {size['switchovers']} switchover(s), "
                f"{size['kills']} kill(s) of the primary"
            )
            res["outage"] = {}
            measure_outages(envs["formation"], formation, size, checks, log, res["outage"])
            serve_log = envs["formation"].root / "serve.log"
            tracebacks = serve_log.read_text(errors="replace").count("Traceback")
            _check(
                checks,
                "the formation's server logged no traceback",
                tracebacks == 0,
                {"tracebacks": tracebacks, "log": str(serve_log)},
            )
    except KeyboardInterrupt:
        res["error"] = "interrupted"
        raise
    except Exception as error:
        res["error"] = f"{type(error).__name__}: {error}"
        raise
    finally:
        with _uninterrupted():
            log("stopping the servers, the single PostgreSQL and the formation")
            for env in envs.values():
                with contextlib.suppress(Exception):
                    env.stop()
            with contextlib.suppress(Exception):
                if keep:
                    formation.down()
                else:
                    formation.destroy()
            if not keep:
                shutil.rmtree(root, ignore_errors=True)
            res["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
            res["elapsed_s"] = round(time.monotonic() - started, 1)
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            path = out / f"results-failover-{size['mode']}-{stamp}.json"
            path.write_text(json.dumps(res, indent=1, default=str))
            report = render_report(res)
            (out / f"report-failover-{size['mode']}.md").write_text(report)
            print()
            print(report)
            log(f"results in {path}" + (f"; kept {root}" if keep else ""))
    return 1 if any(not c["ok"] for c in checks) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="short runs, few faults (default)")
    mode.add_argument("--full", action="store_true", help="longer runs, more faults")
    parser.add_argument("--runs", type=int, help="alternating throughput runs (medians)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes per server")
    parser.add_argument("--out", type=Path, default=BENCH / "out", help="where results go")
    parser.add_argument("--keep", action="store_true", help="keep the databases and logs")
    args = parser.parse_args(argv)
    try:
        return run(
            full=args.full, runs=args.runs, workers=args.workers, out=args.out, keep=args.keep
        )
    except KeyboardInterrupt:
        return 130  # cleaned up and reported by run()


if __name__ == "__main__":
    raise SystemExit(main())
