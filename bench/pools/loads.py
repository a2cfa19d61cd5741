"""Load generators run side by side, one per namespace, with the CPU of every process counted
around them: the server's workers, each PostgreSQL (postmaster and every backend, exited ones
included) and the generators themselves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import psutil

from app.embedded import LocalCluster
from bench.harness import ROOT
from bench.pools.tenants import Tenant
from bench.processes import Server, children_cpu, postgres_cpu

STARTUP_S = 1.0
"""Head start given to the generators before their common window's warm-up begins (a
generator starts sending at once; the window is what they agree on)."""
HANDLED = {"enqueue": "enqueued_total", "process": "completed_total"}
"""The result field that counts every message a run handled, warm-up and tail included."""


def _machine_cpu() -> tuple[float, float]:
    """CPU seconds so far of the whole machine: busy (every process's, ours and others'), and
    waiting for I/O."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(
        t, "softirq", 0.0
    ) + getattr(t, "steal", 0.0), getattr(t, "iowait", 0.0)


def _server_cpu(server: Server) -> float:
    snap = server.snapshot()
    return sum(snap.server_workers.values()) + snap.server_master


def run_loads(
    server: Server,
    loads: Sequence[tuple[Tenant, dict[str, Any]]],
    clusters: dict[str, LocalCluster],
    *,
    taskset: str | None = None,
    timeout: float = 900,
) -> dict[str, Any]:
    """Run one load generator per ``(tenant, spec)`` at once, their windows aligned; their
    summed rate, the messages they handled, and the CPU seconds of the server, of each
    PostgreSQL in ``clusters`` (by name) and of the generators over the whole run (unrounded:
    the ratios are made of them)."""
    start_at = time.monotonic() + STARTUP_S
    specs = [
        {
            "base": server.base,
            "token": tenant.token,
            "dsn": tenant.home.libpq_dsn,
            "start_at": start_at,
            **spec,
        }
        for tenant, spec in loads
    ]
    argv = [sys.executable, "-m", "bench.loadgen"]
    if taskset:
        argv = ["taskset", "-c", taskset, *argv]
    t0 = time.monotonic()
    load_before = os.getloadavg()
    machine_before = _machine_cpu()
    server_before = _server_cpu(server)
    pg_before = {name: postgres_cpu(c.data_dir) for name, c in clusters.items()}
    children_before = children_cpu()
    procs = []
    for spec in specs:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
        )
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(spec).encode())
        proc.stdin.close()
        procs.append(proc)
    outputs = []
    for proc, spec in zip(procs, specs, strict=True):
        assert proc.stdout is not None
        assert proc.stderr is not None
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            raise
        out, err = proc.stdout.read(), proc.stderr.read()
        if proc.returncode != 0:
            raise RuntimeError(f"loadgen failed ({spec['mode']}):\n{err.decode()[-3000:]}")
        outputs.append(json.loads(out))
    server_after = _server_cpu(server)
    pg_after = {name: postgres_cpu(c.data_dir) for name, c in clusters.items()}
    machine_after = _machine_cpu()
    wall = time.monotonic() - t0
    mode = specs[0]["mode"]
    return {
        "rate": sum(r["rate"] for r in outputs),
        "messages": sum(r["messages"] for r in outputs),
        "handled": sum(r[HANDLED[mode]] for r in outputs),
        "errors": sum(r["errors"] for r in outputs),
        "ran_out": any(r.get("ran_out") for r in outputs),
        "tenants": {tenant.name: r for (tenant, _), r in zip(loads, outputs, strict=True)},
        "cpu": {
            "wall_s": wall,
            "server_cpu_s": server_after - server_before,
            "postgres_cpu_s": {name: pg_after[name] - pg_before[name] for name in clusters},
            "loadgen_cpu_s": children_cpu() - children_before,
            "machine_busy_s": machine_after[0] - machine_before[0],
            "machine_iowait_s": machine_after[1] - machine_before[1],
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        },
    }


def idle_cpu(
    servers: dict[str, Server], clusters: dict[str, LocalCluster], seconds: float
) -> dict[str, Any]:
    """Cores each server and each PostgreSQL keeps busy with nothing to do (schedulers, leader
    renewals, listeners, PostgreSQL's background writers), over ``seconds`` of idleness."""
    t0 = time.monotonic()
    server_before = {name: _server_cpu(s) for name, s in servers.items()}
    pg_before = {name: postgres_cpu(c.data_dir) for name, c in clusters.items()}
    time.sleep(seconds)
    wall = time.monotonic() - t0
    return {
        "wall_s": wall,
        "servers": {n: (_server_cpu(s) - server_before[n]) / wall for n, s in servers.items()},
        "clusters": {
            n: (postgres_cpu(c.data_dir) - pg_before[n]) / wall for n, c in clusters.items()
        },
    }


def run_one(server: Server, tenant: Tenant, spec: dict[str, Any], timeout: float = 900) -> Any:
    """One load generator, uncounted (draining what a measurement left)."""
    spec = {"base": server.base, "token": tenant.token, "dsn": tenant.home.libpq_dsn, **spec}
    proc = subprocess.run(
        [sys.executable, "-m", "bench.loadgen"],
        input=json.dumps(spec).encode(),
        capture_output=True,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"loadgen failed ({spec['mode']}):\n{proc.stderr.decode()[-3000:]}")
    return json.loads(proc.stdout)
