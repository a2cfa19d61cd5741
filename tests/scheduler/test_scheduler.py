"""The scheduler against a real database: leadership, takeover, and each maintenance pass.

Time is moved by shifting a row's timestamps into the past in SQL; progress is awaited through
the scheduler's own tick counter, never with sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from app.bootstrap.database import scheduling
from app.config import Settings
from app.core.models import NewMessage, QueueConfig
from app.core.service import QueueService
from app.scheduler import Scheduler
from app.store.leadership import LEADER_LOCK_KEY

TAKEOVER_LIMIT_SECONDS = 5
# PostgreSQL publishes a backend's table statistics within its idle interval (10 s).
STATISTICS_VISIBLE_SECONDS = 30


def scheduler_settings(database_url: str) -> Settings:
    return Settings(
        database_url=database_url,
        scheduler_tick_seconds=0.02,
        leader_poll_seconds=0.1,
        scheduler_cleanup_seconds=0.05,
    )


@pytest.fixture
async def scheduler(engine: AsyncEngine, database_url: str) -> AsyncIterator[Scheduler]:
    scheduler = Scheduler(
        engine, scheduler_settings(database_url), work=scheduling, node_id="test-leader"
    )
    await scheduler.start()
    await asyncio.wait_for(scheduler.wait_until(leader=True), TAKEOVER_LIMIT_SECONDS)
    yield scheduler
    await scheduler.stop()


# Cleanup passes run every 0.05 s, at the start of a tick of 0.02 s: the tick in flight when a
# test changes something may have done its pass just before the change, and the next pass comes
# at the latest 0.05 s after it, by the fourth tick counted from the change. Five for margin.
TICKS_SPANNING_A_CLEANUP = 5


async def next_ticks(scheduler: Scheduler, n: int = 2) -> None:
    """Wait until the scheduler has completed ``n`` more full ticks."""
    await asyncio.wait_for(scheduler.wait_until(ticks=scheduler.ticks + n), 5)


async def shift(engine: AsyncEngine, column: str, message_id: str) -> None:
    """Move one timestamp of a message a minute into the past."""
    allowed = {"visible_at", "lease_expires_at", "expires_at", "finished_at"}
    assert column in allowed
    async with engine.begin() as conn:
        await conn.execute(
            text(f"UPDATE messages SET {column} = now() - interval '1 minute' WHERE id = :id"),
            {"id": message_id},
        )


@pytest.fixture
async def queue(service: QueueService) -> str:
    await service.create_namespace("ns")
    await service.put_queue("ns", "q", QueueConfig(max_attempts=2, retention_seconds=3600))
    return "q"


async def test_exactly_one_leader_and_takeover_after_leader_stops(
    engine: AsyncEngine, database_url: str
) -> None:
    settings = scheduler_settings(database_url)
    first = Scheduler(engine, settings, work=scheduling, node_id="first")
    second = Scheduler(engine, settings, work=scheduling, node_id="second")
    await first.start()
    await asyncio.wait_for(first.wait_until(leader=True), TAKEOVER_LIMIT_SECONDS)
    await second.start()
    # The follower keeps polling but never leads while the first holds the lock.
    await asyncio.wait_for(first.wait_until(ticks=first.ticks + 10), 5)
    assert first.is_leader
    assert not second.is_leader

    await first.stop()
    assert not first.is_leader
    await asyncio.wait_for(second.wait_until(leader=True), TAKEOVER_LIMIT_SECONDS)
    await asyncio.wait_for(second.wait_until(ticks=1), 5)
    await second.stop()


async def _first_to_lead(*schedulers: Scheduler) -> Scheduler:
    """Whichever of ``schedulers`` is (or becomes) the leader first."""
    waits = {asyncio.ensure_future(s.wait_until(leader=True)): s for s in schedulers}
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    return waits[done.pop()]


async def test_takeover_when_leader_connection_dies(engine: AsyncEngine, database_url: str) -> None:
    settings = scheduler_settings(database_url)
    first = Scheduler(engine, settings, work=scheduling, node_id="doomed")
    second = Scheduler(engine, settings, work=scheduling, node_id="heir")
    await first.start()
    await asyncio.wait_for(first.wait_until(leader=True), TAKEOVER_LIMIT_SECONDS)
    await second.start()
    try:
        # Kill the leader's backend, as a crash or network cut would.
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks "
                    "WHERE locktype = 'advisory' AND granted"
                )
            )
        await asyncio.wait_for(first.wait_until(leader=False), TAKEOVER_LIMIT_SECONDS)
        # Both contend again; either may win the lock, on a new session, but only one.
        leader = await asyncio.wait_for(_first_to_lead(first, second), TAKEOVER_LIMIT_SECONDS)
        await asyncio.wait_for(leader.wait_until(ticks=leader.ticks + 1), TAKEOVER_LIMIT_SECONDS)
        assert [s.node_id for s in (first, second) if s.is_leader] == [leader.node_id]
    finally:
        await first.stop()
        await second.stop()


@contextlib.asynccontextmanager
async def hold_leader_lock(database_url: str) -> AsyncIterator[AsyncConnection]:
    """A session that takes the leader lock like a leader would, then does nothing more."""
    holder = create_async_engine(database_url, poolclass=NullPool)
    conn = await holder.connect()
    await conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": LEADER_LOCK_KEY})
    await conn.commit()
    try:
        yield conn
    finally:
        with contextlib.suppress(DBAPIError):
            await conn.close()
        await holder.dispose()


async def test_a_stalled_leader_is_fenced_and_replaced(
    database_url: str, engine: AsyncEngine
) -> None:
    # A leader frozen or cut off from the database keeps its session, and with it the lock.
    settings = scheduler_settings(database_url).model_copy(update={"leader_stale_seconds": 0.5})
    async with hold_leader_lock(database_url) as stalled:
        heir = Scheduler(engine, settings, work=scheduling, node_id="heir")
        await heir.start()
        try:
            await asyncio.wait_for(heir.wait_until(leader=True), TAKEOVER_LIMIT_SECONDS)
            await asyncio.wait_for(heir.wait_until(ticks=1), 5)
        finally:
            await heir.stop()
        # The stalled session was ended: when it wakes up, it learns it no longer leads.
        with pytest.raises(DBAPIError):
            await stalled.execute(text("SELECT 1"))


async def test_a_leader_busy_in_a_long_statement_is_not_fenced(
    database_url: str, engine: AsyncEngine
) -> None:
    settings = scheduler_settings(database_url).model_copy(update={"leader_stale_seconds": 0.5})
    async with hold_leader_lock(database_url) as busy:
        follower = Scheduler(engine, settings, work=scheduling, node_id="patient")
        statement = asyncio.create_task(busy.execute(text("SELECT pg_sleep(2)")))
        await follower.start()
        try:
            await statement  # two seconds of follower polls, four times the stale limit
            assert not follower.is_leader
        finally:
            await follower.stop()
        await busy.execute(text("SELECT 1"))  # its session is intact


async def test_a_working_leader_is_never_fenced(engine: AsyncEngine, database_url: str) -> None:
    settings = scheduler_settings(database_url).model_copy(update={"leader_stale_seconds": 0.2})
    leader = Scheduler(engine, settings, work=scheduling, node_id="worker")
    follower = Scheduler(engine, settings, work=scheduling, node_id="standby")
    await leader.start()
    await asyncio.wait_for(leader.wait_until(leader=True), TAKEOVER_LIMIT_SECONDS)
    await follower.start()
    try:
        # 50 ticks of 0.02 s: the follower polls every 0.1 s, long past the stale limit.
        await asyncio.wait_for(leader.wait_until(ticks=leader.ticks + 50), 10)
        assert leader.is_leader
        assert not follower.is_leader
    finally:
        await follower.stop()
        await leader.stop()


async def test_due_delayed_message_is_promoted(
    scheduler: Scheduler, service: QueueService, engine: AsyncEngine, queue: str
) -> None:
    await service.enqueue("ns", queue, [NewMessage(id="later", delay_seconds=3600)])
    await next_ticks(scheduler)
    assert (await service.get_message("ns", queue, "later")).state == "invisible"
    await shift(engine, "visible_at", "later")
    await next_ticks(scheduler)
    assert (await service.get_message("ns", queue, "later")).state == "pending"


async def test_expired_lease_is_released_then_errored(
    scheduler: Scheduler, service: QueueService, engine: AsyncEngine, queue: str
) -> None:
    await service.enqueue("ns", queue, [NewMessage(id="m")])
    (lease,) = await service.dequeue("ns", queue)
    await shift(engine, "lease_expires_at", "m")
    await next_ticks(scheduler)
    released = await service.get_message("ns", queue, "m")
    assert (released.state, released.attempts, released.last_error) == (
        "pending",
        1,
        "lease expired",
    )
    # Second and last attempt (max_attempts=2) also expires: dead letter.
    (lease,) = await service.dequeue("ns", queue)
    assert lease.attempt == 2
    await shift(engine, "lease_expires_at", "m")
    await next_ticks(scheduler)
    dead = await service.get_message("ns", queue, "m")
    assert dead.state == "errored"
    assert dead.finished_at is not None


async def test_message_past_expires_at_is_canceled(
    scheduler: Scheduler, service: QueueService, engine: AsyncEngine, queue: str
) -> None:
    await service.enqueue("ns", queue, [NewMessage(id="m", ttl_seconds=3600)])
    await shift(engine, "expires_at", "m")
    await next_ticks(scheduler)
    message = await service.get_message("ns", queue, "m")
    assert (message.state, message.last_error) == ("canceled", "expired")


async def test_finished_messages_past_retention_move_to_history(
    scheduler: Scheduler, service: QueueService, engine: AsyncEngine, queue: str
) -> None:
    await service.enqueue("ns", queue, [NewMessage(id="old"), NewMessage(id="recent")])
    for lease in await service.dequeue("ns", queue, count=2):
        await service.complete("ns", queue, lease.id, lease.lease_id)
    await shift(engine, "finished_at", "old")
    # Retention is an hour: "old" finished a minute ago, so make retention shorter than that.
    await service.update_queue("ns", queue, {"retention_seconds": 30})
    await next_ticks(scheduler, TICKS_SPANNING_A_CLEANUP)
    async with engine.connect() as conn:
        live = (await conn.execute(text("SELECT id FROM messages ORDER BY id"))).scalars().all()
        history = (
            await conn.execute(
                text("SELECT namespace, queue, id, state::text FROM message_history")
            )
        ).all()
    assert live == ["recent"]
    assert [tuple(row) for row in history] == [("ns", "q", "old", "completed")]


async def test_the_leader_analyzes_the_hot_table_after_a_burst(
    scheduler: Scheduler, service: QueueService, engine: AsyncEngine, queue: str
) -> None:
    # Statistics taken while the queue was empty make the claim sort the whole backlog; after
    # a burst the leader must refresh them itself, without waiting for autovacuum's naptime.
    async def manual_analyzes() -> int:
        async with engine.connect() as conn:
            count = await conn.execute(
                text("SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'messages'")
            )
            return int(count.scalar_one())

    # Autovacuum would analyze this burst too (the table's analyze scale factor is 2%), and when
    # it comes first the leader rightly finds nothing stale: keep it out of this test's table.
    async with engine.begin() as conn:
        await conn.execute(text("ALTER TABLE messages SET (autovacuum_enabled = false)"))
    before = await manual_analyzes()
    for _batch in range(3):
        await service.enqueue("ns", queue, [NewMessage() for _ in range(1000)])
    # A backend publishes its table statistics when it goes idle, but at most once a second;
    # otherwise only after PostgreSQL's idle interval (10 s). The leader checks them at each
    # heartbeat (1 s). So wait on the leader's own ticks, bounded well past both.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STATISTICS_VISIBLE_SECONDS
    while await manual_analyzes() == before:
        assert loop.time() < deadline, "the leader never analyzed the table after the burst"
        await next_ticks(scheduler, 5)
