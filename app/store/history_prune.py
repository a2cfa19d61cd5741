"""History retention by SQL alone: the daily partitions of ``message_history`` past retention
are dropped, without ever making the scheduler wait. Used by the scheduler's leader
(``SUNDIAL_HISTORY_RETENTION_DAYS``), by ``sundial history prune``, and by the pipeline's
``sundial pipeline prune-history`` (:mod:`app.pipeline.prune`); none needs Spark or pyarrow.

Which partitions may go (:class:`ExportRule`):

- ``required`` (the pipeline's prune): only partitions whose every row is behind the export
  watermark (exported to the lake), and nothing before the first export;
- ``if_exporting`` (the scheduler's and ``sundial history prune``): the same once the pipeline
  has exported anything from this database (``pipeline_export_runs`` has a committed run), so
  retention never drops history the lake has not taken; before that (no pipeline), every
  partition past retention.

Dropping a partition (``DROP TABLE``, or ``DETACH PARTITION`` without ``CONCURRENTLY``) takes an
ACCESS EXCLUSIVE lock on ``message_history`` itself. It waits for every transaction that has
read the table, and while it waits every statement that wants the table queues behind it — the
scheduler's archive insert too, so the leader stalled: no lease released, nothing expired or
promoted (10 s were seen). A partition therefore leaves in steps that lock ``message_history``
in SHARE UPDATE EXCLUSIVE mode at most, which neither reads nor inserts conflict with::

    check: rows archived at or after the watermark? ── yes ─► kept ("unexported")
      │ no (or no export required)
    DETACH PARTITION ... CONCURRENTLY ─► check again ── yes ─► ATTACH it back ("unexported")
      │ no                                                      (rows archived in between)
    DROP TABLE (a table of its own now, that nobody uses)

``DETACH ... CONCURRENTLY`` waits for the transactions that use ``message_history`` while
holding nothing anyone queues behind, and leaves the partition a table of its own that no
archive can insert into, so the second check is final.

Every statement runs under ``lock_timeout``: a prune that does not get a lock in time (a reader
that outlasts it) stops and reports the partition ``pending``, instead of waiting on. The next
prune carries on where it stopped: it completes a detach interrupted halfway (the partition is
still attached, "pending detach", and new queries no longer see it) with ``DETACH PARTITION ...
FINALIZE``, and it settles a table left detached (dropped if past retention and allowed, else
attached back).

Every prune holds the history's advisory lock (:mod:`app.store.history_lock`), shared with the
pipeline's export: one job at a time. With pools (docs/scaling.md) every pool's database has its
own history and its own export watermark: a prune takes every pool's lock first, then prunes each
pool against its own watermark.

Plain synchronous psycopg on a session of its own (the scheduler runs it in a thread).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Final, Literal, LiteralString

import psycopg
from psycopg import errors, sql
from sqlalchemy.engine import URL

from app.store.history_lock import Locked, connect, locked_pools

log = logging.getLogger("sundial.history.prune")

LOCK_TIMEOUT_SECONDS: Final = 10.0
"""How long one step of a prune waits for a lock before the prune stops (``pending``)."""

APPLICATION_NAME: Final = "sundial-history-prune"
"""How the prune's session shows in ``pg_stat_activity`` (the pipeline's says its own)."""

ExportRule = Literal["required", "if_exporting"]
"""Whether a partition must be exported to the lake before it is dropped (module docstring)."""

Hook = Callable[[str, str], None]
"""Called with a phase ("checked", "detached") and a partition; tests interleave here."""

WATERMARK: Final = "SELECT max(high) FROM pipeline_export_runs WHERE committed_at IS NOT NULL"

TODAY: Final = "SELECT (now() AT TIME ZONE 'UTC')::date"

SET_LOCK_TIMEOUT: Final = "SELECT set_config('lock_timeout', %(timeout)s, false)"

# The partitions of message_history, and whether each is pending detach.
PARTITIONS: Final = """
    SELECT c.relname, i.inhdetachpending FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    JOIN pg_class p ON p.oid = i.inhparent
    WHERE p.relname = 'message_history' AND p.relnamespace = 'public'::regnamespace
    ORDER BY c.relname
"""

# Tables named as history partitions that are not partitions: a prune detached them and stopped
# before it dropped them.
DETACHED: Final = """
    SELECT c.relname FROM pg_class c
    WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
      AND c.relname ~ '^message_history_[0-9]{8}$'
      AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)
    ORDER BY c.relname
"""

_UNEXPORTED: Final = "SELECT EXISTS (SELECT 1 FROM {} WHERE archived_at >= %(watermark)s)"
_DETACH: Final = "ALTER TABLE message_history DETACH PARTITION {} CONCURRENTLY"
_FINALIZE: Final = "ALTER TABLE message_history DETACH PARTITION {} FINALIZE"
_ATTACH: Final = "ALTER TABLE message_history ATTACH PARTITION {} FOR VALUES FROM ({}) TO ({})"
_DROP: Final = "DROP TABLE {}"

_PARTITION_NAME = re.compile(r"message_history_(\d{8})")


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What a prune did with the partitions past retention."""

    dropped: list[str] = field(default_factory=list)
    """Dropped: past retention (and every row exported, where export is required)."""
    unexported: list[str] = field(default_factory=list)
    """Kept: rows archived after the last export (the next export takes them)."""
    pending: list[str] = field(default_factory=list)
    """Left for the next prune: a lock was not granted within the lock timeout."""


@dataclass(frozen=True, slots=True)
class PoolsPrune:
    """What a prune did on every pool (partition names repeat from pool to pool)."""

    pools: dict[str, PruneResult]


