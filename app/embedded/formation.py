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

The keepers run detached: they outlive the command that started them, as services would.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg

from app.embedded.cluster import HOST, free_port
from app.embedded.privileges import PgAccount, prepare_owned_dir, server_env
from app.embedded.programs import ServerPrograms

__all__ = ["MONITOR_SETTINGS", "Formation", "FormationError", "NodeState"]

DBNAME = "sundial"
USER = "postgres"
NODE_NAMES = ("node1", "node2")

MONITOR_SETTINGS: dict[str, int] = {
    "pgautofailover.health_check_period": 1000,
    "pgautofailover.health_check_timeout": 1000,
    "pgautofailover.health_check_max_retries": 1,
    "pgautofailover.health_check_retry_delay": 500,
    "pgautofailover.node_considered_unhealthy_timeout": 3000,
    "pgautofailover.primary_demote_timeout": 4000,
}
"""The monitor's timeouts (ms), tuned so that an unplanned failover takes seconds, not the
defaults' ~50 s: a dead primary is noticed within ~3 s, and its standby is promoted ~4 s later
if the primary has not reported itself demoted."""

KEEPER_SETTINGS: dict[str, str] = {"timeout.network_partition_timeout": "3"}
"""Each keeper's settings. A primary that can reach neither the monitor nor its standby demotes
itself after this many seconds: before the monitor can promote the standby (3 s + 4 s above),
so two primaries never accept writes at once."""

_INSTALL_HINT = (
    "pg_autoctl not found: install pg_auto_failover, e.g. "
    "`apt-get install pg-auto-failover-cli postgresql-<major>-auto-failover`"
)
_STATE_VERSION = 1
_PROC = Path("/proc")


class FormationError(RuntimeError):
    """Raised when the formation cannot be created, started, changed or stopped."""


@dataclass(frozen=True)
class NodeState:
    """One node as the monitor sees it."""

    name: str
    port: int
    reported: str
    """The state the node's keeper last reported (``primary``, ``secondary``, ...)."""
    assigned: str
    """The state the monitor wants the node in."""
    healthy: bool
    """Whether the monitor's last health check of the node's PostgreSQL succeeded."""

    @property
    def settled(self) -> bool:
        """Whether the node is where the monitor wants it."""
        return self.reported == self.assigned

    @property
    def writable(self) -> bool:
        """Whether the node is a primary accepting writes (alone or with its standby): the
        monitor's last check of it succeeded, and it is where the monitor wants it."""
        return (
            self.healthy and self.settled and self.reported in ("single", "wait_primary", "primary")
        )


