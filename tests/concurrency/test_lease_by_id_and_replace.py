"""Lease by id and enqueue with ``on_conflict = replace`` under concurrency: a message is never
leased twice, whoever races for it (leases by id, dequeues), and a running message is never
changed by a replace: it is either replaced before it is leased, and leased with the new body,
or leased with the body it had, and the replace leaves it alone.

The races run many times over, started together on a barrier; where the order matters, a
transaction is held open and the other side is seen waiting for its lock (or passing it over)
before the first commits. Nothing waits by sleeping."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import InvalidStateError
from app.core.models import LeasedMessage, NewMessage
from app.core.service import QueueService
from app.store.sql.lease_by_id import MESSAGE_LEASE_IF_READY
from tests.concurrency.helpers import NS, TIMEOUT, enqueue_all, wait_for_lock_wait, warm_pool
from tests.helpers import fetch, make_queue


async def test_two_leases_by_id_of_one_message_lease_it_once(
    service: QueueService, engine: AsyncEngine
) -> None:
    await make_queue(service, NS, "q", lease_seconds=600)
    rounds, racers = 60, 4
    await enqueue_all(service, "q", [NewMessage(id=f"m{i}") for i in range(rounds)])
    await warm_pool(engine, racers)
    for i in range(rounds):
        barrier = asyncio.Barrier(racers)

        async def racer(
            barrier: asyncio.Barrier = barrier, message_id: str = f"m{i}"
        ) -> LeasedMessage | str:
            await barrier.wait()
            try:
                return await service.lease_message(NS, "q", message_id)
            except InvalidStateError as refused:
                return str(refused.details["state"])

        async with asyncio.timeout(TIMEOUT):
            results = await asyncio.gather(*(racer() for _ in range(racers)))
        leased = [r for r in results if isinstance(r, LeasedMessage)]
        assert len(leased) == 1, results
        assert [r for r in results if not isinstance(r, LeasedMessage)] == ["running"] * 3
    rows = await fetch(
        engine, "SELECT state::text AS state, attempts, count(*) AS n FROM messages GROUP BY 1, 2"
    )
    assert rows == [{"state": "running", "attempts": 1, "n": rounds}]


async def test_leases_by_id_racing_dequeues_never_lease_a_message_twice(
    service: QueueService, engine: AsyncEngine
) -> None:
    await make_queue(service, NS, "q", lease_seconds=600)
    total, consumers = 600, 8
    ids = [f"m{i:04}" for i in range(total)]
    await enqueue_all(service, "q", [NewMessage(id=i, priority=int(i[1:]) % 3) for i in ids])
    await warm_pool(engine, consumers)
    leases: list[tuple[str, str]] = []
    barrier = asyncio.Barrier(consumers)

    async def by_id(number: int) -> None:
        rng = random.Random(number)
        order = ids[:]
        rng.shuffle(order)  # the head first, often: where the dequeues are
        order.sort(key=lambda i: int(i[1:]) // 50 + rng.random() * 4)
        await barrier.wait()
        for message_id in order:
            try:
                leased = await service.lease_message(NS, "q", message_id)
            except InvalidStateError:
                continue
            leases.append((leased.id, leased.lease_id))

    async def dequeuer(number: int) -> None:
        rng = random.Random(number)
        await barrier.wait()
        while batch := await service.dequeue(NS, "q", count=rng.randint(1, 10)):
            leases.extend((m.id, m.lease_id) for m in batch)

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*(by_id(n) if n % 2 else dequeuer(n) for n in range(consumers)))
    counted = Counter(message_id for message_id, _ in leases)
    assert [i for i, n in counted.items() if n > 1] == []
    assert set(counted) == set(ids)
    assert len({lease for _, lease in leases}) == total
    rows = await fetch(engine, "SELECT id, lease_id::text AS lease_id, attempts FROM messages")
    assert {(r["id"], r["lease_id"]) for r in rows} == set(leases)
    assert {r["attempts"] for r in rows} == {1}


async def test_a_lease_by_id_waits_for_a_claim_in_progress_and_then_refuses(
    service: QueueService, engine: AsyncEngine
) -> None:
    await make_queue(service, NS, "q")
    await service.enqueue(NS, "q", [NewMessage(id="a")])
    async with engine.connect() as holder:
        # A claim's lease, not yet committed (the claim's own row lock and change).
        await holder.execute(
            sa.text(
                "UPDATE messages SET state = 'running', attempts = attempts + 1,"
                " lease_id = gen_random_uuid(), lease_expires_at = now() + interval '1 min'"
                " WHERE id = 'a'"
            )
        )
        lease = asyncio.create_task(service.lease_message(NS, "q", "a"))
        await wait_for_lock_wait(engine)  # the lease by id waits for the claim's row
        assert not lease.done()
        await holder.commit()
    with pytest.raises(InvalidStateError) as refused:
        await asyncio.wait_for(lease, TIMEOUT)
    assert refused.value.details["state"] == "running"
    [row] = await fetch(engine, "SELECT attempts FROM messages WHERE id = 'a'")
    assert row["attempts"] == 1


async def test_a_dequeue_passes_over_a_lease_by_id_in_progress(
    service: QueueService, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, NS, "q")
    await service.enqueue(NS, "q", [NewMessage(id="a", priority=0), NewMessage(id="b")])
    params = {
        "queue_id": queue.id,
        "id": "a",
        "lease_override": None,
        "queue_lease": 30,
        "catalogue_version": None,
        "valid_until": None,
    }
    async with engine.connect() as holder:
        [leased] = (await holder.execute(MESSAGE_LEASE_IF_READY, params)).all()
        assert leased.id == "a"
        # Uncommitted: a dequeue skips the locked row and takes the next (never "a" again).
        assert [m.id for m in await service.dequeue(NS, "q", count=2)] == ["b"]
        await holder.commit()
    assert await service.dequeue(NS, "q") == []


async def test_a_replace_waits_for_a_claim_in_progress_and_leaves_the_running_message_alone(
    service: QueueService, engine: AsyncEngine
) -> None:
    await make_queue(service, NS, "q")
    await service.enqueue(NS, "q", [NewMessage(id="a", payload=b'"old"')])
    async with engine.connect() as holder:
        await holder.execute(
            sa.text(
                "UPDATE messages SET state = 'running', attempts = attempts + 1,"
                " lease_id = gen_random_uuid(), lease_expires_at = now() + interval '1 min'"
                " WHERE id = 'a'"
            )
        )
        replace = asyncio.create_task(
            service.enqueue(NS, "q", [NewMessage(id="a", payload=b'"new"')], on_conflict="replace")
        )
        await wait_for_lock_wait(engine)  # ON CONFLICT waits for the claim's row
        await holder.commit()
    [outcome] = await asyncio.wait_for(replace, TIMEOUT)
    assert (outcome.created, outcome.replaced, str(outcome.state)) == (False, False, "running")
    [row] = await fetch(engine, "SELECT payload FROM messages WHERE id = 'a'")
    assert row["payload"] == "old"


async def test_replaces_racing_dequeues_never_change_a_running_message(
    service: QueueService, engine: AsyncEngine
) -> None:
    await make_queue(service, NS, "q", lease_seconds=600)
    total, consumers, rounds = 300, 4, 6
    ids = [f"m{i:03}" for i in range(total)]
    await enqueue_all(service, "q", [NewMessage(id=i, payload=b"0") for i in ids])
    await warm_pool(engine, consumers + 2)
    got: dict[str, int] = {}  # id -> the payload (version) its lease carried
    not_replaced: list[str] = []
    barrier = asyncio.Barrier(consumers + 1)

    async def replacer() -> None:
        await barrier.wait()
        for version in range(1, rounds + 1):
            batch = [NewMessage(id=i, payload=str(version).encode()) for i in ids]
            for start in range(0, total, 50):
                outcomes = await service.enqueue(
                    NS, "q", batch[start : start + 50], on_conflict="replace"
                )
                for outcome in outcomes:
                    assert not outcome.created
                    if not outcome.replaced:
                        assert str(outcome.state) == "running"
                        not_replaced.append(outcome.id)

    async def dequeuer(number: int) -> None:
        rng = random.Random(number)
        await barrier.wait()
        while batch := await service.dequeue(NS, "q", count=rng.randint(1, 3)):
            for message in batch:
                assert message.id not in got
                got[message.id] = json.loads(message.payload)

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(replacer(), *(dequeuer(n) for n in range(consumers)))
    assert len(got) == total  # every message leased once
    rows = await fetch(engine, "SELECT id, state::text AS state, payload FROM messages ORDER BY id")
    assert {r["state"] for r in rows} == {"running"}
    # Each running message still carries exactly the body its consumer was handed.
    assert {r["id"]: r["payload"] for r in rows} == got
    assert not_replaced  # the replaces did meet running messages
    assert len(set(got.values())) > 1  # and the dequeues met replaced ones
