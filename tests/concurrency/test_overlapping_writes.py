"""Overlapping writes: concurrent idempotent enqueues create each id once (the creator's payload
kept), and enqueues or exclusive claims that take rows in opposite orders both succeed instead of
failing on a deadlock.

Nothing here waits by sleeping: the interleavings are forced, and wait until a backend waits for
a lock."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import NewMessage
from app.core.service import QueueService
from tests.concurrency.helpers import NS, TIMEOUT, wait_for_lock_wait, warm_pool
from tests.helpers import fetch, make_queue, states_of


async def test_concurrent_idempotent_enqueues_create_each_id_once(
    service: QueueService, engine: AsyncEngine
):
    queue = await make_queue(service, NS, "q")
    ids = [f"k{i:03}" for i in range(200)]
    producers = 8
    creators: dict[str, list[int]] = defaultdict(list)
    barrier = asyncio.Barrier(producers)
    await warm_pool(engine, producers)

    async def producer(number: int) -> None:
        await barrier.wait()
        for start in range(0, len(ids), 50):
            chunk = ids[start : start + 50]
            batch = [NewMessage(id=i, payload=str(number).encode()) for i in chunk]
            outcomes = await service.enqueue(NS, "q", batch)
            assert [o.id for o in outcomes] == chunk
            for outcome in outcomes:
                if outcome.created:
                    creators[outcome.id].append(number)

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*(producer(n) for n in range(producers)))
    assert sorted(creators) == ids
    assert {i: len(c) for i, c in creators.items()} == dict.fromkeys(ids, 1)
    rows = await fetch(
        engine, "SELECT id, payload::text AS payload FROM messages WHERE queue_id = :q", q=queue.id
    )
    assert len(rows) == len(ids)
    # The creator's payload is kept: a later duplicate never overwrites it.
    assert {r["id"]: int(r["payload"]) for r in rows} == {i: c[0] for i, c in creators.items()}


async def fast_deadlock_detection(engine: AsyncEngine) -> None:
    """New connections to this test's database detect deadlocks after 100 ms (instead of 1 s);
    the pool is emptied so that the service's connections pick the setting up."""
    async with engine.begin() as conn:
        await conn.execute(
            sa.text(
                "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET deadlock_timeout = %L', "
                "current_database(), '100ms'); END $$"
            )
        )
    await engine.dispose()


async def test_overlapping_enqueues_in_opposite_order_both_succeed(
    service: QueueService, engine: AsyncEngine
):
    queue = await make_queue(service, NS, "q")
    await fast_deadlock_detection(engine)
    insert = sa.text(
        "INSERT INTO messages (queue_id, id, priority, state, visible_at) "
        "VALUES (:q, :id, 0, 'pending', now()) ON CONFLICT DO NOTHING"
    )
    async with engine.connect() as other:
        # The other producer: inserts x, then y, in one transaction (as one enqueue of [x, y]
        # does row by row). It waits long before checking for deadlocks, so that the service's
        # side is the one PostgreSQL picks as the victim.
        await other.execute(sa.text("SET deadlock_timeout = '10s'"))
        other_created = {"x": (await other.execute(insert, {"q": queue.id, "id": "x"})).rowcount}
        racing = asyncio.create_task(
            service.enqueue(NS, "q", [NewMessage(id="y"), NewMessage(id="x")])
        )
        await wait_for_lock_wait(engine)  # the service's enqueue inserted y and waits on x
        other_created["y"] = (await other.execute(insert, {"q": queue.id, "id": "y"})).rowcount
        await other.commit()
        outcomes = await racing
    assert [o.id for o in outcomes] == ["y", "x"]
    for outcome in outcomes:
        assert other_created[outcome.id] + outcome.created == 1, outcome
    assert await states_of(engine, queue) == {"x": "pending", "y": "pending"}


async def test_exclusive_claims_in_opposite_value_order_do_not_fail(
    service: QueueService, engine: AsyncEngine
):
    queue = await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="project")
    await service.enqueue(
        NS,
        "ex",
        [
            # x1 and y1 are not ready: the service's claim sees x2 and y2 as the values' first.
            NewMessage(id="x1", priority=1, metadata={"project": "x"}, delay_seconds=3600),
            NewMessage(id="y2", priority=2, metadata={"project": "y"}),
            NewMessage(id="x2", priority=3, metadata={"project": "x"}),
            NewMessage(id="y1", priority=4, metadata={"project": "y"}, delay_seconds=3600),
        ],
    )
    await fast_deadlock_detection(engine)
    to_running = sa.text(
        "UPDATE messages SET state = 'running', attempts = attempts + 1, "
        "lease_id = gen_random_uuid(), lease_expires_at = now() + interval '1 minute' "
        "WHERE queue_id = :q AND id = :id"
    )
    async with engine.connect() as other:
        # Another consumer's claim of {x1, y1}, granted row by row: x first, then y.
        await other.execute(sa.text("SET deadlock_timeout = '10s'"))
        await other.execute(to_running, {"q": queue.id, "id": "x1"})
        # The service's claim takes y2, then x2: y first, then x.
        racing = asyncio.create_task(service.dequeue(NS, "ex", count=2))
        await wait_for_lock_wait(engine)
        await other.execute(to_running, {"q": queue.id, "id": "y1"})
        await other.commit()
        leased = await racing
    assert leased == []  # both values are taken by the other consumer
    assert await states_of(engine, queue) == {
        "x1": "running",
        "y1": "running",
        "x2": "pending",
        "y2": "pending",
    }
