"""A run of exclusive-queue consumers under a watcher: many asyncio consumers claim and complete
while a task polls the database for two running messages of one exclusive value, and every lease
is held until the watcher has looked at the database at least once after its claim committed.

Used by the exclusivity tests (with the service's claim and with an unguarded one, which the same
detector must catch) and by the lease-expiry tests."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import NewMessage, Queue
from app.core.service import QueueService
from app.core.states import State
from tests.concurrency.helpers import NS, TIMEOUT, enqueue_all, warm_pool
from tests.helpers import make_queue


@dataclass(frozen=True)
class Claimed:
    """One lease as a consumer saw it."""

    id: str
    lease_id: str
    value: str


RUNNING_DUPLICATES = sa.text(
    """
    SELECT exclusive_value, count(*) AS n FROM messages
    WHERE queue_id = :queue_id AND state = 'running'
    GROUP BY exclusive_value HAVING count(*) > 1
    """
)


@dataclass
class ExclusiveRun:
    """What the consumers and the watcher recorded."""

    # exclusive value -> [(leased tick, completing tick, message id)]
    intervals: dict[str, list[tuple[int, int, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    db_duplicates: list[tuple[str, int]] = field(default_factory=list)
    polls: int = 0
    claims: int = 0
    leases: Counter[str] = field(default_factory=Counter)

    def overlaps(self) -> list[tuple[str, str, str]]:
        """Neighbouring leases (by start) of one exclusive value whose intervals overlap.

        Empty exactly when no two intervals of any value overlap: if intervals i < j (by start)
        overlap, then so do i and i + 1, since start[i+1] <= start[j] < end[i].
        """
        found = []
        for value, spans in self.intervals.items():
            ordered = sorted(spans)
            for (_, end, first), (start, _, second) in itertools.pairwise(ordered):
                if start < end:
                    found.append((value, first, second))
        return found


Claim = Callable[[int], Awaitable[list[Claimed]]]
Complete = Callable[[Claimed], Awaitable[None]]


async def run_exclusive_consumers(
    engine: AsyncEngine,
    queue: Queue,
    total: int,
    claim: Claim,
    complete: Complete,
    consumers: int = 16,
) -> ExclusiveRun:
    """Run ``consumers`` tasks that claim (batches of 1..10) and complete until ``total`` are
    done, while a watcher polls the database for two running messages of one value.

    Intervals are recorded on a logical clock (one process, one event loop): a lease's interval
    starts after its claim returned (so after the claim committed) and ends just before its
    complete is sent (so before it commits). It lies inside the time the row really was running;
    if the database never runs two messages of one value at once, recorded intervals of one value
    cannot overlap. Each lease is held until a watcher poll that started after the claim has
    finished, so every lease is seen by the database check too.
    """
    run = ExclusiveRun()
    clock = itertools.count()
    polled = asyncio.Condition()
    started = finished = 0
    completed = 0
    consumers_done = asyncio.Event()
    barrier = asyncio.Barrier(consumers + 1)
    await warm_pool(engine, consumers + 1)

    async def watcher() -> None:
        nonlocal started, finished
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await barrier.wait()
            while not consumers_done.is_set():
                started += 1
                rows = (await conn.execute(RUNNING_DUPLICATES, {"queue_id": queue.id})).all()
                run.db_duplicates.extend((r.exclusive_value, r.n) for r in rows)
                async with polled:
                    finished = started
                    run.polls += 1
                    polled.notify_all()

    async def consumer(number: int) -> None:
        nonlocal completed
        rng = random.Random(1000 + number)
        await barrier.wait()
        while completed < total:
            batch = await claim(rng.randint(1, 10))
            leased_at = next(clock)
            if not batch:
                continue
            run.claims += 1
            seen_by = started + 1  # the first poll that starts after this claim committed
            async with polled:
                await polled.wait_for(lambda seen_by=seen_by: finished >= seen_by)
            for message in batch:
                run.leases[message.id] += 1
                run.intervals[message.value].append((leased_at, next(clock), message.id))
                await complete(message)
                completed += 1

    async with asyncio.timeout(TIMEOUT):
        watching = asyncio.create_task(watcher())
        try:
            await asyncio.gather(*(consumer(n) for n in range(consumers)))
        finally:
            consumers_done.set()
            await watching
    return run


async def exclusive_setup(
    service: QueueService, values: int, per_value: int
) -> tuple[Queue, list[str]]:
    """Queue ``ex``, exclusive on ``project``: ``values`` values of ``per_value`` messages each;
    the queue and the messages' ids."""
    queue = await make_queue(
        service, NS, "ex", kind="exclusive", exclusive_key="project", lease_seconds=600
    )
    # Messages of one value sit next to each other in priority order: the adversarial case,
    # every scan of the queue's head meets several messages of the same value.
    messages = [
        NewMessage(id=f"v{v:02}-{k}", priority=v * per_value + k, metadata={"project": f"p{v:02}"})
        for v in range(values)
        for k in range(per_value)
    ]
    await enqueue_all(service, "ex", messages)
    return queue, [m.id for m in messages if m.id is not None]


def service_claim(service: QueueService) -> Claim:
    """The service's claim (dequeue) on queue ``ex``, as a :data:`Claim`."""

    async def claim(count: int) -> list[Claimed]:
        batch = await service.dequeue(NS, "ex", count=count)
        return [Claimed(m.id, m.lease_id, m.metadata["project"]) for m in batch]

    return claim


def service_complete(service: QueueService) -> Complete:
    """The service's complete on queue ``ex``, as a :data:`Complete`."""

    async def complete(message: Claimed) -> None:
        done = await service.complete(NS, "ex", message.id, message.lease_id)
        assert done.state is State.COMPLETED

    return complete
