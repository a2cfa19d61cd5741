"""The pipeline's advisory lock: one export or prune at a time on a database, and on every pool.

The lock is the history's (:mod:`app.store.history_lock`, handed out by
:mod:`app.bootstrap.database`), shared with the prune by SQL alone that the scheduler runs
(docs/operations.md, "History retention"). Held for the whole job on the job's own session
(``pg_try_advisory_lock``): a second job finds it taken and says so instead of waiting. An export
or a prune over several pools (docs/scaling.md) takes every pool's lock before it does anything
(:func:`locked_pools`), so it either has them all or does nothing. Plain psycopg, so pruning
needs neither Spark nor pyarrow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import psycopg

from app.bootstrap.database import history_lock
from app.pipeline.database import APPLICATION_NAME

ExportBusyError = history_lock.ExportBusyError
PoolMismatchError = history_lock.PoolMismatchError
Locked = history_lock.Locked


@contextlib.contextmanager
def locked_pools(pools: Mapping[str, str]) -> Iterator[dict[str, psycopg.Connection[Any]]]:
    """An autocommit session on every pool's database (``pools``: URL by name), each checked to
    be that pool and holding the lock, by name; the locks go with the sessions.

    Raises:
        ExportBusyError: another export or prune holds a pool's lock (no lock is kept).
        PoolMismatchError: a pool's database is registered as another pool.
    """
    with history_lock.locked_pools(pools, APPLICATION_NAME) as sessions:
        yield sessions
