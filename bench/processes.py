"""Who spent the CPU: the server under test (its workers and their supervisor), the database it
uses (the postmaster and every backend, exited ones included) and the bench's own child
processes (the load generator, pgbench), as snapshots taken around each measurement.
"""

from __future__ import annotations

import os
import resource
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psutil


def _cpu(proc: psutil.Process, *, children_reaped: bool = False) -> float:
    try:
        times = proc.cpu_times()
    except psutil.Error:
        return 0.0
    total = times.user + times.system
    if children_reaped:
        total += times.children_user + times.children_system
    return total


@dataclass
class CpuSnapshot:
    """CPU seconds so far of the server's processes and of PostgreSQL, at ``at``."""

    at: float
    server_workers: dict[int, float]
    server_master: float
    postgres: float
    loadavg: tuple[float, float, float]


class Database(Protocol):
    """What a server under test needs of its database: a :class:`LocalCluster`, or anything
    else that answers the same (``bench/failover/`` serves on a formation)."""

    @property
    def local_sqlalchemy_url(self) -> str: ...

    @property
    def libpq_dsn(self) -> str: ...

    @property
    def data_dir(self) -> Path:
        """Where the postmaster whose CPU is counted keeps its ``postmaster.pid``."""
        ...

    def stop(self, mode: str = "fast") -> None: ...


@dataclass
class Server:
    """The running ``sundial serve`` and the database it uses."""

    cluster: Database
    process: subprocess.Popen[bytes]
    base: str
    token: str
    log: Path
    workers: int
    admin_token: str = ""
    """The server's admin token (``token`` becomes the bench namespace's once it exists)."""

    def worker_processes(self) -> list[psutil.Process]:
        try:
            master = psutil.Process(self.process.pid)
            children = master.children(recursive=True)
        except psutil.Error:
            return []
        # uvicorn's multiprocess supervisor spawns the workers; multiprocessing may also start
        # a resource tracker, which is not a worker (it never imports the app).
        return [c for c in children if "resource_tracker" not in " ".join(_cmdline(c))]

    def postmaster(self) -> psutil.Process | None:
        return postmaster(self.cluster.data_dir)

    def snapshot(self) -> CpuSnapshot:
        workers = {p.pid: _cpu(p) for p in self.worker_processes()}
        master = _cpu(psutil.Process(self.process.pid))
        pg = postgres_cpu(self.cluster.data_dir)
        return CpuSnapshot(time.monotonic(), workers, master, pg, os.getloadavg())

    def rss_mb(self) -> dict[int, float]:
        out = {}
        for proc in self.worker_processes():
            try:
                out[proc.pid] = proc.memory_info().rss / 2**20
            except psutil.Error:
                continue
        return out


def postmaster(data_dir: Path) -> psutil.Process | None:
    """The postmaster running on ``data_dir`` (from its ``postmaster.pid``), or None."""
    try:
        return psutil.Process(int((data_dir / "postmaster.pid").read_text().split()[0]))
    except (OSError, ValueError, psutil.Error):
        return None


def postgres_cpu(data_dir: Path) -> float:
    """CPU seconds so far of the PostgreSQL on ``data_dir``: the postmaster and every backend,
    exited ones included (0 when it is not running)."""
    master = postmaster(data_dir)
    if master is None:
        return 0.0
    # Backends that exited were reaped by the postmaster: their CPU is in its children times;
    # live backends are counted one by one.
    total = _cpu(master, children_reaped=True)
    try:
        children = master.children()
    except psutil.Error:
        children = []
    return total + sum(_cpu(child) for child in children)


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def cpu_delta(before: CpuSnapshot, after: CpuSnapshot) -> dict[str, Any]:
    """CPU seconds of the server (per worker and in all) and of PostgreSQL between two
    snapshots, with the wall time and the load averages."""
    wall = after.at - before.at
    workers = {
        str(pid): round(after.server_workers[pid] - before.server_workers.get(pid, 0.0), 2)
        for pid in after.server_workers
    }
    return {
        "wall_s": round(wall, 2),
        "server_workers_cpu_s": workers,
        "server_cpu_s": round(
            sum(workers.values()) + after.server_master - before.server_master, 2
        ),
        "postgres_cpu_s": round(after.postgres - before.postgres, 2),
        "loadavg_before": [round(x, 2) for x in before.loadavg],
        "loadavg_after": [round(x, 2) for x in after.loadavg],
    }


def children_cpu() -> float:
    """CPU seconds of this process's children that have been waited for (the load generator,
    pgbench): the difference around a run is that run's."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
