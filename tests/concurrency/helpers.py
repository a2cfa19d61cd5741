"""What the concurrency tests share: their namespace, a timeout that turns a hang into a
failure, a pool warmed up before consumers start, bulk enqueue, and a wait (by polling, never by
sleeping) until a backend waits for a lock."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import NewMessage
from app.core.service import QueueService

NS = "ns"
TIMEOUT = 60  # seconds; a hang fails the test instead of stalling the run


async def warm_pool(engine: AsyncEngine, connections: int) -> None:
    """Open ``connections`` pooled connections up front, so that no consumer is slowed down by
    connecting while the others already run."""
    opened = [await engine.connect() for _ in range(connections)]
    for conn in opened:
        await conn.close()


async def enqueue_all(service: QueueService, queue: str, messages: list[NewMessage]) -> None:
    """Enqueue ``messages`` into ``queue`` of :data:`NS` in batches of 1000; each is created."""
    for start in range(0, len(messages), 1000):
        outcomes = await service.enqueue(NS, queue, messages[start : start + 1000])
        assert all(o.created for o in outcomes)


async def wait_for_lock_wait(engine: AsyncEngine, pid: int | None = None) -> int:
    """Poll until a backend of this database (``pid``, or any) waits for a lock; return its pid.

    This is how a test knows that a concurrent statement is queued behind another transaction.
    """
    query = sa.text(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND (CAST(:pid AS integer) IS NULL OR pid = :pid)"
    )
    async with asyncio.timeout(10), engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        while True:
            found = (await conn.execute(query, {"pid": pid})).scalar()
            if found is not None:
                return found
