"""The two databases the failover bench serves on, as :class:`bench.processes.Database`: a single
embedded PostgreSQL reached over TCP, and a pg_auto_failover formation; the formation's health
and the CPU of its keepers."""

from __future__ import annotations

import contextlib
from pathlib import Path

import psutil

from app.embedded import LocalCluster
from app.embedded.formation import Formation, NodeState

SYSTEMS = ("single", "formation")


class TcpCluster(LocalCluster):
    """An embedded cluster whose server is given the TCP URL rather than the unix socket, as the
    formation's is: the comparison then measures replication, not the transport."""

    @property
    def local_sqlalchemy_url(self) -> str:
        return self.sqlalchemy_url


class FormationDatabase:
    """A formation as :class:`bench.processes.Database`: the server's URL, a libpq DSN for the
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
