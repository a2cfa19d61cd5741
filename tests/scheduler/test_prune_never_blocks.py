"""Pruning history never makes the scheduler wait, and neither does making a history partition.

Dropping a partition of ``message_history`` used to take an ACCESS EXCLUSIVE lock on the table
itself: it waited behind any transaction that had read it, and the scheduler's archive insert
queued behind the drop, so the leader stalled (no lease released, nothing expired or promoted).
Here a reader holds ``message_history`` open while ``prune_history`` runs in a thread; the test
waits until the prune's session waits for a lock (``pg_stat_activity``), then runs the
scheduler's cleanup pass, which must finish while the prune still waits. Nothing sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import NewMessage
from app.core.service import QueueService
from app.pipeline.prune import PruneResult, prune_history
from app.store import maintenance
from bench.pipeline_data import generate_history
from tests.helpers import make_queue, scalar

TIMEOUT = 30.0  # a hang fails the test instead of stalling the run
PATIENT = 120.0  # the prune's lock_timeout where it must wait for the reader

PARTITIONS = """
    SELECT c.relname, i.inhdetachpending FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'message_history'::regclass ORDER BY 1
"""


@pytest.fixture
def dsn(postgres: Any, database_url: str) -> str:
    return str(postgres.dsn(make_url(database_url).database))


@pytest.fixture
def db(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True, options="-c TimeZone=UTC") as conn:
        yield conn


def partitions(db: psycopg.Connection[Any]) -> dict[str, bool]:
    """Every partition of message_history, and whether it is pending detach."""
    return dict(db.execute(PARTITIONS).fetchall())  # type: ignore[arg-type]


def partition_of(db: psycopg.Connection[Any], message_id: str) -> str:
    """The history partition that holds ``message_id``."""
    return str(
        db.execute(
            "SELECT tableoid::regclass::text FROM message_history WHERE id = %s", (message_id,)
        ).fetchone()[0]  # type: ignore[index]
    )


def old_exported_history(db: psycopg.Connection[Any]) -> list[str]:
    """History of 40 days ago, exported (a committed export run past it): the partitions past
    the 30 days of retention (some empty), in name order."""
    generate_history(db, 50, days=0.5, end_days_ago=40.0)
    db.execute(
        "INSERT INTO pipeline_export_runs (low, high, committed_at, rows, files)"
        " VALUES ('1970-01-01T00:00:00Z', now(), now(), 50, 1)"
    )
    cutoff = maintenance.partition_name(today(db) - timedelta(days=30))
    old = sorted(name for name in partitions(db) if name < cutoff)
    assert partition_of(db, "m-1") in old
    return old


def today(db: psycopg.Connection[Any]) -> date:
    return db.execute("SELECT (now() AT TIME ZONE 'UTC')::date").fetchone()[0]  # type: ignore[index]


def open_reader(dsn: str, query: str) -> psycopg.Connection[Any]:
    """A session whose open transaction has read message_history (and holds its locks)."""
    reader = psycopg.connect(dsn, options="-c TimeZone=UTC")
    reader.execute(query).fetchall()
    return reader


async def prune_lock_wait(engine: AsyncEngine) -> str:
    """Wait until the prune's session (application_name sundial-pipeline) waits for a lock;
    returns what it waits on."""
    query = (
        "SELECT wait_event FROM pg_stat_activity WHERE datname = current_database()"
        " AND application_name = 'sundial-pipeline' AND wait_event_type = 'Lock'"
    )
    async with asyncio.timeout(TIMEOUT):
        while True:
            waiting = await scalar(engine, query)
            if waiting is not None:
                return str(waiting)


async def finished_message(service: QueueService) -> None:
    """A message completed in a queue that keeps finished messages 0 s: the archive's work."""
    await make_queue(service, "ns", "q", retention_seconds=0)
    await service.enqueue("ns", "q", [NewMessage(id="done")])
    (leased,) = await service.dequeue("ns", "q")
    await service.complete("ns", "q", "done", leased.lease_id)


