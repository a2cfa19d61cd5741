"""The history's advisory lock: one export or prune at a time on a database, and on every pool.

Held for the whole job on the job's own session (``pg_try_advisory_lock``): a second job finds
it taken and says so instead of waiting. The pipeline's export and prune
(:mod:`app.pipeline.export`, :mod:`app.pipeline.prune`) and the prune by SQL alone
(:mod:`app.store.history_prune`: the scheduler's, ``sundial history prune``) share it, so no
prune drops a partition an export is reading. A job over several pools (docs/scaling.md) takes
every pool's lock before it does anything (:func:`locked_pools`), so it either has them all or
does nothing. Plain synchronous psycopg: neither Spark nor pyarrow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, Final

import psycopg
from sqlalchemy.engine import URL

from app.database_url import psycopg_dsn

EXPORT_LOCK_KEY: Final = 0x5D1A1_E7
"""Advisory lock held while an export or a prune runs, so only one runs at a time."""

EXPORT_TRY_LOCK: Final = "SELECT pg_try_advisory_lock(%(key)s)"
EXPORT_UNLOCK: Final = "SELECT pg_advisory_unlock(%(key)s)"

# What the database says it is (migration 0011): no row until it is registered as a pool.
POOL_IDENTITY: Final = "SELECT name FROM pool_identity"


class ExportBusyError(RuntimeError):
    """Another export or prune holds the history's lock on this database."""


class PoolMismatchError(RuntimeError):
    """A pool's URL leads to a database registered as another pool: the job would record (or
    prune) that pool's rows under the wrong name, or twice."""


def connect(
    database_url: str | URL, application_name: str, *, autocommit: bool = False
) -> psycopg.Connection[Any]:
    """A new connection in UTC, named so operators can tell it in ``pg_stat_activity``."""
    return psycopg.connect(
        psycopg_dsn(database_url),
        autocommit=autocommit,
        application_name=application_name,
        options="-c TimeZone=UTC",
    )


class Locked:
    """The history's advisory lock on a session (exports and prunes never run at once)."""

    def __init__(self, conn: psycopg.Connection[Any], pool: str | None = None) -> None:
        self._conn = conn
        self._pool = pool

    def __enter__(self) -> None:
        row = self._conn.execute(EXPORT_TRY_LOCK, {"key": EXPORT_LOCK_KEY}).fetchone()
        if row is None or not row[0]:
            where = (
                "this database" if self._pool is None else f"the database of pool {self._pool!r}"
            )
            raise ExportBusyError(f"another export or history prune is running on {where}")

    def __exit__(self, *exc: object) -> None:
        self._conn.execute(EXPORT_UNLOCK, {"key": EXPORT_LOCK_KEY})


def check_pool_identity(conn: psycopg.Connection[Any], pool: str) -> None:
    """Refuse a database registered as another pool than ``pool`` (one not registered yet, a
    single database that has not started since the upgrade, passes).

    Raises:
        PoolMismatchError: it is registered as another pool.
    """
    row = conn.execute(POOL_IDENTITY).fetchone()
    if row is not None and row[0] != pool:
        raise PoolMismatchError(
            f"pool {pool!r}: its database is registered as pool {row[0]!r}; check SUNDIAL_POOLS"
        )


@contextlib.contextmanager
def locked_pools(
    pools: Mapping[str, str | URL], application_name: str
) -> Iterator[dict[str, psycopg.Connection[Any]]]:
    """An autocommit session on every pool's database (``pools``: URL by name), each checked to
    be that pool and holding the history's lock, by name; the locks go with the sessions.

    Raises:
        ExportBusyError: another export or prune holds a pool's lock (no lock is kept).
        PoolMismatchError: a pool's database is registered as another pool.
    """
    with contextlib.ExitStack() as stack:
        sessions: dict[str, psycopg.Connection[Any]] = {}
        for name, url in pools.items():
            conn = stack.enter_context(connect(url, application_name, autocommit=True))
            check_pool_identity(conn, name)
            stack.enter_context(Locked(conn, name))
            sessions[name] = conn
        yield sessions
