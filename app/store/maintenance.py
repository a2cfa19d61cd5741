"""The scheduler's work: promotion of due messages, release of expired leases, expiry, the fold
of the count deltas into the counts, and the move of finished messages into history. Each
transition is one pass over one guarded, batched statement and returns how many messages it
changed.

All of it is safe to run concurrently with itself (``FOR UPDATE SKIP LOCKED``, state guards, row
locks), so correctness never depends on there being exactly one scheduler; leadership only
avoids waste.
"""

from __future__ import annotations

import logging
from datetime import date, timedelta

from psycopg import errors as pg_errors
from sqlalchemy import TextClause
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.maintenance import TickResult
from app.core.states import Event
from app.store import periodic_firing
from app.store.sql import listeners, scheduler
from app.store.sql.guards import from_states

log = logging.getLogger("sundial.scheduler")

BATCH = 5000
"""Messages one statement changes at most; a pass repeats while batches come back full."""

PARTITION_LOCK_TIMEOUT_MS = 200
"""How long making a history partition may wait for its lock on ``message_history``."""


async def _repeat(conn: AsyncConnection, stmt: TextClause, params: dict[str, object]) -> int:
    """Run a batched statement (committing each batch) until a batch comes back short."""
    changed = 0
    while True:
        result = await conn.execute(stmt, {**params, "batch": BATCH})
        # Each statement returns one (queue_id, n) row per queue it changed.
        batch: int = sum(row.n for row in result)
        await conn.commit()
        changed += batch
        if batch < BATCH:
            return changed


async def promote_due(conn: AsyncConnection) -> int:
    """invisible -> pending for every message whose ``visible_at`` has passed."""
    return await _repeat(
        conn, scheduler.MESSAGES_PROMOTE_IF_DUE, {"from_states": from_states(Event.PROMOTE)}
    )


async def release_expired_leases(conn: AsyncConnection) -> int:
    """running -> pending/invisible/errored for every lease past ``lease_expires_at``."""
    return await _repeat(
        conn,
        scheduler.MESSAGES_RELEASE_IF_LEASE_EXPIRED,
        {"from_states": from_states(Event.LEASE_EXPIRE)},
    )


async def expire_messages(conn: AsyncConnection) -> int:
    """live -> canceled (``last_error = 'expired'``) for every message past ``expires_at``."""
    return await _repeat(
        conn, scheduler.MESSAGES_CANCEL_IF_EXPIRED, {"from_states": from_states(Event.EXPIRE)}
    )


async def redrive_dead_letters(conn: AsyncConnection) -> int:
    """errored -> canceled, and a copy pending in the queue's ``dead_letter_queue``, for every
    queue that has one."""
    return await _repeat(
        conn,
        scheduler.MESSAGES_REDRIVE_DEAD_LETTERS,
        {"from_states": from_states(Event.REDRIVE)},
    )


async def fold_counts(conn: AsyncConnection) -> int:
    """Move the count deltas appended since the last fold into ``queue_state_counts``; returns
    how many delta rows it folded. Reads add up both tables, so this changes no count anyone
    reads: it keeps the deltas, which every read scans, to what changed in one tick."""
    folded: int = (await conn.execute(scheduler.QUEUE_STATE_COUNTS_FOLD)).scalar_one()
    await conn.commit()
    return folded


async def tick(conn: AsyncConnection) -> TickResult:
    """One pass of the time-driven transitions, then the fold of the counts they (and every
    other change since the last tick) changed."""
    result = TickResult(
        promoted=await promote_due(conn),
        released=await release_expired_leases(conn),
        expired=await expire_messages(conn),
        redriven=await redrive_dead_letters(conn),
        fired=await periodic_firing.fire_due(conn),
    )
    await fold_counts(conn)
    return result


def partition_name(day: date) -> str:
    """The history partition that holds messages finished on ``day`` (UTC)."""
    return f"message_history_{day:%Y%m%d}"


