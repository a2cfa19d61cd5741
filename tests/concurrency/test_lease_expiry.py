"""Lease expiry under concurrency: a lease \"expires\" because SQL moves ``lease_expires_at`` into
the past; released messages are leased again by other consumers while the stale holders are
refused, and an exclusive value held by a dead consumer is freed with its lease.

Nothing here waits by sleeping."""

from __future__ import annotations

import asyncio
import random
from collections import Counter, defaultdict

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import LeaseMismatchError
from app.core.models import NewMessage
from app.core.service import QueueService
from app.core.states import State
from tests.concurrency.exclusive_run import Claimed, exclusive_setup, service_claim
from tests.concurrency.helpers import NS, TIMEOUT, enqueue_all, warm_pool
from tests.helpers import expire_leases, fetch, make_queue, release_expired


async def test_expired_leases_are_released_and_re_leased_to_others(
    service: QueueService, engine: AsyncEngine
):
    queue = await make_queue(service, NS, "jobs", lease_seconds=600, max_attempts=3)
    total, consumers = 120, 8
    ids = [f"j{i:03}" for i in range(total)]
    await enqueue_all(service, "jobs", [NewMessage(id=i) for i in ids])

    # Round 1: eight consumers lease everything concurrently and never complete.
    held: dict[int, list[tuple[str, str]]] = defaultdict(list)
    barrier = asyncio.Barrier(consumers)
    await warm_pool(engine, consumers * 2)

    async def hoarder(number: int) -> None:
        rng = random.Random(number)
        await barrier.wait()
        while batch := await service.dequeue(NS, "jobs", count=rng.randint(1, 10)):
            held[number].extend((m.id, m.lease_id) for m in batch)

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*(hoarder(n) for n in range(consumers)))
    stale = {message_id: lease for leases in held.values() for message_id, lease in leases}
    assert len(stale) == sum(len(leases) for leases in held.values()) == total
    assert len(held) >= 2

    # Half the leases expire (SQL shift); the holders of the other half keep theirs.
    expiring = {message_id for message_id in ids if int(message_id[1:]) % 2 == 0}
    keeping = set(ids) - expiring
    assert await expire_leases(engine, queue=queue, ids=sorted(expiring)) == len(expiring)
    assert await release_expired(engine, batch=1000) == len(expiring)
    rows = await fetch(
        engine,
        "SELECT id, state::text AS state, attempts, last_error FROM messages WHERE queue_id = :q",
        q=queue.id,
    )
    for row in rows:
        if row["id"] in expiring:
            assert (row["state"], row["attempts"], row["last_error"]) == (
                "pending",
                1,
                "lease expired",
            )
        else:
            assert (row["state"], row["attempts"]) == ("running", 1)
    assert await release_expired(engine, batch=1000) == 0  # nothing is released twice

    # Round 2, all at once: fresh consumers take the released messages and complete them, the
    # stale consumers try to complete / extend / fail with their expired leases, and the
    # hoarders whose leases are still valid complete theirs.
    fresh_leases: list[tuple[int, str, str, int]] = []
    stale_refusals: Counter[str] = Counter()
    stale_successes: list[str] = []
    barrier = asyncio.Barrier(consumers * 2)

    async def fresh(number: int) -> None:
        rng = random.Random(100 + number)
        await barrier.wait()
        while batch := await service.dequeue(NS, "jobs", count=rng.randint(1, 10)):
            fresh_leases.extend((number, m.id, m.lease_id, m.attempt) for m in batch)
            for m in batch:
                await service.complete(NS, "jobs", m.id, m.lease_id)

    async def former_holder(number: int) -> None:
        await barrier.wait()
        for message_id, lease in held[number]:
            if message_id in keeping:
                done = await service.complete(NS, "jobs", message_id, lease)
                assert done.state is State.COMPLETED
                continue
            for action in ("complete", "extend", "fail"):
                try:
                    if action == "complete":
                        await service.complete(NS, "jobs", message_id, lease)
                    elif action == "extend":
                        await service.extend(NS, "jobs", message_id, lease, 600)
                    else:
                        await service.fail(NS, "jobs", message_id, lease, error="stale")
                except LeaseMismatchError:
                    stale_refusals[action] += 1
                else:
                    stale_successes.append(f"{action} {message_id}")

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(
            *(fresh(n) for n in range(consumers)),
            *(former_holder(n) for n in range(consumers)),
        )

    assert stale_successes == []
    assert stale_refusals == {a: len(expiring) for a in ("complete", "extend", "fail")}
    re_leased = Counter(message_id for _, message_id, _, _ in fresh_leases)
    assert set(re_leased) == expiring
    assert set(re_leased.values()) == {1}
    assert {attempt for *_, attempt in fresh_leases} == {2}
    assert not {lease for _, _, lease, _ in fresh_leases} & set(stale.values())
    rows = await fetch(
        engine,
        "SELECT id, state::text AS state, attempts, lease_id::text AS lease_id, last_error "
        "FROM messages WHERE queue_id = :q",
        q=queue.id,
    )
    assert {row["state"] for row in rows} == {"completed"}
    for row in rows:
        if row["id"] in expiring:
            assert row["attempts"] == 2
            assert row["lease_id"] != stale[row["id"]]
            assert row["last_error"] == "lease expired"  # the stale fail changed nothing
        else:
            assert (row["attempts"], row["lease_id"]) == (1, stale[row["id"]])


async def test_expired_exclusive_leases_free_their_values(
    service: QueueService, engine: AsyncEngine
):
    """A consumer that dies holding a value blocks it only until its lease is released."""
    queue, ids = await exclusive_setup(service, values=10, per_value=3)
    claim = service_claim(service)
    barrier = asyncio.Barrier(8)
    await warm_pool(engine, 8)
    all_values = [f"p{v:02}" for v in range(10)]
    first_round: list[Claimed] = []

    async def hoarder(_: int) -> None:
        await barrier.wait()
        while batch := await claim(3):
            first_round.extend(batch)

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*(hoarder(n) for n in range(8)))
    # Every value is taken exactly once; nothing more can be leased.
    assert sorted(c.value for c in first_round) == all_values
    assert await claim(10) == []

    await expire_leases(engine, queue=queue)
    assert await release_expired(engine) == 10
    second_round: list[Claimed] = []

    async def taker(_: int) -> None:
        await barrier.wait()
        while batch := await claim(3):
            second_round.extend(batch)

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*(taker(n) for n in range(8)))
    # Each value is leased again, once, by other consumers.
    assert sorted(c.value for c in second_round) == all_values
    assert not {c.lease_id for c in second_round} & {c.lease_id for c in first_round}
    running = await fetch(
        engine,
        "SELECT exclusive_value FROM messages WHERE queue_id = :q AND state = 'running'",
        q=queue.id,
    )
    assert sorted(r["exclusive_value"] for r in running) == all_values
    for stale in first_round:
        with pytest.raises(LeaseMismatchError):
            await service.complete(NS, "ex", stale.id, stale.lease_id)
    for current in second_round:
        await service.complete(NS, "ex", current.id, current.lease_id)
    assert len(await service.dequeue(NS, "ex", count=10)) == 10
    assert len(ids) == 30
