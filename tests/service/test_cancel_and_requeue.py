"""Cancelling live messages and requeueing dead letters through the service."""

from __future__ import annotations

import uuid

import pytest

from app.core.errors import (
    InvalidStateError,
    LeaseMismatchError,
    NotFoundError,
    ValidationError,
)
from app.core.states import State
from tests.helpers import (
    expire_leases,
    make_due,
    make_queue,
    raw_row,
    shift_back,
    states_of,
)
from tests.service.helpers import NS, Q, dead_letters, lease_one, new, seconds

# ==============================================================================================
# cancel
# ==============================================================================================


async def test_cancel_pending_and_invisible(service, engine, queue):
    await service.enqueue(NS, Q, [new("p"), new("i", delay_seconds=60)])
    canceled = await service.cancel(NS, Q, "p")
    assert canceled.state is State.CANCELED
    assert canceled.last_error == "canceled"
    assert canceled.finished_at is not None
    with_reason = await service.cancel(NS, Q, "i", reason="no longer needed")
    assert (with_reason.state, with_reason.last_error) == (State.CANCELED, "no longer needed")
    assert await states_of(engine, queue) == {"p": "canceled", "i": "canceled"}
    await make_due(engine, queue=queue)
    assert await service.dequeue(NS, Q, count=10) == []
    with pytest.raises(NotFoundError):
        await service.cancel(NS, Q, "missing", force=True)
    await service.enqueue(NS, Q, [new("a")])
    with pytest.raises(ValidationError) as info:
        await service.cancel(NS, Q, "a", reason="x" * 5000)
    assert info.value.field == "reason"
    assert (await service.get_message(NS, Q, "a")).state is State.PENDING


async def test_cancel_running_needs_the_lease_or_force(service, engine, queue):
    await service.enqueue(NS, Q, [new("a"), new("b"), new("c")])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=3)}
    with pytest.raises(LeaseMismatchError):
        await service.cancel(NS, Q, "a")
    with pytest.raises(LeaseMismatchError):
        await service.cancel(NS, Q, "a", lease_id=str(uuid.uuid4()))
    with pytest.raises(LeaseMismatchError):
        await service.cancel(NS, Q, "a", lease_id="junk")
    assert (await raw_row(engine, queue, "a"))["state"] == "running"
    assert (await service.cancel(NS, Q, "a", lease_id=leases["a"])).state is State.CANCELED
    assert (await service.cancel(NS, Q, "b", force=True)).state is State.CANCELED
    # The canceled message's lease is dead.
    with pytest.raises(LeaseMismatchError):
        await service.complete(NS, Q, "a", leases["a"])
    # An expired lease no longer allows cancel; force still does.
    await expire_leases(engine, ids=["c"])
    with pytest.raises(LeaseMismatchError):
        await service.cancel(NS, Q, "c", lease_id=leases["c"])
    assert (await service.cancel(NS, Q, "c", force=True)).state is State.CANCELED


async def test_cancel_terminal_is_invalid_state(service, engine):
    await make_queue(service, NS, Q, max_attempts=1)
    await service.enqueue(NS, Q, [new("done", metadata={"n": "done"}), new("x")])
    leased = await lease_one(service, metadata={"n": "done"})
    await service.complete(NS, Q, "done", leased.lease_id)
    await service.enqueue(NS, Q, [new("dead", metadata={"n": "dead"})])
    await dead_letters(service, ["dead"])
    await service.cancel(NS, Q, "x")
    for message_id in ("done", "dead", "x"):
        for kwargs in ({}, {"force": True}):
            with pytest.raises(InvalidStateError) as info:
                await service.cancel(NS, Q, message_id, **kwargs)
            assert info.value.details["state"] in ("completed", "errored", "canceled")


# ==============================================================================================
# requeue
# ==============================================================================================


async def test_requeue_errored_and_canceled(service, engine):
    queue = await make_queue(service, NS, Q, max_attempts=1)
    await service.enqueue(NS, Q, [new("dead", metadata={"n": "dead"}), new("gone")])
    await dead_letters(service, ["dead"])
    await service.cancel(NS, Q, "gone")
    for message_id in ("dead", "gone"):
        back = await service.requeue(NS, Q, message_id)
        assert back.state is State.PENDING
        assert (back.attempts, back.lease_id, back.finished_at) == (0, None, None)
        row = await raw_row(engine, queue, message_id)
        assert row["visible_at"] == row["updated_at"]
    leased = await service.dequeue(NS, Q, count=10)
    assert sorted(m.id for m in leased) == ["dead", "gone"]
    assert all(m.attempt == 1 for m in leased)


