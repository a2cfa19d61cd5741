"""The pipeline's advisory lock: one export or prune at a time on a database.

Held for the whole job on the job's own session (``pg_try_advisory_lock``): a second job finds
it taken and says so instead of waiting. Plain psycopg, so pruning needs neither Spark nor
pyarrow.
"""

from __future__ import annotations

from typing import Any, Final

import psycopg

EXPORT_LOCK_KEY: Final = 0x5D1A1_E7
"""Advisory lock held while an export or a prune runs, so only one runs at a time."""

EXPORT_TRY_LOCK: Final = "SELECT pg_try_advisory_lock(%(key)s)"
EXPORT_UNLOCK: Final = "SELECT pg_advisory_unlock(%(key)s)"


class ExportBusyError(RuntimeError):
    """Another export or prune holds the pipeline's lock on this database."""


class Locked:
    """The pipeline's advisory lock on a session (export and prune never run at once)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        row = self._conn.execute(EXPORT_TRY_LOCK, {"key": EXPORT_LOCK_KEY}).fetchone()
        if row is None or not row[0]:
            raise ExportBusyError("another export or prune-history is running on this database")

    def __exit__(self, *exc: object) -> None:
        self._conn.execute(EXPORT_UNLOCK, {"key": EXPORT_LOCK_KEY})