async def archive(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return await asyncio.wait_for(maintenance.archive_finished(conn), TIMEOUT)


READERS = {
    # An analyst's look at today's history: it locks message_history and today's partition only.
    "recent": "SELECT count(*) FROM message_history WHERE finished_at >= '{today}T00:00:00Z'",
    # A read of all of it: every partition too.
    "everything": "SELECT count(*) FROM message_history",
}


@pytest.mark.parametrize("reader_query", READERS.values(), ids=READERS.keys())
async def test_the_archive_goes_on_while_a_prune_waits_for_a_reader(
    service: QueueService,
    engine: AsyncEngine,
    database_url: str,
    dsn: str,
    db: psycopg.Connection[Any],
    reader_query: str,
) -> None:
    old = old_exported_history(db)
    assert await archive(engine) == 0  # today's partitions and those ahead exist now
    await finished_message(service)
    reader = open_reader(dsn, reader_query.format(today=today(db).isoformat()))
    try:
        prune = asyncio.create_task(
            asyncio.to_thread(prune_history, database_url, 30, lock_timeout_seconds=PATIENT)
        )
        await prune_lock_wait(engine)

        assert await archive(engine) == 1  # the scheduler's cleanup, meanwhile
        assert not prune.done()  # ... while the prune still waits for the reader
        assert await prune_lock_wait(engine)
    finally:
        reader.close()
    result = await asyncio.wait_for(prune, TIMEOUT)

    assert result == PruneResult(dropped=old)
    assert not set(old) & set(partitions(db))
    assert db.execute("SELECT to_regclass(%s)", (old[0],)).fetchone() == (None,)
    assert await scalar(engine, "SELECT count(*) FROM message_history WHERE id = 'done'") == 1


async def test_a_prune_that_gives_up_is_finished_by_the_next(
    engine: AsyncEngine, database_url: str, dsn: str, db: psycopg.Connection[Any]
) -> None:
    old = old_exported_history(db)
    reader = open_reader(dsn, READERS["everything"])
    try:
        # The reader outlasts the prune's lock_timeout: the first detach is left halfway.
        assert prune_history(database_url, 30, lock_timeout_seconds=0.2) == PruneResult(
            pending=old[:1]
        )
        assert partitions(db)[old[0]] is True  # pending detach: new queries do not see it
    finally:
        reader.close()

    # The next prune completes that detach (FINALIZE), checks the table and drops it, and the
    # others after it.
    assert prune_history(database_url, 30) == PruneResult(dropped=old)
    assert not set(old) & set(partitions(db))
    assert db.execute("SELECT to_regclass(%s)", (old[0],)).fetchone() == (None,)


def late_archive(db: psycopg.Connection[Any], into: str) -> Callable[[str, str], None]:
    """A hook that archives one more message into partition ``into`` once it is checked, as a
    late archive between the check and the detach would (after the export: unexported)."""

    def hook(phase: str, partition: str) -> None:
        if (phase, partition) == ("checked", into):
            db.execute(
                f"INSERT INTO {partition} (namespace, queue, queue_id, id, seq, priority, state,"
                " payload, metadata, attempts, max_attempts, enqueued_at, finished_at)"
                " SELECT namespace, queue, queue_id, 'late', 0, 0, state, payload, metadata,"
                " attempts, max_attempts, enqueued_at, finished_at FROM message_history"
                " WHERE id = 'm-1'"
            )

    return hook


async def test_rows_archived_between_the_check_and_the_detach_are_kept(
    database_url: str, db: psycopg.Connection[Any]
) -> None:
    old = old_exported_history(db)
    late = partition_of(db, "m-1")
    result = prune_history(database_url, 30, hook=late_archive(db, late))
    assert result == PruneResult(dropped=[n for n in old if n != late], unexported=[late])
    assert partitions(db)[late] is False  # attached again, whole
    kept = db.execute(f"SELECT count(*) FROM {late}").fetchone()[0]  # type: ignore[index]
    assert db.execute("SELECT count(*) FROM message_history").fetchone() == (kept,)
    assert db.execute("SELECT count(*) FROM message_history WHERE id = 'late'").fetchone() == (1,)


async def test_a_table_left_detached_is_dropped_or_attached_again(
    database_url: str, db: psycopg.Connection[Any]
) -> None:
    """A prune that stopped between the detach and the drop left a table of its own: the next
    prune drops it when every row was exported, and attaches it back otherwise."""
    old_exported_history(db)
    exported = partition_of(db, "m-1")
    generate_history(db, 5, days=0.01, end_days_ago=45.5, offset=100)  # archived after the export
    late = partition_of(db, "m-101")
    unexported = sorted({partition_of(db, f"m-{n}") for n in range(101, 106)})
    cutoff = maintenance.partition_name(today(db) - timedelta(days=30))
    old = sorted(name for name in partitions(db) if name < cutoff)
    for name in (exported, late):
        db.execute(f"ALTER TABLE message_history DETACH PARTITION {name}")
    assert db.execute("SELECT count(*) FROM message_history WHERE id = 'm-101'").fetchone() == (0,)

    result = prune_history(database_url, 30)
    assert (sorted(result.dropped), sorted(result.unexported), result.pending) == (
        [name for name in old if name not in unexported],
        unexported,
        [],
    )
    assert partitions(db)[late] is False
    assert db.execute("SELECT to_regclass(%s)", (exported,)).fetchone() == (None,)
    assert db.execute("SELECT count(*) FROM message_history").fetchone() == (5,)


async def test_the_archive_makes_a_partition_while_history_is_being_read(
    service: QueueService, engine: AsyncEngine, dsn: str, db: psycopg.Connection[Any]
) -> None:
    """The partition for a day that has none is made without waiting for readers of
    message_history (CREATE TABLE ... PARTITION OF would wait for every one of them)."""
    await finished_message(service)
    finished = today(db) - timedelta(days=10)
    db.execute(
        "UPDATE messages SET finished_at = %s::date + interval '1 hour' WHERE id = 'done'",
        (finished,),
    )
    reader = open_reader(dsn, READERS["everything"])
    try:
        assert await archive(engine) == 1
        assert maintenance.partition_name(finished) in partitions(db)
    finally:
        reader.close()
    assert await scalar(engine, "SELECT count(*) FROM message_history WHERE id = 'done'") == 1
