"""A private, persistent PostgreSQL cluster in a directory of our own.

This is the server's "embedded default": without a configured database URL,
``sundial serve`` runs its own cluster here, and its data survives restarts.

Layout of ``base_dir``::

    pgdata/        the cluster (owned by the server user, mode 0700)
    run/           unix socket directory and the server log ``postgres.log``
    cluster.json   the chosen TCP port, reused on the next start
    .lock          flock(2) lock serialising initdb/start/stop between processes

Security: the server listens only on 127.0.0.1 and on a unix socket in the
private ``run/`` directory (mode 0700), with ``trust`` authentication and no
password. Any local process that can connect to 127.0.0.1 can therefore log in
as the cluster superuser; the cluster is meant for single-user development
machines and containers, not for shared hosts.

Durability is a product guarantee: ``fsync``, ``synchronous_commit`` and
``full_page_writes`` are always on for this cluster.

When the process is root, every PostgreSQL program is run as an unprivileged
user (see :mod:`app.embedded.privileges`). The programs themselves (initdb, pg_ctl) are run by
:mod:`app.embedded.datadir`; this module decides where, on which port and with what settings.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import time
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow
from sqlalchemy.engine import URL

from app.embedded.datadir import DataDirectory
from app.embedded.errors import ClusterError
from app.embedded.locks import directory_lock
from app.embedded.ports import HOST, free_port, port_is_free
from app.embedded.privileges import prepare_owned_dir
from app.embedded.programs import ServerPrograms

__all__ = ["STOP_MODES", "LocalCluster"]

logger = logging.getLogger("sundial.embedded")

STOP_MODES = frozenset({"smart", "fast", "immediate"})

SERVER_SETTINGS: dict[str, str] = {
    "listen_addresses": HOST,
    "max_connections": "200",
    "shared_buffers": "128MB",
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "cluster_name": "sundial",
}
"""Settings passed with ``-c`` on every start (besides port and socket directory)."""

_SOCKET_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
_STATE_VERSION = 1
_CONNECT_RETRY_PAUSE = 0.1


class LocalCluster:
    """One persistent private PostgreSQL cluster living in ``base_dir``.

    The methods are safe to call from several processes at once (they serialise
    on ``base_dir/.lock``) and from root or non-root processes.
    """

    def __init__(
        self,
        base_dir: Path,
        *,
        port: int | None = None,
        bindir: Path | None = None,
        database: str = "sundial",
        user: str = "sundial",
    ) -> None:
        """Describe a cluster; nothing is created or started yet.

        Args:
            base_dir: Directory holding the cluster and its state; created if missing.
            port: TCP port to use. If None, the port stored in ``cluster.json`` is
                reused (or a new free one is chosen if it is taken by someone else).
                An explicit port that is taken is an error.
            bindir: Directory with the PostgreSQL binaries; searched for if None.
            database: Database created for the application.
            user: Superuser name chosen at initdb time.
        """
        self._base_dir = Path(os.path.abspath(base_dir))
        self._requested_port = port
        self._programs = ServerPrograms(bindir)
        self._port: int | None = port
        self.database = database
        self.user = user
        self._pgdata = DataDirectory(
            self.data_dir,
            workdir=self._base_dir,
            log_file=self.log_file,
            programs=self._programs,
            user=user,
        )

    # ------------------------------------------------------------------ paths

    @property
    def base_dir(self) -> Path:
        """The directory that holds everything of this cluster."""
        return self._base_dir

    @property
    def data_dir(self) -> Path:
        """The PostgreSQL data directory (``PGDATA``)."""
        return self._base_dir / "pgdata"

    @property
    def run_dir(self) -> Path:
        """The unix socket directory, which also holds the server log."""
        return self._base_dir / "run"

    @property
    def log_file(self) -> Path:
        """The server log written by ``pg_ctl -l``."""
        return self.run_dir / "postgres.log"

    @property
    def _state_file(self) -> Path:
        return self._base_dir / "cluster.json"

    # ------------------------------------------------------------- connection

    @property
    def host(self) -> str:
        """The address the server listens on (always ``127.0.0.1``)."""
        return HOST

    @property
    def port(self) -> int:
        """The TCP port of the cluster.

        Read it after :meth:`start`: a stored port that is taken by another
        program is replaced at start time.

        Raises:
            ClusterError: No port has been chosen yet (never initialised).
        """
        if self._port is None:
            self._port = self._read_state_port()
        if self._port is None:
            raise ClusterError(
                f"no port chosen yet for {self._base_dir}; call ensure_initialized() or start()"
            )
        return self._port

    @property
    def sqlalchemy_url(self) -> str:
        """SQLAlchemy URL using the psycopg (v3) driver."""
        return f"postgresql+psycopg://{self.user}@{HOST}:{self.port}/{self.database}"

    @property
    def socket_dir(self) -> Path | None:
        """The directory of the cluster's unix socket, or None when its path would be too long
        (or hold characters ``unix_socket_directories`` cannot take): then only TCP is served."""
        return self._socket_dir_for(self.port)

    @property
    def local_sqlalchemy_url(self) -> str:
        """The URL for a process on this machine: through the unix socket when there is one.

        A statement over a unix socket costs both ends less CPU than over TCP loopback (no TCP
        stack), which a server on the same machine as its database notices in every request.
        """
        socket_dir = self.socket_dir
        if socket_dir is None:
            return self.sqlalchemy_url
        url = URL.create(
            "postgresql+psycopg",
            username=self.user,
            database=self.database,
            query={"host": str(socket_dir), "port": str(self.port)},
        )
        return url.render_as_string(hide_password=False)

    @property
    def libpq_dsn(self) -> str:
        """libpq connection string, e.g. for :func:`psycopg.connect`."""
        return f"host={HOST} port={self.port} user={self.user} dbname={self.database}"

    # ------------------------------------------------------------ public API

    def ensure_initialized(self) -> None:
        """Create the cluster with initdb unless it exists, and choose its port.

        The application database is created by :meth:`start`, because that needs
        a running server.

        Raises:
            ClusterError: initdb failed or the data directory is unusable.
            PostgresNotFound: The PostgreSQL binaries are not installed.
        """
        with directory_lock(self._base_dir, log_wait=True):
            self._ensure_initialized_locked()

    def start(self, timeout: float = 30) -> None:
        """Initialise if needed, start the server and create the database if missing.

        Does nothing but the database check if the server is already running. A
        stale ``postmaster.pid`` left by a killed server does not prevent the start.

        Args:
            timeout: Seconds to wait for the server to accept connections
                (crash recovery counts against it).

        Raises:
            ClusterError: The server did not start; the message has the log tail.
        """
        with directory_lock(self._base_dir, log_wait=True):
            self._start_locked(timeout)

    def stop(self, mode: str = "fast", timeout: float = 60) -> None:
        """Stop the server if it is running.

        Args:
            mode: ``"smart"``, ``"fast"`` or ``"immediate"`` (no checkpoint, like a
                crash; the next start performs recovery).
            timeout: Seconds to wait for the server to exit.

        Raises:
            ClusterError: Unknown mode, or the server did not stop.
        """
        _check_mode(mode)
        if not self._base_dir.exists():
            return
        with directory_lock(self._base_dir, log_wait=True):
            self._pgdata.stop(mode, timeout)

    def restart(self, mode: str = "fast", timeout: float = 60) -> None:
        """Stop the server with ``mode`` (if running), then start it.

        Args:
            mode: Stop mode, see :meth:`stop`. ``"immediate"`` simulates a crash.
            timeout: Seconds allowed for each of stopping and starting.

        Raises:
            ClusterError: Unknown mode, or stopping/starting failed.
        """
        _check_mode(mode)
        with directory_lock(self._base_dir, log_wait=True):
            self._pgdata.stop(mode, timeout)
            self._start_locked(timeout)

    def is_running(self) -> bool:
        """Tell whether a server is running on this data directory (a recycled pid is not
        mistaken for it: :meth:`app.embedded.datadir.DataDirectory.is_running`).

        Returns:
            True if the postmaster is alive.
        """
        return self._pgdata.is_running()

    # --------------------------------------------------------------- helpers

    def _ensure_initialized_locked(self) -> None:
        account = self._programs.account
        prepare_owned_dir(self.run_dir, account)
        if not self._pgdata.exists():
            self._pgdata.initdb(account)
        prepare_owned_dir(self.data_dir, account)
        if self._port is None:
            self._port = self._read_state_port() or free_port()
        self._write_state(self._port)

    def _start_locked(self, timeout: float) -> None:
        self._ensure_initialized_locked()
        if self.is_running():
            self._port = self._pgdata.running_port() or self.port
            self._write_state(self._port)
            logger.debug("PostgreSQL in %s is already running", self.data_dir)
        else:
            self._pgdata.remove_stale_lock_files(self.run_dir)
            self._port = self._port_for_start()
            self._write_state(self._port)
            self._pgdata.start(self._port, self._server_options(self._port), timeout)
        self._ensure_database(timeout)

    def _port_for_start(self) -> int:
        port = self.port
        if port_is_free(port):
            return port
        if self._requested_port is not None:
            raise ClusterError(f"port {port} on {HOST} is in use by another program")
        new_port = free_port()
        logger.warning("port %d is in use by another program; using port %d", port, new_port)
        return new_port

    def _server_options(self, port: int) -> str:
        """Return the postgres options for ``pg_ctl -o`` (a shell-quoted string)."""
        options = ["-p", str(port)]
        for name, value in {**SERVER_SETTINGS, **self._socket_setting(port)}.items():
            options += ["-c", f"{name}={value}"]
        return shlex.join(options)

    def _socket_dir_for(self, port: int) -> Path | None:
        socket_dir = str(self.run_dir)
        socket_path = f"{socket_dir}/.s.PGSQL.{port}"
        if len(socket_path) > _SOCKET_PATH_MAX or any(c in socket_dir for c in ',"\\'):
            return None
        return self.run_dir

    def _socket_setting(self, port: int) -> dict[str, str]:
        socket_dir = self._socket_dir_for(port)
        if socket_dir is None:
            logger.warning(
                "unix socket disabled: path %s/.s.PGSQL.%d is too long or has special "
                "characters; use TCP on %s",
                self.run_dir,
                port,
                HOST,
            )
            return {"unix_socket_directories": ""}
        return {"unix_socket_directories": str(socket_dir)}

    def _ensure_database(self, timeout: float) -> None:
        with self._connect_admin(timeout) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)
            ).fetchone()
            if exists is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.database)))
                logger.info("created database %r", self.database)

    def _connect_admin(self, timeout: float) -> psycopg.Connection[TupleRow]:
        """Connect to the ``postgres`` database, retrying while the server starts up.

        After ``pg_ctl start -w`` the first attempt succeeds; retries matter only
        for a server found running that is still in (crash) recovery.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                return psycopg.connect(
                    host=HOST,
                    port=self.port,
                    user=self.user,
                    dbname="postgres",
                    autocommit=True,
                    connect_timeout=max(1, round(timeout)),
                )
            except psycopg.OperationalError as exc:
                if time.monotonic() >= deadline:
                    raise ClusterError(
                        f"PostgreSQL in {self.data_dir} is running but does not accept "
                        f"connections on {HOST}:{self.port}: {exc}\n"
                        f"--- last lines of {self.log_file} ---\n{self._pgdata.log_tail()}"
                    ) from exc
                time.sleep(_CONNECT_RETRY_PAUSE)

    def _read_state_port(self) -> int | None:
        try:
            state = json.loads(self._state_file.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("ignoring unreadable %s: %s", self._state_file, exc)
            return None
        port = state.get("port") if isinstance(state, dict) else None
        return port if isinstance(port, int) else None

    def _write_state(self, port: int) -> None:
        if self._read_state_port() == port:
            return
        tmp = self._state_file.with_suffix(".json.tmp")
        tmp.write_text(json.dumps({"version": _STATE_VERSION, "port": port}) + "\n")
        tmp.replace(self._state_file)


def _check_mode(mode: str) -> None:
    if mode not in STOP_MODES:
        raise ClusterError(f"unknown stop mode {mode!r}; use one of {sorted(STOP_MODES)}")
