"""Throw-away PostgreSQL servers for tests: a root-safe wrapper around testing.postgresql.

``testing.postgresql`` runs ``initdb`` and ``postgres`` as the current user in a
``mkdtemp()`` directory, which fails as root ("cannot be run as root"). The
subclass here creates the directory tree, hands it to the unprivileged server
user from :mod:`app.embedded.privileges` and spawns both programs as that user.

Settings favour speed over durability (``fsync``, ``synchronous_commit`` and
``full_page_writes`` off): acceptable for tests only, never for the product.

Example::

    from tests.pg import start_test_postgres

    pg = start_test_postgres()
    engine = sqlalchemy.create_engine(pg.url())        # postgresql+psycopg://...
    with psycopg.connect(pg.dsn()) as conn: ...         # libpq conninfo string
    pg.stop()                                           # also runs at interpreter exit
"""

from __future__ import annotations

import atexit
import os
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import testing.postgresql
from psycopg import sql

from app.embedded.binaries import find_postgres_bindir
from app.embedded.privileges import (
    PgAccount,
    chown_tree,
    ensure_accessible,
    get_pg_account,
    server_env,
)

__all__ = ["TEST_DATABASE", "RootSafePostgresql", "start_test_postgres"]

TEST_DATABASE = "test"
TEST_USER = "postgres"

INITDB_ARGS = f"-U {TEST_USER} -A trust -E UTF8 --locale=C --no-sync"
POSTGRES_ARGS = " ".join(
    [
        "-h 127.0.0.1",
        "-c logging_collector=off",
        "-c fsync=off",
        "-c synchronous_commit=off",
        "-c full_page_writes=off",
        "-c max_connections=200",
    ]
)


class RootSafePostgresql(testing.postgresql.Postgresql):  # type: ignore[misc]
    """``testing.postgresql.Postgresql`` that also works when the process is root.

    Differences from the parent class:

    * ``initdb`` and ``postgres`` come from :func:`find_postgres_bindir` and run as
      the unprivileged server user when we are root (``base_dir`` is chowned to it);
    * :meth:`url` returns a SQLAlchemy URL for the psycopg (v3) driver and
      :meth:`dsn` a libpq conninfo string; readiness checks use psycopg;
    * the server is stopped and its directory removed at interpreter exit.
    """

    child_process: subprocess.Popen[bytes] | None

    def __init__(self, **settings: Any) -> None:
        """Create (and by default start) a server; see testing.postgresql for settings."""
        self.account: PgAccount = get_pg_account()
        bindir = find_postgres_bindir()
        settings.setdefault("initdb", str(bindir / "initdb"))
        settings.setdefault("postgres", str(bindir / "postgres"))
        settings.setdefault("initdb_args", INITDB_ARGS)
        settings.setdefault("postgres_args", POSTGRES_ARGS)
        atexit.register(self.stop)
        super().__init__(**settings)

    # --- connection strings -------------------------------------------------

    def dsn(self, **overrides: Any) -> str:
        """Return a libpq conninfo string, e.g. ``host=127.0.0.1 port=5 user=postgres dbname=test``.

        Args:
            **overrides: Replace ``host``, ``port``, ``user`` or ``dbname``.
        """
        params = self._params(**overrides)
        return " ".join(f"{key}={value}" for key, value in params.items())

    def url(self, **overrides: Any) -> str:
        """Return a ``postgresql+psycopg://`` SQLAlchemy URL.

        Args:
            **overrides: Replace ``host``, ``port``, ``user`` or ``dbname``.
        """
        p = self._params(**overrides)
        return f"postgresql+psycopg://{p['user']}@{p['host']}:{p['port']}/{p['dbname']}"

    def _params(self, **overrides: Any) -> dict[str, Any]:
        params: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": self.settings["port"],
            "user": TEST_USER,
            "dbname": TEST_DATABASE,
        }
        params.update(overrides)
        return params

    # --- process spawning (overrides of testing.postgresql) --------------------

    def initialize_database(self) -> None:
        """Hand ``base_dir`` to the server user, then run initdb as that user."""
        if self.account.switch:
            chown_tree(Path(self.base_dir), self.account)
            ensure_accessible(Path(self.base_dir), self.account)
        data_dir = os.path.join(self.base_dir, "data")
        if os.path.exists(os.path.join(data_dir, "PG_VERSION")):
            return
        argv = [
            self.initdb,
            "-D",
            data_dir,
            "--lc-messages=C",
            *self.settings["initdb_args"].split(),
        ]
        result = subprocess.run(
            argv,
            cwd=self.base_dir,
            env=server_env(self.account),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            **self.account.subprocess_kwargs(),
        )
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed: {result.stderr}")

    def start(self) -> None:
        """Start the server as the server user (the parent spawns it as ourselves)."""
        if self.child_process:
            return
        self.prestart()
        log_path = os.path.join(self.base_dir, f"{self.name}.log")
        with open(log_path, "w") as log:
            self.child_process = subprocess.Popen(
                self.get_server_commandline(),
                cwd=self.base_dir,
                env=server_env(self.account),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                **self.account.subprocess_kwargs(),
            )
        try:
            self.wait_booting()
            self.poststart()
        except Exception:
            self.stop()
            raise

    def is_server_available(self) -> bool:
        """Tell whether the server accepts connections (used while booting)."""
        try:
            with psycopg.connect(self.dsn(dbname="template1"), connect_timeout=1):
                return True
        except psycopg.OperationalError:
            return False

    def poststart(self) -> None:
        """Create the ``test`` database if missing."""
        with psycopg.connect(self.dsn(dbname="postgres"), autocommit=True) as conn:
            found = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (TEST_DATABASE,)
            ).fetchone()
            if found is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEST_DATABASE)))

    def stop(self, *args: Any) -> None:
        """Stop the server and remove its directory (idempotent)."""
        atexit.unregister(self.stop)
        super().stop(*args)


def start_test_postgres(**settings: Any) -> RootSafePostgresql:
    """Start a throw-away PostgreSQL server on a free port in a temporary directory.

    Args:
        **settings: Passed to :class:`testing.postgresql.Postgresql` (e.g. ``port``).

    Returns:
        The running server; call ``.stop()`` when done (it is also stopped at exit).
    """
    return RootSafePostgresql(**settings)
