"""A replicated PostgreSQL with automatic failover on this machine, for development and tests.

A *formation* of pg_auto_failover: a monitor and two PostgreSQL nodes, a primary and its
synchronous standby, each run by its ``pg_autoctl`` keeper, all on loopback ports and all run as
the unprivileged PostgreSQL account when we are root (as :class:`app.embedded.LocalCluster`).
``sundial dev-cluster up|down|status|switchover|kill-primary|...`` drives it; the HA tests and the
fault campaign use it. docs/high-availability.md explains the topology and every setting here.

Layout of ``base_dir``::

    monitor/ node1/ node2/   data directories (owned by the server account, mode 0700)
    logs/                    one log per ``pg_autoctl run`` (monitor.log, node1.log, ...)
    xdg/                     pg_autoctl's own configuration and state (XDG_* directories)
    formation.json           the ports chosen at creation, reused on every start
    .lock                    flock(2) lock serialising create/start/stop between processes

The keepers run detached: they outlive the command that started them, as services would
(:mod:`app.embedded.keepers` runs them; :mod:`app.embedded.monitor` reads the monitor).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import psycopg

from app.embedded import monitor
from app.embedded.errors import FormationError
from app.embedded.keepers import Keepers
from app.embedded.locks import directory_lock
from app.embedded.monitor import MONITOR_SETTINGS, NodeState
from app.embedded.ports import HOST, free_port
from app.embedded.privileges import prepare_owned_dir
from app.embedded.programs import ServerPrograms

__all__ = ["MONITOR_SETTINGS", "NODE_NAMES", "Formation", "FormationError", "NodeState"]

DBNAME = "sundial"
USER = "postgres"
NODE_NAMES = ("node1", "node2")

KEEPER_SETTINGS: dict[str, str] = {"timeout.network_partition_timeout": "3"}
"""Each keeper's settings. A primary that can reach neither the monitor nor its standby demotes
itself after this many seconds: before the monitor can promote the standby (3 s + 4 s of
:data:`MONITOR_SETTINGS`), so two primaries never accept writes at once."""

_STATE_VERSION = 1


class Formation:
    """A monitor and two nodes under ``base_dir`` (see the module docstring).

    Args:
        base_dir: Where the formation lives; created on :meth:`up`.
        bindir: PostgreSQL server binaries (found like the embedded default's if unset).
    """

    def __init__(self, base_dir: Path, *, bindir: Path | None = None) -> None:
        self.base_dir = base_dir.resolve()
        self._programs = ServerPrograms(bindir)
        self._keepers = Keepers(self.base_dir, self._programs)

    # --- where things are ---------------------------------------------------------------------

    def data_dir(self, name: str) -> Path:
        """The data directory of ``monitor`` or a node."""
        return self._keepers.data_dir(name)

    def log_file(self, name: str) -> Path:
        """The log of the keeper (and PostgreSQL) of ``monitor`` or a node."""
        return self._keepers.log_file(name)

    @property
    def ports(self) -> dict[str, int]:
        """The port of the monitor and of each node, chosen at creation."""
        state = self._read_state()
        if state is None:
            raise FormationError(f"no formation in {self.base_dir}; run `up` first")
        return {name: int(port) for name, port in state["ports"].items()}

    @property
    def monitor_dsn(self) -> str:
        """A libpq connection string for the monitor's own database."""
        return f"host={HOST} port={self.ports['monitor']} dbname=pg_auto_failover user={USER}"

    @property
    def sqlalchemy_url(self) -> str:
        """The URL to give Sundial (``SUNDIAL_DATABASE_URL``): every node, writes to the primary."""
        hosts = "&".join(f"host={HOST}:{self.ports[name]}" for name in NODE_NAMES)
        return f"postgresql+psycopg://{USER}@/{DBNAME}?{hosts}&target_session_attrs=read-write"

    @property
    def libpq_dsn(self) -> str:
        """The same as :attr:`sqlalchemy_url` as a libpq connection string."""
        hosts = ",".join(HOST for _ in NODE_NAMES)
        ports = ",".join(str(self.ports[name]) for name in NODE_NAMES)
        return (
            f"host={hosts} port={ports} dbname={DBNAME} user={USER} target_session_attrs=read-write"
        )

    def node_dsn(self, name: str) -> str:
        """A libpq connection string for one node, whatever its role."""
        return f"host={HOST} port={self.ports[name]} dbname={DBNAME} user={USER}"

    # --- lifecycle ----------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the formation has been created."""
        return self._read_state() is not None

    def up(self, timeout: float = 120) -> None:
        """Create the formation if needed, start every keeper that is not running, and wait
        until one node is primary and the other its caught-up synchronous standby."""
        prepare_owned_dir(self.base_dir, self._programs.account)
        with self._locked():
            if not self.exists():
                self._create(timeout)
            for name in ("monitor", *NODE_NAMES):
                if not self.keeper_running(name):
                    self._keepers.start(name)
        deadline = time.monotonic() + timeout
        self.wait_until(_healthy, timeout, "a primary and a standby")
        # The monitor's view may be from before a restart: a write must also go through.
        self.wait_writable(max(deadline - time.monotonic(), 1.0))

    def wait_writable(self, timeout: float) -> None:
        """Wait until :attr:`libpq_dsn` reaches a node that accepts writes.

        Raises:
            FormationError: not within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.libpq_dsn, connect_timeout=3, autocommit=True) as conn:
                    conn.execute("SELECT txid_current()")
                    return
            except psycopg.Error as error:
                if time.monotonic() > deadline:
                    raise FormationError(f"no node accepts writes: {error}") from error
                time.sleep(0.1)

    def down(self, timeout: float = 60) -> None:
        """Stop every keeper (and its PostgreSQL), nodes first, then the monitor."""
        with self._locked():
            for name in (*NODE_NAMES, "monitor"):
                self.stop_node(name, timeout=timeout)

    def destroy(self) -> None:
        """Stop everything, then delete the formation's directory."""
        if self.base_dir.exists():
            with contextlib.suppress(FormationError):
                self.down()
            for name in ("monitor", *NODE_NAMES):
                self._keepers.kill(name)  # whatever did not stop in time
            # A keeper's helper process orphaned by a kill mid-restart would outlive the
            # formation: every process started for it carries its XDG_CONFIG_HOME.
            for pid in self.processes():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def processes(self) -> list[int]:
        """Every live process whose environment names this formation's XDG_CONFIG_HOME (the
        keepers, their helpers and their PostgreSQL servers)."""
        return self._keepers.processes()

    def start_node(self, name: str) -> None:
        """Start the keeper of ``name`` (it starts PostgreSQL, and a node that was primary
        rejoins as a standby: pg_rewind, or a fresh copy when rewinding fails)."""
        if not self.keeper_running(name):
            self._keepers.start(name)

    def stop_node(self, name: str, *, timeout: float = 60) -> None:
        """Stop the keeper of ``name`` and its PostgreSQL cleanly (a fast shutdown)."""
        self._keepers.stop(name, timeout=timeout)

    def kill_node(self, name: str) -> None:
        """SIGKILL the keeper of ``name``, its PostgreSQL and every backend: as if the machine
        had lost power (the data directory stays, so :meth:`start_node` can bring it back)."""
        with self._locked():
            self._keepers.kill(name)

    def pause_node(self, name: str) -> None:
        """SIGSTOP the PostgreSQL of ``name`` and all its processes: a machine that froze, its
        connections left open (:meth:`resume_node` undoes it)."""
        self._keepers.signal_postgres(name, signal.SIGSTOP)

    def resume_node(self, name: str) -> None:
        """SIGCONT what :meth:`pause_node` stopped."""
        self._keepers.signal_postgres(name, signal.SIGCONT)

    def switchover(self, timeout: float = 60) -> None:
        """A planned switchover: the standby becomes primary once it has caught up, and the old
        primary follows it as the new standby."""
        self._keepers.autoctl(
            "perform",
            "switchover",
            "--pgdata",
            str(self.data_dir("monitor")),
            "--wait",
            str(int(timeout)),
            timeout=timeout + 30,
        )

    # --- what the monitor says ----------------------------------------------------------------

    def nodes(self) -> list[NodeState]:
        """Every node as the monitor sees it now.

        Raises:
            FormationError: the monitor cannot be asked.
        """
        return monitor.read_nodes(self.monitor_dsn)

    def primary(self) -> NodeState | None:
        """The node accepting writes now, if any."""
        return next((node for node in self.nodes() if node.writable), None)

    def wait_until(
        self, reached: Callable[[list[NodeState]], bool], timeout: float, what: str
    ) -> list[NodeState]:
        """Wait until the monitor's view of the nodes satisfies ``reached``; that view.

        Raises:
            FormationError: not within ``timeout`` seconds (with the last view and log tails).
        """
        deadline = time.monotonic() + timeout
        nodes: list[NodeState] = []
        while True:
            with contextlib.suppress(FormationError):
                nodes = self.nodes()
                if reached(nodes):
                    return nodes
            if time.monotonic() > deadline:
                raise FormationError(
                    f"the formation did not reach {what} within {timeout:.0f} s; the monitor "
                    f"says {nodes}\n{self.log_tails()}"
                )
            time.sleep(0.1)

    def keeper_running(self, name: str) -> bool:
        """Whether the keeper of ``name`` runs."""
        return self._keepers.running(name)

    def log_tails(self, lines: int = 15) -> str:
        """The end of every keeper's log, for error messages."""
        parts = []
        for name in ("monitor", *NODE_NAMES):
            path = self.log_file(name)
            text = path.read_text(errors="replace").splitlines() if path.exists() else []
            parts.append(f"--- {name} ---\n" + "\n".join(text[-lines:]))
        return "\n".join(parts)

    # --- creation -----------------------------------------------------------------------------

    def _create(self, timeout: float) -> None:
        account = self._programs.account
        prepare_owned_dir(self.base_dir, account)
        for directory in ("logs", "xdg", "xdg/config", "xdg/share", "xdg/run"):
            prepare_owned_dir(self.base_dir / directory, account)
        ports = {name: free_port() for name in ("monitor", *NODE_NAMES)}
        # Half-created leftovers of an interrupted creation would make pg_autoctl refuse.
        for name in ports:
            shutil.rmtree(self.data_dir(name), ignore_errors=True)
        pg_ctl = str(self._programs.bindir / "pg_ctl")
        autoctl = self._keepers.autoctl
        autoctl(
            "create", "monitor", "--pgdata", str(self.data_dir("monitor")),
            "--pgport", str(ports["monitor"]), "--hostname", HOST, "--auth", "trust",
            "--no-ssl", "--pgctl", pg_ctl, timeout=timeout,
        )  # fmt: skip
        self._write_state(ports)
        self._keepers.start("monitor")
        monitor.tune(self.monitor_dsn, timeout)
        monitor_uri = (
            f"postgres://autoctl_node@{HOST}:{ports['monitor']}/pg_auto_failover?sslmode=disable"
        )
        for index, name in enumerate(NODE_NAMES):
            autoctl(
                "create", "postgres", "--pgdata", str(self.data_dir(name)),
                "--pgport", str(ports[name]), "--hostname", HOST, "--listen", HOST,
                "--name", name, "--auth", "trust", "--no-ssl", "--dbname", DBNAME,
                "--monitor", monitor_uri, "--pgctl", pg_ctl, timeout=timeout,
            )  # fmt: skip
            for key, value in KEEPER_SETTINGS.items():
                autoctl(
                    "config", "set", "--pgdata", str(self.data_dir(name)), key, value,
                    timeout=timeout,
                )  # fmt: skip
            self._keepers.start(name)
            if index == 0:
                # The standby copies the primary: it must be serving first.
                self.wait_until(
                    lambda nodes: any(node.writable for node in nodes), timeout, "a primary"
                )

    # --- state file and lock ------------------------------------------------------------------

    def _read_state(self) -> dict[str, dict[str, int]] | None:
        try:
            state = json.loads((self.base_dir / "formation.json").read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(state, dict) or state.get("version") != _STATE_VERSION:
            return None
        return state

    def _write_state(self, ports: dict[str, int]) -> None:
        path = self.base_dir / "formation.json"
        path.write_text(json.dumps({"version": _STATE_VERSION, "ports": ports}, indent=2))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with directory_lock(self.base_dir):
            yield


def _healthy(nodes: Sequence[NodeState]) -> bool:
    """One primary with synchronous replication, and every other node its standby."""
    roles = sorted(node.reported for node in nodes if node.settled)
    return len(nodes) == len(NODE_NAMES) and roles == ["primary", "secondary"]
