"""Concurrent consumers with overlapping OR filters never lease a message twice, and together
drain every message: on the queue's filter_key (one walk per listed value, each locking with
SKIP LOCKED) and on another key (``metadata @> ANY``), in simple and exclusive queues (where no
two messages of one exclusive value ever run at once: each consumer holds a batch while it
leases the next), ready and due-but-unpromoted alike.

The consumers filter on six overlapping pairs of values (two consumers each), so their claims
are separate statements that contend for the same rows (identical dequeues of one process share
one claim). A consumer that finds nothing while others hold the rows it wants asks again; it
stops once every message has been leased. Nothing here waits by sleeping."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import FilterValue, LeaseRef, NewMessage
from app.core.service import QueueService
from tests.concurrency.helpers import NS, TIMEOUT, enqueue_all, warm_pool
from tests.helpers import execute, fetch, make_queue

TENANTS = [f"t{i}" for i in range(6)]
CONSUMERS = 12


@pytest.mark.parametrize("ordering", ["priority", "due"])
@pytest.mark.parametrize("kind", ["simple", "exclusive"])
@pytest.mark.parametrize("key", ["tenant", "region"], ids=["on-filter-key", "other-key"])
async def test_overlapping_or_filters_never_lease_a_message_twice(
    service: QueueService, engine: AsyncEngine, key: str, kind: str, ordering: str
) -> None:
    config: dict[str, Any] = {
        "filter_keys": ("tenant",),
        "lease_seconds": 600,
        "ordering": ordering,
    }
    if kind == "exclusive":
        config.update(kind="exclusive", exclusive_key="project")
    queue = await make_queue(service, NS, "work", **config)
    total, due = 800, 150

    def message(i: int) -> NewMessage:
        value = TENANTS[i % len(TENANTS)]
        metadata = {"tenant": value, "region": value, "project": f"p{i % 40}"}
        return NewMessage(id=f"m{i:05}", priority=i % 3, metadata=metadata)

    await enqueue_all(service, "work", [message(i) for i in range(total - due)])
    delayed = [message(i) for i in range(total - due, total)]
    await enqueue_all(
        service,
        "work",
        [
            NewMessage(id=m.id, priority=m.priority, metadata=m.metadata, delay_seconds=3600)
            for m in delayed
        ],
    )
    await execute(  # due, but not promoted: the claim's due source takes them
        engine,
        "UPDATE messages SET visible_at = now() WHERE queue_id = :q AND state = 'invisible'",
        q=queue.id,
    )
    leases: list[tuple[int, str, str]] = []
    running: dict[str, str] = {}  # exclusive value -> the id a consumer holds, not acked yet
    overlaps: list[str] = []
    barrier = asyncio.Barrier(CONSUMERS)
    await warm_pool(engine, CONSUMERS)

    async def ack(batch: list[Any]) -> None:
        for m in batch:  # forgotten before its ack commits: running holds only running messages
            if kind == "exclusive":
                del running[m.metadata["project"]]
        if batch:
            results = await service.ack(
                NS, "work", complete=[LeaseRef(m.id, m.lease_id) for m in batch], fail=[]
            )
            assert all(r.ok for r in results)

    async def consumer(number: int) -> None:
        rng = random.Random(number)
        wanted: dict[str, FilterValue] = {key: [TENANTS[number % 6], TENANTS[(number + 1) % 6]]}
        held: list[Any] = []
        await barrier.wait()
        while len(leases) < total:
            # Each batch is held while the next is leased, so other consumers lease meanwhile.
            batch = await service.dequeue(NS, "work", count=rng.randint(1, 8), metadata=wanted)
            for m in batch:
                leases.append((number, m.id, m.lease_id))
                value = m.metadata["project"]
                if kind == "exclusive":
                    if value in running:
                        overlaps.append(f"{m.id} while {running[value]} runs")
                    running[value] = m.id
            await ack(held)
            held = batch
        await ack(held)

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*(consumer(n) for n in range(CONSUMERS)))

    leased = Counter(message_id for _, message_id, _ in leases)
    assert [i for i, n in leased.items() if n > 1] == []
    assert len(leased) == total
    assert overlaps == []
    assert len({number for number, *_ in leases}) >= CONSUMERS // 2  # many consumers got work
    rows = await fetch(
        engine,
        "SELECT state::text AS state, attempts, count(*) AS n FROM messages "
        "WHERE queue_id = :q GROUP BY state, attempts",
        q=queue.id,
    )
    assert rows == [{"state": "completed", "attempts": 1, "n": total}]