async def test_requeue_with_delay_is_invisible(service, engine):
    queue = await make_queue(service, NS, Q)
    await service.enqueue(NS, Q, [new("a")])
    await service.cancel(NS, Q, "a")
    back = await service.requeue(NS, Q, "a", delay_seconds=120)
    assert back.state is State.INVISIBLE
    row = await raw_row(engine, queue, "a")
    assert seconds(row["visible_at"] - row["updated_at"]) == 120
    assert await service.dequeue(NS, Q) == []


async def test_requeue_clears_expiry_of_an_expired_message(service, engine, queue):
    await service.enqueue(NS, Q, [new("a", ttl_seconds=60)])
    await service.cancel(NS, Q, "a", reason="expired")
    back = await service.requeue(NS, Q, "a")
    assert back.expires_at is None
    assert [m.id for m in await service.dequeue(NS, Q)] == ["a"]


async def test_requeue_refusals(service, engine, queue):
    await service.enqueue(NS, Q, [new("p"), new("i", delay_seconds=60), new("r"), new("c")])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=2)}
    assert set(leases) == {"p", "r"}
    await service.complete(NS, Q, "p", leases["p"])
    before = await states_of(engine, queue)
    for message_id in ("p", "i", "r", "c"):
        with pytest.raises(InvalidStateError):
            await service.requeue(NS, Q, message_id)
    assert await states_of(engine, queue) == before
    with pytest.raises(NotFoundError):
        await service.requeue(NS, Q, "missing")
    with pytest.raises(ValidationError) as info:
        await service.requeue(NS, Q, "c", delay_seconds=-1)
    assert info.value.field == "delay_seconds"


async def test_requeue_dead_letters_by_state(service, engine):
    queue = await make_queue(service, NS, Q, max_attempts=1)
    ids = ["e1", "e2", "e3", "c1", "c2", "p", "done"]
    await service.enqueue(NS, Q, [new(i, metadata={"n": i}) for i in ids])
    await dead_letters(service, ["e1", "e2", "e3"])
    await service.cancel(NS, Q, "c1")
    await service.cancel(NS, Q, "c2")
    leased = await lease_one(service, metadata={"n": "done"})
    await service.complete(NS, Q, "done", leased.lease_id)
    assert await service.requeue_dead_letters(NS, Q) == 3  # errored by default
    states = await states_of(engine, queue)
    assert {i for i, s in states.items() if s == "pending"} == {"e1", "e2", "e3", "p"}
    assert await service.requeue_dead_letters(NS, Q, states=["canceled"]) == 2
    states = await states_of(engine, queue)
    assert states == dict.fromkeys(ids, "pending") | {"done": "completed"}
    assert await service.requeue_dead_letters(NS, Q, states=["errored", "canceled"]) == 0


async def test_requeue_dead_letters_by_ids_and_limit(service, engine):
    queue = await make_queue(service, NS, Q, max_attempts=1)
    ids = ["e1", "e2", "e3", "e4", "c1"]
    await service.enqueue(NS, Q, [new(i, metadata={"n": i}) for i in ids])
    await dead_letters(service, ["e1", "e2", "e3", "e4"])
    await service.cancel(NS, Q, "c1")
    # Make the finishing order explicit: e4 oldest, then e2, e3, e1.
    for message_id, age in [("e4", 400), ("e2", 300), ("e3", 200), ("e1", 100)]:
        await shift_back(engine, "finished_at", age, queue=queue, ids=[message_id])
    count = await service.requeue_dead_letters(
        NS, Q, states=["errored", "canceled"], ids=["e1", "c1", "unknown"]
    )
    assert count == 2
    states = await states_of(engine, queue)
    assert (states["e1"], states["c1"]) == ("pending", "pending")
    assert await service.requeue_dead_letters(NS, Q, limit=2) == 2  # the oldest two
    states = await states_of(engine, queue)
    assert (states["e4"], states["e2"], states["e3"]) == ("pending", "pending", "errored")
    assert await service.requeue_dead_letters(NS, Q, ids=[]) == 0


async def test_requeue_dead_letters_refusals(service, queue):
    cases = [
        ({"states": ["pending"]}, "states[0]"),
        ({"states": ["errored", "completed"]}, "states[1]"),
        ({"states": ["bogus"]}, "states[0]"),
        ({"ids": ["ok", "not ok"]}, "ids[1]"),
        ({"ids": [f"m{i}" for i in range(1001)]}, "ids"),
        ({"limit": 0}, "limit"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ValidationError) as info:
            await service.requeue_dead_letters(NS, Q, **kwargs)
        assert info.value.field == field
    with pytest.raises(NotFoundError):
        await service.requeue_dead_letters(NS, "nope")
