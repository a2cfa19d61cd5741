"""Dequeue through the service: order, count, leases, metadata filters, pauses, due delayed
messages, and exclusive queues' one running message per value.
"""

from __future__ import annotations

import json
import uuid

import pytest

from app.core.errors import (
    NotFoundError,
    ValidationError,
)
from tests.helpers import (
    expire_leases,
    fetch,
    make_due,
    make_queue,
    raw_row,
    release_expired,
)
from tests.service.helpers import NS, Q, lease_one, new, seconds


async def test_dequeue_by_priority_then_enqueue_order(service, queue):
    await service.enqueue(
        NS,
        Q,
        [
            new("a", priority=5),
            new("b", priority=1),
            new("c", priority=5),
            new("d", priority=3),
            new("e", priority=1),
            new("f", priority=-7),
        ],
    )
    assert [m.id for m in await service.dequeue(NS, Q, count=2)] == ["f", "b"]
    assert [m.id for m in await service.dequeue(NS, Q, count=10)] == ["e", "d", "a", "c"]
    assert await service.dequeue(NS, Q, count=10) == []


async def test_dequeue_count(service, queue):
    await service.enqueue(NS, Q, [new(f"m{i:02}", priority=i) for i in range(10)])
    assert len(await service.dequeue(NS, Q)) == 1
    assert len(await service.dequeue(NS, Q, count=3)) == 3
    assert len(await service.dequeue(NS, Q, count=100)) == 6
    assert await service.dequeue(NS, Q, count=100) == []


async def test_dequeue_grants_a_lease(service, engine, queue):
    await service.enqueue(NS, Q, [new("a", payload=b'{"x": [1]}', metadata={"k": "v"})])
    leased = await lease_one(service)
    assert leased.id == "a"
    assert leased.attempt == 1
    assert uuid.UUID(leased.lease_id)
    assert json.loads(leased.payload) == {"x": [1]}
    assert leased.metadata == {"k": "v"}
    row = await raw_row(engine, queue, "a")
    assert row["state"] == "running"
    assert row["attempts"] == 1
    assert row["lease_id"] == leased.lease_id
    assert row["lease_expires_at"] == leased.lease_expires_at
    assert seconds(row["lease_expires_at"] - row["leased_at"]) == 30  # queue default
    assert row["first_leased_at"] == row["leased_at"]


async def test_lease_seconds_request_beats_message_beats_queue(service, engine):
    queue = await make_queue(service, NS, Q, lease_seconds=40)
    await service.enqueue(
        NS,
        Q,
        [new("q", priority=1), new("m", priority=2, lease_seconds=7), new("r", priority=3)],
    )
    await service.dequeue(NS, Q)
    await service.dequeue(NS, Q)
    await service.dequeue(NS, Q, lease_seconds=5)
    for message_id, expected in [("q", 40), ("m", 7), ("r", 5)]:
        row = await raw_row(engine, queue, message_id)
        assert seconds(row["lease_expires_at"] - row["leased_at"]) == expected, message_id
    await service.enqueue(NS, Q, [new("m2", lease_seconds=7)])
    await service.dequeue(NS, Q, lease_seconds=600)
    row = await raw_row(engine, queue, "m2")
    assert seconds(row["lease_expires_at"] - row["leased_at"]) == 600


async def test_dequeue_metadata_filter_needs_every_pair(service, queue):
    await service.enqueue(
        NS,
        Q,
        [
            new("ab", metadata={"a": "1", "b": "2"}),
            new("a", metadata={"a": "1"}),
            new("b", metadata={"b": "2"}),
            new("a2", metadata={"a": "2", "b": "2"}),
            new("none"),
        ],
    )
    both = await service.dequeue(NS, Q, count=10, metadata={"a": "1", "b": "2"})
    assert [m.id for m in both] == ["ab"]
    assert [m.id for m in await service.dequeue(NS, Q, count=10, metadata={"a": "1"})] == ["a"]
    assert await service.dequeue(NS, Q, count=10, metadata={"a": "3"}) == []
    rest = await service.dequeue(NS, Q, count=10, metadata={})
    assert [m.id for m in rest] == ["b", "a2", "none"]


async def test_dequeue_paused_returns_nothing(service, engine, queue):
    await service.enqueue(NS, Q, [new("a")])
    await service.update_queue(NS, Q, {"dequeue_paused": True})
    assert await service.dequeue(NS, Q, count=10) == []
    assert (await raw_row(engine, queue, "a"))["state"] == "pending"
    await service.update_queue(NS, Q, {"dequeue_paused": False})
    assert [m.id for m in await service.dequeue(NS, Q)] == ["a"]