def _day(name: str) -> date | None:
    """The day of a history partition's name, or None if it is not one."""
    match = _PARTITION_NAME.fullmatch(name)
    return datetime.strptime(match[1], "%Y%m%d").date() if match else None  # noqa: DTZ007


class _Pruner:
    """One prune on one autocommit session; each step its own statement."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        watermark: datetime | None,
        cutoff: date,
        hook: Hook | None,
    ) -> None:
        self.conn = conn
        self.watermark = watermark
        """Rows archived at or after it are not exported; None: no export is required."""
        self.cutoff = cutoff
        self.hook = hook or (lambda phase, name: None)
        self.result = PruneResult()

    def _run(
        self,
        template: LiteralString,
        name: str,
        *literals: str,
        params: dict[str, Any] | None = None,
    ) -> psycopg.Cursor[Any]:
        # Identifiers come from the catalogue and match _PARTITION_NAME; bounds from a date.
        statement = sql.SQL(template).format(
            sql.Identifier(name), *(sql.Literal(value) for value in literals)
        )
        return self.conn.execute(statement, params)

    def _unexported(self, name: str) -> bool:
        if self.watermark is None:
            return False
        row = self._run(_UNEXPORTED, name, params={"watermark": self.watermark}).fetchone()
        return bool(row and row[0])

    def prune(self, name: str) -> None:
        """A partition past retention: dropped if all of it is exported (or need not be)."""
        if self._unexported(name):
            self.result.unexported.append(name)
            return
        self.hook("checked", name)
        self._run(_DETACH, name)
        self.hook("detached", name)
        self.settle(name)

    def finalize(self, name: str) -> None:
        """A partition a prune began to detach and did not finish: finish, then settle it."""
        self._run(_FINALIZE, name)
        self.settle(name)

    def settle(self, name: str) -> None:
        """A detached table: nothing can add to it, so this check is final. Dropped if it is
        past retention and may go, else attached back where it was."""
        day = _day(name)
        assert day is not None
        unexported = self._unexported(name)
        if day < self.cutoff and not unexported:
            self._run(_DROP, name)
            self.result.dropped.append(name)
            log.info("dropped history partition %s", name)
            return
        upper = day + timedelta(days=1)
        self._run(_ATTACH, name, f"{day.isoformat()}T00:00:00Z", f"{upper.isoformat()}T00:00:00Z")
        if unexported:
            self.result.unexported.append(name)
        log.info("attached history partition %s again (unexported rows: %s)", name, unexported)


def prune_pools(
    pools: Mapping[str, str | URL],
    retention_days: int,
    *,
    export: ExportRule = "if_exporting",
    lock_timeout_seconds: float = LOCK_TIMEOUT_SECONDS,
    application_name: str = APPLICATION_NAME,
    hook: Hook | None = None,
) -> PoolsPrune:
    """Drop every pool's history partitions of days older than ``retention_days`` that may go
    under the ``export`` rule (``pools``: database URL by name), each pool against its own
    watermark, once every pool's lock is held, without blocking the scheduler (see the
    module's docstring).

    Raises:
        app.store.history_lock.ExportBusyError: another export or prune runs on one of the
            pools (nothing is pruned).
        app.store.history_lock.PoolMismatchError: a pool's database is registered as another
            pool.
    """
    with locked_pools(pools, application_name) as sessions:
        return PoolsPrune(
            {
                name: _prune_pool(conn, retention_days, export, lock_timeout_seconds, hook)
                for name, conn in sessions.items()
            }
        )


def prune_database(
    database_url: str | URL,
    retention_days: int,
    *,
    export: ExportRule = "if_exporting",
    lock_timeout_seconds: float = LOCK_TIMEOUT_SECONDS,
    hook: Hook | None = None,
) -> PruneResult:
    """:func:`prune_pools` on one database, whatever pool it is (the scheduler's own: each
    pool's leader prunes its pool).

    Raises:
        app.store.history_lock.ExportBusyError: another export or prune runs on it.
    """
    with connect(database_url, APPLICATION_NAME, autocommit=True) as conn, Locked(conn):
        return _prune_pool(conn, retention_days, export, lock_timeout_seconds, hook)


def _prune_pool(
    conn: psycopg.Connection[Any],
    retention_days: int,
    export: ExportRule,
    lock_timeout_seconds: float,
    hook: Hook | None,
) -> PruneResult:
    """One pool's prune, on its locked autocommit session."""
    conn.execute(SET_LOCK_TIMEOUT, {"timeout": f"{round(lock_timeout_seconds * 1000)}ms"})
    watermark = conn.execute(WATERMARK).fetchone()[0]  # type: ignore[index]
    today: date = conn.execute(TODAY).fetchone()[0]  # type: ignore[index]
    if watermark is None and export == "required":
        return PruneResult()
    pruner = _Pruner(conn, watermark, today - timedelta(days=retention_days), hook)
    partitions = conn.execute(PARTITIONS).fetchall()
    steps: list[tuple[Callable[[str], None], str]] = [
        (pruner.finalize, name) for name, pending in partitions if pending
    ]
    steps += [(pruner.settle, name) for (name,) in conn.execute(DETACHED).fetchall()]
    steps += [
        (pruner.prune, name)
        for name, pending in partitions
        if not pending and (day := _day(name)) is not None and day < pruner.cutoff
    ]
    for step, name in steps:
        try:
            step(name)
        except errors.LockNotAvailable:
            # Stop here: a detach left halfway allows no other, and the next prune
            # carries on from this partition.
            log.warning("prune stopped at %s: a lock was not granted in time", name)
            pruner.result.pending.append(name)
            break
    return pruner.result
