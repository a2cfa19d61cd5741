"""Deleting dead letters with a limit, concurrently: each delete takes its own messages (those
another holds are passed over), deletes exactly as many as it reports, never more than its
limit and, all together, never more than there are.

The overlap is forced, not hoped for: one delete runs in a transaction left open (its rows
locked) while the other runs; then many run at once as well."""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import NewMessage, Queue
from app.core.service import QueueService
from app.store.sql.transitions import MESSAGES_DELETE_DEAD_LETTERS
from tests.concurrency.helpers import NS, TIMEOUT, enqueue_all, warm_pool
from tests.helpers import execute, fetch, make_queue

LIMIT = 40


async def _dead_letters(service: QueueService, engine: AsyncEngine, count: int) -> Queue:
    """A queue holding ``count`` errored messages d000, d001, … finished in that order."""
    queue = await make_queue(service, NS, "q", max_attempts=1)
    await enqueue_all(service, "q", [NewMessage(id=f"d{i:03}") for i in range(count)])
    await execute(
        engine,
        "UPDATE messages SET state = 'errored', attempts = 1, last_error = 'boom',"
        " finished_at = now() - make_interval(secs => 10000 - seq) WHERE queue_id = :q",
        q=queue.id,
    )
    return queue


async def _left(engine: AsyncEngine, queue: Queue) -> list[str]:
    rows = await fetch(
        engine, "SELECT id FROM messages WHERE queue_id = :q ORDER BY id", q=queue.id
    )
    return [row["id"] for row in rows]


async def test_a_delete_passes_over_what_another_holds(service: QueueService, engine: AsyncEngine):
    total = 2 * LIMIT + 5
    queue = await _dead_letters(service, engine, total)
    ids = [f"d{i:03}" for i in range(total)]
    params = {"queue_id": queue.id, "states": ["errored"], "ids": None, "limit": LIMIT}
    async with asyncio.timeout(TIMEOUT), engine.connect() as held:
        # The first delete deletes the oldest LIMIT and keeps them locked, uncommitted ...
        first = (await held.execute(MESSAGES_DELETE_DEAD_LETTERS, params)).scalars().all()
        assert sorted(first) == ids[:LIMIT]
        # ... the second, meanwhile, takes the next LIMIT instead of waiting for them.
        second = await service.delete_dead_letters(NS, "q", ["errored"], limit=LIMIT)
        assert second == LIMIT
        assert await _left(engine, queue) == ids[:LIMIT] + ids[2 * LIMIT :]
        await held.commit()
    assert await _left(engine, queue) == ids[2 * LIMIT :]
    # Fewer than the limit are left: a delete takes what there is.
    assert await service.delete_dead_letters(NS, "q", ["errored"], limit=LIMIT) == 5
    assert await _left(engine, queue) == []


async def test_concurrent_deletes_delete_exactly_what_they_report(
    service: QueueService, engine: AsyncEngine
):
    deleters = 6
    total = 2 * LIMIT + 7  # fewer than deleters * LIMIT: some come back short
    queue = await _dead_letters(service, engine, total)
    await warm_pool(engine, deleters)
    barrier = asyncio.Barrier(deleters)

    async def delete() -> int:
        await barrier.wait()
        return await service.delete_dead_letters(NS, "q", ["errored"], limit=LIMIT)

    async with asyncio.timeout(TIMEOUT):
        reported = await asyncio.gather(*(delete() for _ in range(deleters)))
    assert all(0 <= n <= LIMIT for n in reported), reported
    left = await _left(engine, queue)
    assert sum(reported) == total - len(left)
    # Whatever a delete passed over because another held it is still there to delete.
    assert await service.delete_dead_letters(NS, "q", ["errored"], limit=100_000) == len(left)
    assert await _left(engine, queue) == []