async def ensure_history_partitions(conn: AsyncConnection, days: set[date]) -> set[date]:
    """Create the daily history partitions for ``days`` that do not exist yet; returns the days
    whose partition is still missing (the next cleanup tries them again).

    A partition is made as a table of its own, then attached. ``CREATE TABLE ... PARTITION OF``
    would lock ``message_history`` in ACCESS EXCLUSIVE mode: it would wait for every transaction
    that has read history (an analyst's query, an export), and the leader with it. ``ATTACH
    PARTITION`` takes SHARE UPDATE EXCLUSIVE, which reads and inserts do not conflict with; it
    waits only for other changes to the table's partitions (a prune's detach), and then at
    most ``PARTITION_LOCK_TIMEOUT_MS``. A name still taken by a table that a prune detached and
    has not dropped yet is tried again later too.
    """
    existing = {row.relname for row in await conn.execute(scheduler.HISTORY_PARTITIONS)}
    await conn.commit()
    missing = set()
    for day in sorted(days):
        name = partition_name(day)
        if name in existing:
            continue
        # Identifiers and bounds come from a date, never from input.
        try:
            await conn.execute(scheduler.history_partition_lock_timeout(PARTITION_LOCK_TIMEOUT_MS))
            await conn.execute(scheduler.history_partition_create(name))
            await conn.execute(scheduler.history_partition_attach(name, day))
            await conn.commit()
        except sa_exc.DBAPIError as error:
            await conn.rollback()
            if not isinstance(error.orig, pg_errors.LockNotAvailable | pg_errors.DuplicateTable):
                raise
            log.warning("history partition %s not made yet: %s", name, error.orig)
            missing.add(day)
    return missing


async def archive_finished(conn: AsyncConnection, days_ahead: int = 3) -> int:
    """Move finished messages past their queue's retention into ``message_history``.

    Partitions are made for the days the next batch touches and for ``days_ahead`` days from
    today, so the insert never finds its partition missing; when one cannot be made now, the
    rest waits for the next cleanup.
    """
    today = (await conn.execute(scheduler.DATABASE_TODAY)).scalar_one()
    await conn.commit()
    await ensure_history_partitions(conn, {today + timedelta(days=n) for n in range(days_ahead)})
    moved = 0
    params = {"batch": BATCH}
    while True:
        days = {row.day for row in await conn.execute(scheduler.MESSAGES_ARCHIVE_DAYS, params)}
        await conn.commit()
        if not days:
            return moved
        if await ensure_history_partitions(conn, days):
            return moved  # the next cleanup archives the rest
        result = await conn.execute(scheduler.MESSAGES_ARCHIVE_PAST_RETENTION, params)
        await conn.commit()
        moved += result.rowcount
        if result.rowcount < BATCH:
            return moved


async def prune_listeners(conn: AsyncConnection) -> int:
    """Forget notification registrations of LISTEN connections that no longer exist."""
    result = await conn.execute(listeners.LISTENERS_PRUNE)
    await conn.commit()
    return result.rowcount


async def analyze_if_stale(conn: AsyncConnection) -> bool:
    """ANALYZE the hot table when much of it changed since its statistics were taken.

    The claim's plan depends on them: with statistics from when a queue was empty, the planner
    expects a handful of pending rows and sorts them all instead of walking
    ``messages_pending_idx`` in order, which after a burst of enqueues makes every dequeue sort
    the whole backlog (90 ms per claim over 100k messages, measured). Autovacuum analyzes too,
    but only after its naptime (a minute by default). ``SKIP_LOCKED``: never wait behind a
    vacuum; the next check tries again. Returns whether it analyzed.
    """
    stale = (await conn.execute(scheduler.MESSAGES_STATISTICS_STALE)).scalar()
    await conn.commit()
    if not stale:
        return False
    await conn.execute(scheduler.MESSAGES_ANALYZE)
    await conn.commit()
    return True