async def test_delayed_message_waits_then_is_dequeued_without_the_scheduler(service, engine, queue):
    await service.enqueue(NS, Q, [new("later", delay_seconds=3600, priority=1)])
    await service.enqueue(NS, Q, [new("now", priority=9)])
    assert [m.id for m in await service.dequeue(NS, Q, count=10)] == ["now"]
    assert await service.dequeue(NS, Q, count=10) == []
    assert await make_due(engine, queue=queue) == 1
    assert (await raw_row(engine, queue, "later"))["state"] == "invisible"  # not promoted
    leased = await service.dequeue(NS, Q, count=10)
    assert [m.id for m in leased] == ["later"]
    assert (await raw_row(engine, queue, "later"))["state"] == "running"


async def test_due_and_pending_messages_are_served_together_by_priority(service, engine, queue):
    await service.enqueue(
        NS,
        Q,
        [
            new("p5", priority=5),
            new("d1", priority=1, delay_seconds=60),
            new("p3", priority=3),
            new("d4", priority=4, delay_seconds=60),
            new("d0", priority=0, delay_seconds=60),
        ],
    )
    await make_due(engine, queue=queue, ids=["d1", "d4"])
    assert [m.id for m in await service.dequeue(NS, Q, count=3)] == ["d1", "p3", "d4"]
    assert [m.id for m in await service.dequeue(NS, Q, count=3)] == ["p5"]


async def test_dequeue_refusals(service, queue):
    for count in (0, 101):
        with pytest.raises(ValidationError) as info:
            await service.dequeue(NS, Q, count=count)
        assert info.value.field == "count"
    with pytest.raises(ValidationError) as info:
        await service.dequeue(NS, Q, lease_seconds=0)
    assert info.value.field == "lease_seconds"
    with pytest.raises(ValidationError) as info:
        await service.dequeue(NS, Q, metadata={"k": "v" * 300})
    assert info.value.field == "metadata.k"
    with pytest.raises(NotFoundError):
        await service.dequeue(NS, "nope")


async def test_exclusive_dequeue_one_running_message_per_value(service, engine):
    queue = await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="p")
    await service.enqueue(
        NS,
        "ex",
        [
            new("a1", priority=1, metadata={"p": "a"}),
            new("a2", priority=2, metadata={"p": "a"}),
            new("b1", priority=3, metadata={"p": "b"}),
            new("a3", priority=4, metadata={"p": "a"}),
            new("b2", priority=5, metadata={"p": "b"}),
            new("c1", priority=6, metadata={"p": "c"}),
        ],
    )
    first = await service.dequeue(NS, "ex", count=10)
    assert [m.id for m in first] == ["a1", "b1", "c1"]  # at most one per value
    assert await service.dequeue(NS, "ex", count=10) == []  # every value is busy
    leases = {m.id: m.lease_id for m in first}
    await service.complete(NS, "ex", "a1", leases["a1"])
    assert [m.id for m in await service.dequeue(NS, "ex", count=10)] == ["a2"]
    await service.fail(NS, "ex", "b1", leases["b1"])  # b1 back to pending, b is free
    assert [m.id for m in await service.dequeue(NS, "ex", count=10)] == ["b1"]
    running = await fetch(
        engine,
        "SELECT exclusive_value, count(*) AS n FROM messages WHERE queue_id = :q "
        "AND state = 'running' GROUP BY exclusive_value",
        q=queue.id,
    )
    assert {r["exclusive_value"]: r["n"] for r in running} == {"a": 1, "b": 1, "c": 1}


async def test_exclusive_batch_is_filled_from_values_beyond_the_first_candidates(service):
    # 20 values with 30 messages each, ranked so that the 400 best candidates (what one claim
    # round looks at for a batch of 100) hold only 14 values: the batch must still take one
    # message of every value, the best of each.
    await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="p")
    batch = [
        new(f"v{value:02}-{rank:02}", priority=value * 30 + rank, metadata={"p": f"v{value:02}"})
        for value in range(20)
        for rank in range(30)
    ]
    for start in range(0, len(batch), 100):
        await service.enqueue(NS, "ex", batch[start : start + 100])
    leased = await service.dequeue(NS, "ex", count=100)
    assert [m.id for m in leased] == [f"v{value:02}-00" for value in range(20)]
    assert await service.dequeue(NS, "ex", count=100) == []


async def test_exclusive_expired_lease_blocks_until_released(service, engine):
    await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="p")
    await service.enqueue(
        NS, "ex", [new("a1", metadata={"p": "a"}), new("a2", metadata={"p": "a"})]
    )
    await lease_one(service, "ex")
    await expire_leases(engine)
    # Still running until the scheduler releases it: the value stays taken.
    assert await service.dequeue(NS, "ex", count=10) == []
    assert await release_expired(engine) == 1
    assert [m.id for m in await service.dequeue(NS, "ex", count=10)] == ["a1"]
