"""The pipeline's advisory lock: one export or prune at a time on a database, and on every pool.

Held for the whole job on the job's own session (``pg_try_advisory_lock``): a second job finds
it taken and says so instead of waiting. An export or a prune over several pools
(docs/scaling.md) takes every pool's lock before it does anything (:func:`locked_pools`), so
it either has them all or does nothing. Plain psycopg, so pruning needs neither Spark nor
pyarrow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, Final

import psycopg

from app.pipeline.database import connect

EXPORT_LOCK_KEY: Final = 0x5D1A1_E7
"""Advisory lock held while an export or a prune runs, so only one runs at a time."""

EXPORT_TRY_LOCK: Final = "SELECT pg_try_advisory_lock(%(key)s)"
EXPORT_UNLOCK: Final = "SELECT pg_advisory_unlock(%(key)s)"

# What the database says it is (migration 0011): no row until it is registered as a pool.
POOL_IDENTITY: Final = "SELECT name FROM pool_identity"


class ExportBusyError(RuntimeError):
    """Another export or prune holds the pipeline's lock on this database."""


class PoolMismatchError(RuntimeError):
    """A pool's URL leads to a database registered as another pool: the job would record (or
    prune) that pool's rows under the wrong name, or twice."""


class Locked:
    """The pipeline's advisory lock on a session (export and prune never run at once)."""

    def __init__(self, conn: psycopg.Connection[Any], pool: str | None = None) -> None:
        self._conn = conn
        self._pool = pool

    def __enter__(self) -> None:
        row = self._conn.execute(EXPORT_TRY_LOCK, {"key": EXPORT_LOCK_KEY}).fetchone()
        if row is None or not row[0]:
            where = (
                "this database" if self._pool is None else f"the database of pool {self._pool!r}"
            )
            raise ExportBusyError(f"another export or prune-history is running on {where}")

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
def locked_pools(pools: Mapping[str, str]) -> Iterator[dict[str, psycopg.Connection[Any]]]:
    """An autocommit session on every pool's database (``pools``: URL by name), each checked to
    be that pool and holding the pipeline's lock, by name; the locks go with the sessions.

    Raises:
        ExportBusyError: another export or prune holds a pool's lock (no lock is kept).
        PoolMismatchError: a pool's database is registered as another pool.
    """
    with contextlib.ExitStack() as stack:
        sessions: dict[str, psycopg.Connection[Any]] = {}
        for name, url in pools.items():
            conn = stack.enter_context(connect(url, autocommit=True))
            check_pool_identity(conn, name)
            stack.enter_context(Locked(conn, name))
            sessions[name] = conn
        yield sessions
