"""No message is leased twice: many asyncio consumers, each claim on its own pooled connection,
started together on a barrier, drain a queue whose head they all contend for; every message is
leased exactly once and completed.

Nothing here waits by sleeping."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import LeaseRef, NewMessage
from app.core.service import QueueService
from app.core.states import State
from tests.concurrency.helpers import NS, TIMEOUT, enqueue_all, warm_pool
from tests.helpers import fetch, make_queue


async def test_no_message_is_leased_twice(service: QueueService, engine: AsyncEngine):
    queue = await make_queue(service, NS, "work", lease_seconds=600)
    total, consumers = 2000, 12
    ids = [f"m{i:05}" for i in range(total)]
    # Few distinct priorities: consumers contend for the same head of the queue.
    await enqueue_all(service, "work", [NewMessage(id=i, priority=int(i[1:]) % 5) for i in ids])
    leases: list[tuple[int, str, str, int]] = []  # (consumer, id, lease_id, attempt)
    refused: list[str] = []
    in_flight = max_in_flight = 0
    barrier = asyncio.Barrier(consumers)
    await warm_pool(engine, consumers)

    async def consumer(number: int) -> None:
        nonlocal in_flight, max_in_flight
        rng = random.Random(number)
        await barrier.wait()
        while True:
            in_flight += 1
            max_in_flight = max(max_in_flight, in_flight)
            try:
                batch = await service.dequeue(NS, "work", count=rng.randint(1, 20))
            finally:
                in_flight -= 1
            if not batch:
                return
            leases.extend((number, m.id, m.lease_id, m.attempt) for m in batch)
            if number % 2:
                results = await service.ack(
                    NS, "work", complete=[LeaseRef(m.id, m.lease_id) for m in batch], fail=[]
                )
                refused.extend(r.id for r in results if not r.ok)
            else:
                for m in batch:
                    done = await service.complete(NS, "work", m.id, m.lease_id)
                    assert done.state is State.COMPLETED

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*(consumer(n) for n in range(consumers)))

    assert refused == []
    leased_ids = Counter(message_id for _, message_id, _, _ in leases)
    assert len(leases) == total
    assert set(leased_ids) == set(ids)
    assert [i for i, n in leased_ids.items() if n > 1] == []
    assert len({lease for _, _, lease, _ in leases}) == total
    assert {attempt for *_, attempt in leases} == {1}
    assert max_in_flight >= 8  # dequeues really overlapped
    assert len({number for number, *_ in leases}) >= 8  # and many consumers got work
    rows = await fetch(
        engine,
        "SELECT state::text AS state, attempts, count(*) AS n FROM messages "
        "WHERE queue_id = :q GROUP BY state, attempts",
        q=queue.id,
    )
    assert rows == [{"state": "completed", "attempts": 1, "n": total}]