class Formation:
    """A monitor and two nodes under ``base_dir`` (see the module docstring).

    Args:
        base_dir: Where the formation lives; created on :meth:`up`.
        bindir: PostgreSQL server binaries (found like the embedded default's if unset).
    """

    def __init__(self, base_dir: Path, *, bindir: Path | None = None) -> None:
        self.base_dir = base_dir.resolve()
        self._programs = ServerPrograms(bindir)

    # --- where things are ---------------------------------------------------------------------

    def data_dir(self, name: str) -> Path:
        """The data directory of ``monitor`` or a node."""
        return self.base_dir / name

    def log_file(self, name: str) -> Path:
        """The log of the keeper (and PostgreSQL) of ``monitor`` or a node."""
        return self.base_dir / "logs" / f"{name}.log"

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
        prepare_owned_dir(self.base_dir, self._account_())
        with self._locked():
            if not self.exists():
                self._create(timeout)
            for name in ("monitor", *NODE_NAMES):
                if not self.keeper_running(name):
                    self._run_keeper(name)
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
                self._kill(name)  # whatever did not stop in time
            # A keeper's helper process orphaned by a kill mid-restart would outlive the
            # formation: every process started for it carries its XDG_CONFIG_HOME.
            for pid in self.processes():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def processes(self) -> list[int]:
        """Every live process whose environment names this formation's XDG_CONFIG_HOME (the
        keepers, their helpers and their PostgreSQL servers)."""
        marker = f"XDG_CONFIG_HOME={self.base_dir / 'xdg' / 'config'}".encode()
        found = []
        for entry in _PROC.iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                with contextlib.suppress(OSError):
                    if marker in (entry / "environ").read_bytes().split(b"\0"):
                        found.append(int(entry.name))
        return [pid for pid in found if _alive(pid)]

    def start_node(self, name: str) -> None:
        """Start the keeper of ``name`` (it starts PostgreSQL, and a node that was primary
        rejoins as a standby: pg_rewind, or a fresh copy when rewinding fails)."""
        if not self.keeper_running(name):
            self._run_keeper(name)

    def stop_node(self, name: str, *, timeout: float = 60) -> None:
        """Stop the keeper of ``name`` and its PostgreSQL cleanly (a fast shutdown)."""
        if not self.keeper_running(name):
            return
        self._autoctl("stop", "--pgdata", str(self.data_dir(name)), timeout=timeout)
        deadline = time.monotonic() + timeout
        while self.keeper_running(name) or self._postmaster_pid(name) is not None:
            if time.monotonic() > deadline:
                raise FormationError(f"{name} did not stop within {timeout:.0f} s")
            time.sleep(0.05)

    def kill_node(self, name: str) -> None:
        """SIGKILL the keeper of ``name``, its PostgreSQL and every backend: as if the machine
        had lost power (the data directory stays, so :meth:`start_node` can bring it back)."""
        with self._locked():
            self._kill(name)

    def pause_node(self, name: str) -> None:
        """SIGSTOP the PostgreSQL of ``name`` and all its processes: a machine that froze, its
        connections left open (:meth:`resume_node` undoes it)."""
        self._signal_postgres(name, signal.SIGSTOP)

    def resume_node(self, name: str) -> None:
        """SIGCONT what :meth:`pause_node` stopped."""
        self._signal_postgres(name, signal.SIGCONT)

    def _signal_postgres(self, name: str, signum: signal.Signals) -> None:
        postmaster = self._postmaster_pid(name)
        if postmaster is None:
            raise FormationError(f"the PostgreSQL of {name} is not running")
        for pid in (postmaster, *_children(postmaster)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def switchover(self, timeout: float = 60) -> None:
        """A planned switchover: the standby becomes primary once it has caught up, and the old
        primary follows it as the new standby."""
        self._autoctl(
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
        try:
            with psycopg.connect(self.monitor_dsn, connect_timeout=3, autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT nodename, nodeport, reportedstate::text, goalstate::text, health = 1"
                    " FROM pgautofailover.node ORDER BY nodename"
                ).fetchall()
        except psycopg.Error as error:
            raise FormationError(f"the monitor cannot be asked: {error}") from error
        return [NodeState(*row) for row in rows]

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
        return self._keeper_pid(name) is not None

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
        account = self._account_()
        prepare_owned_dir(self.base_dir, account)
        for directory in ("logs", "xdg", "xdg/config", "xdg/share", "xdg/run"):
            prepare_owned_dir(self.base_dir / directory, account)
        ports = {name: free_port() for name in ("monitor", *NODE_NAMES)}
        # Half-created leftovers of an interrupted creation would make pg_autoctl refuse.
        for name in ports:
            shutil.rmtree(self.data_dir(name), ignore_errors=True)
        pg_ctl = str(self._bindir_() / "pg_ctl")
        self._autoctl(
            "create", "monitor", "--pgdata", str(self.data_dir("monitor")),
            "--pgport", str(ports["monitor"]), "--hostname", HOST, "--auth", "trust",
            "--no-ssl", "--pgctl", pg_ctl, timeout=timeout,
        )  # fmt: skip
        self._write_state(ports)
        self._run_keeper("monitor")
        self._tune_monitor(timeout)
        monitor_uri = (
            f"postgres://autoctl_node@{HOST}:{ports['monitor']}/pg_auto_failover?sslmode=disable"
        )
        for index, name in enumerate(NODE_NAMES):
            self._autoctl(
                "create", "postgres", "--pgdata", str(self.data_dir(name)),
                "--pgport", str(ports[name]), "--hostname", HOST, "--listen", HOST,
                "--name", name, "--auth", "trust", "--no-ssl", "--dbname", DBNAME,
                "--monitor", monitor_uri, "--pgctl", pg_ctl, timeout=timeout,
            )  # fmt: skip
            for key, value in KEEPER_SETTINGS.items():
                self._autoctl(
                    "config", "set", "--pgdata", str(self.data_dir(name)), key, value,
                    timeout=timeout,
                )  # fmt: skip
            self._run_keeper(name)
            if index == 0:
                # The standby copies the primary: it must be serving first.
                self.wait_until(
                    lambda nodes: any(node.writable for node in nodes), timeout, "a primary"
                )

    def _tune_monitor(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.monitor_dsn, connect_timeout=3, autocommit=True) as conn:
                    for name, value in MONITOR_SETTINGS.items():
                        conn.execute(f"ALTER SYSTEM SET {name} = {int(value)}")
                    conn.execute("SELECT pg_reload_conf()")
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    # --- processes ----------------------------------------------------------------------------

    def _run_keeper(self, name: str) -> None:
        """``pg_autoctl run`` for ``name``, detached: a shell starts it in the background and
        exits, so the keeper outlives this process and is never left a zombie of it."""
        account = self._account_()
        log = self.log_file(name)
        self._remove_stale_pid_files(name)
        argv = [self._pg_autoctl(), "run", "--pgdata", str(self.data_dir(name))]
        subprocess.run(
            ["/bin/sh", "-c", 'exec "$@" </dev/null >>"$LOG" 2>&1 &', "sh", *argv],
            env={**self._env(), "LOG": str(log)},
            check=True,
            start_new_session=True,
            **account.subprocess_kwargs(),
        )

    def _remove_stale_pid_files(self, name: str) -> None:
        """The keeper's and PostgreSQL's pid files of ``name``, where they name a process that
        is dead. A killed process lingers as a zombie until something reaps it, and while it
        does, pg_autoctl takes the pid file for a keeper or a PostgreSQL still running: it would
        refuse to start, or never start PostgreSQL. A machine that lost power has no zombies."""
        relative = self.data_dir(name).relative_to("/")
        pid_files = (
            self.base_dir / "xdg" / "run" / "pg_autoctl" / relative / "pg_autoctl.pid",
            self.data_dir(name) / "postmaster.pid",
        )
        for pid_file in pid_files:
            try:
                pid = int(pid_file.read_text().split("\n", 1)[0])
            except (OSError, ValueError):
                continue
            if not _alive(pid):
                pid_file.unlink(missing_ok=True)

    def _kill(self, name: str) -> None:
        pids: list[int] = []
        keeper = self._keeper_pid(name)
        if keeper is not None:
            pids += [keeper, *_children(keeper)]
        postmaster = self._postmaster_pid(name)
        if postmaster is not None:
            pids += [postmaster, *_children(postmaster)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.02)

    def _keeper_pid(self, name: str) -> int | None:
        """The supervisor ``pg_autoctl run --pgdata <dir>`` of ``name``, found in /proc."""
        wanted = ["run", "--pgdata", str(self.data_dir(name))]
        for pid, argv in _processes():
            is_keeper = os.path.basename(argv[0]) == "pg_autoctl" and argv[1:4] == wanted
            if is_keeper and _alive(pid):
                return pid
        return None

    def _postmaster_pid(self, name: str) -> int | None:
        try:
            pid = int((self.data_dir(name) / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def _autoctl(self, *args: str, timeout: float) -> str:
        account = self._account_()
        try:
            done = subprocess.run(
                [self._pg_autoctl(), *args],
                env=self._env(),
                cwd=self.base_dir,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                **account.subprocess_kwargs(),
            )
        except subprocess.TimeoutExpired as error:
            raise FormationError(f"pg_autoctl {' '.join(args)} timed out") from error
        if done.returncode != 0:
            raise FormationError(
                f"pg_autoctl {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}"
            )
        return done.stdout

    def _env(self) -> dict[str, str]:
        env = server_env(self._account_())
        env["PATH"] = f"{self._bindir_()}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
        env["XDG_CONFIG_HOME"] = str(self.base_dir / "xdg" / "config")
        env["XDG_DATA_HOME"] = str(self.base_dir / "xdg" / "share")
        env["XDG_RUNTIME_DIR"] = str(self.base_dir / "xdg" / "run")
        # pg_autoctl's initdb takes the encoding from the locale: without one, SQL_ASCII.
        env["LC_ALL"] = env["LANG"] = "C.UTF-8"
        return env

    def _pg_autoctl(self) -> str:
        found = shutil.which("pg_autoctl") or shutil.which("pg_autoctl", path=str(self._bindir_()))
        if found is None:
            raise FormationError(_INSTALL_HINT)
        return found

    def _account_(self) -> PgAccount:
        return self._programs.account

    def _bindir_(self) -> Path:
        return self._programs.bindir

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
        self.base_dir.mkdir(parents=True, exist_ok=True)
        with open(self.base_dir / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _healthy(nodes: Sequence[NodeState]) -> bool:
    """One primary with synchronous replication, and every other node its standby."""
    roles = sorted(node.reported for node in nodes if node.settled)
    return len(nodes) == len(NODE_NAMES) and roles == ["primary", "secondary"]


def _processes() -> Iterator[tuple[int, list[str]]]:
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                raw = (entry / "cmdline").read_bytes()
                yield int(entry.name), raw.decode(errors="replace").rstrip("\0").split("\0")


def _children(pid: int) -> list[int]:
    found = []
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                # /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces.
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        state = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
