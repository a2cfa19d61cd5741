"""Changing a waiting message and deleting a message in any state, through the service."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from app.core.errors import (
    InvalidStateError,
    LeaseMismatchError,
    NotFoundError,
    ValidationError,
)
from app.core.models import (
    MessageChanges,
)
from app.core.states import State
from tests.helpers import (
    count_messages,
    make_queue,
    raw_row,
    states_of,
)
from tests.service.helpers import NS, Q, lease_one, new

# ==============================================================================================
# update_message
# ==============================================================================================


async def test_update_pending_message(service, queue):
    await service.enqueue(NS, Q, [new("a", priority=10), new("b", priority=20)])
    updated = await service.update_message(
        NS,
        Q,
        "b",
        MessageChanges(priority=1, payload=b'{"v": 2}', metadata={"k": "v"}),
    )
    assert (updated.state, updated.priority, updated.metadata) == (State.PENDING, 1, {"k": "v"})
    assert json.loads(updated.payload) == {"v": 2}
    assert [m.id for m in await service.dequeue(NS, Q, count=2)] == ["b", "a"]


async def test_update_only_given_fields(service, queue):
    await service.enqueue(NS, Q, [new("a", priority=3, payload=b"[1]", metadata={"x": "y"})])
    updated = await service.update_message(NS, Q, "a", MessageChanges(priority=4))
    assert (updated.priority, json.loads(updated.payload), updated.metadata) == (
        4,
        [1],
        {"x": "y"},
    )
    cleared = await service.update_message(NS, Q, "a", MessageChanges(metadata={}))
    assert cleared.metadata == {}


async def test_update_visible_at_moves_between_invisible_and_pending(service, engine, queue):
    await service.enqueue(NS, Q, [new("a")])
    future = datetime.now(UTC) + timedelta(hours=1)
    hidden = await service.update_message(NS, Q, "a", MessageChanges(visible_at=future))
    assert (hidden.state, hidden.visible_at) == (State.INVISIBLE, future)
    assert await service.dequeue(NS, Q) == []
    still = await service.update_message(NS, Q, "a", MessageChanges(priority=7))
    assert (still.state, still.visible_at, still.priority) == (State.INVISIBLE, future, 7)
    past = datetime.now(UTC) - timedelta(seconds=5)
    shown = await service.update_message(NS, Q, "a", MessageChanges(visible_at=past))
    assert (shown.state, shown.visible_at) == (State.PENDING, past)
    assert (await raw_row(engine, queue, "a"))["state"] == "pending"
    assert [m.id for m in await service.dequeue(NS, Q)] == ["a"]


async def test_update_refused_unless_waiting(service, queue):
    await service.enqueue(NS, Q, [new("r"), new("c"), new("x")])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=2)}
    await service.complete(NS, Q, "c", leases["c"])
    await service.cancel(NS, Q, "x")
    for message_id, state in [("r", "running"), ("c", "completed"), ("x", "canceled")]:
        with pytest.raises(InvalidStateError) as info:
            await service.update_message(NS, Q, message_id, MessageChanges(priority=1))
        assert info.value.details["state"] == state
    assert (await service.get_message(NS, Q, "r")).priority != 1
    with pytest.raises(NotFoundError):
        await service.update_message(NS, Q, "missing", MessageChanges(priority=1))
    with pytest.raises(ValidationError) as info:
        await service.update_message(NS, Q, "r", MessageChanges(priority=2**63))
    assert info.value.field == "priority"


async def test_update_in_exclusive_queue_moves_the_value(service, engine):
    await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="p")
    await service.enqueue(
        NS,
        "ex",
        [
            new("a1", priority=1, metadata={"p": "a"}),
            new("a2", priority=2, metadata={"p": "a"}),
        ],
    )
    moved = await service.update_message(
        NS, "ex", "a2", MessageChanges(metadata={"p": "b", "x": "1"})
    )
    assert (moved.exclusive_value, moved.metadata) == ("b", {"p": "b", "x": "1"})
    # a1 and a2 now hold different values: both can run at once.
    assert [m.id for m in await service.dequeue(NS, "ex", count=10)] == ["a1", "a2"]
    for metadata in ({"x": "1"}, {"p": ""}):
        await service.enqueue(NS, "ex", [new("a3", metadata={"p": "a"})])
        with pytest.raises(ValidationError) as info:
            await service.update_message(NS, "ex", "a3", MessageChanges(metadata=metadata))
        assert info.value.field == "metadata.p"
    message = await service.get_message(NS, "ex", "a3")
    assert (message.exclusive_value, message.metadata) == ("a", {"p": "a"})
    # A change without metadata keeps the value.
    kept = await service.update_message(NS, "ex", "a3", MessageChanges(priority=0))
    assert kept.exclusive_value == "a"


# ==============================================================================================
# delete_message
# ==============================================================================================


async def test_delete_message_in_any_state(service, engine, queue):
    await service.enqueue(NS, Q, [new("c"), new("r"), new("p"), new("i", delay_seconds=60)])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=2)}
    await service.complete(NS, Q, "c", leases["c"])
    assert await states_of(engine, queue) == {
        "c": "completed",
        "r": "running",
        "p": "pending",
        "i": "invisible",
    }
    for message_id in ("p", "i", "r", "c"):
        await service.delete_message(NS, Q, message_id)
        with pytest.raises(NotFoundError):
            await service.get_message(NS, Q, message_id)
        with pytest.raises(NotFoundError):
            await service.delete_message(NS, Q, message_id)
    assert await count_messages(engine, queue.id) == 0


async def test_delete_running_message_invalidates_its_lease(service, queue):
    await service.enqueue(NS, Q, [new("a")])
    leased = await lease_one(service)
    await service.delete_message(NS, Q, "a")
    with pytest.raises(NotFoundError):
        await service.complete(NS, Q, "a", leased.lease_id)
    with pytest.raises(NotFoundError):
        await service.fail(NS, Q, "a", leased.lease_id)
    with pytest.raises(NotFoundError):
        await service.extend(NS, Q, "a", leased.lease_id, 30)
    # Re-enqueueing the id makes a new message; the old lease does not act on it.
    await service.enqueue(NS, Q, [new("a")])
    fresh = await lease_one(service)
    with pytest.raises(LeaseMismatchError):
        await service.complete(NS, Q, "a", leased.lease_id)
    assert (await service.complete(NS, Q, "a", fresh.lease_id)).state is State.COMPLETED
