"""The batch acknowledgement through the service: each item judged on its own (id, lease)."""

from __future__ import annotations

import uuid

import pytest

from app.core.errors import (
    ValidationError,
)
from app.core.models import (
    LeaseRef,
)
from app.core.states import State
from tests.helpers import (
    make_queue,
    raw_row,
    states_of,
)
from tests.service.helpers import NS, Q, lease_one, new, seconds


async def test_ack_batch_reports_each_item(service, engine, queue):
    await service.enqueue(NS, Q, [new(i) for i in ("a", "b", "c", "d", "e")])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=4)}
    assert set(leases) == {"a", "b", "c", "d"}
    results = await service.ack(
        NS,
        Q,
        complete=[
            LeaseRef("a", leases["a"]),
            LeaseRef("b", str(uuid.uuid4())),
            LeaseRef("zzz", leases["a"]),
            LeaseRef("e", str(uuid.uuid4())),  # pending: exists, no such lease
        ],
        fail=[LeaseRef("c", leases["c"], error="bad input"), LeaseRef("d", "not-a-uuid")],
    )
    assert [(r.id, r.ok, r.error) for r in results] == [
        ("a", True, None),
        ("b", False, "lease_mismatch"),
        ("zzz", False, "not_found"),
        ("e", False, "lease_mismatch"),
        ("c", True, None),
        ("d", False, "lease_mismatch"),
    ]
    assert await states_of(engine, queue) == {
        "a": "completed",
        "b": "running",
        "c": "pending",
        "d": "running",
        "e": "pending",
    }
    c = await service.get_message(NS, Q, "c")
    assert (c.last_error, c.attempts) == ("bad input", 1)


async def test_ack_accepts_a_lease_id_in_any_uuid_spelling(service, engine, queue):
    await service.enqueue(NS, Q, [new(i) for i in ("a", "b", "c")])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=3)}
    results = await service.ack(
        NS,
        Q,
        complete=[LeaseRef("a", leases["a"].upper()), LeaseRef("b", "{" + leases["b"] + "}")],
        fail=[LeaseRef("c", "urn:uuid:" + leases["c"])],
    )
    assert [(r.id, r.ok) for r in results] == [("a", True), ("b", True), ("c", True)]
    assert await states_of(engine, queue) == {"a": "completed", "b": "completed", "c": "pending"}


async def test_ack_fail_uses_queue_backoff_and_dead_letters(service, engine):
    queue = await make_queue(service, NS, Q, max_attempts=2, retry_delay_seconds=30)
    await service.enqueue(NS, Q, [new("a"), new("b", max_attempts=1)])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=2)}
    results = await service.ack(
        NS, Q, complete=[], fail=[LeaseRef(i, leases[i], error="x") for i in ("a", "b")]
    )
    assert all(r.ok for r in results)
    a = await raw_row(engine, queue, "a")
    assert a["state"] == "invisible"
    assert seconds(a["visible_at"] - a["updated_at"]) == 30
    b = await raw_row(engine, queue, "b")
    assert (b["state"], b["last_error"]) == ("errored", "x")
    assert b["finished_at"] is not None


async def test_ack_refusals(service, queue):
    too_many = [LeaseRef(f"m{i}", str(uuid.uuid4())) for i in range(1001)]
    with pytest.raises(ValidationError) as info:
        await service.ack(NS, Q, complete=too_many, fail=[])
    assert info.value.field == "complete"
    with pytest.raises(ValidationError) as info:
        await service.ack(NS, Q, complete=[], fail=[LeaseRef("a", "x"), LeaseRef("b", "y", "\x00")])
    assert info.value.field == "fail[1].error"
    assert await service.ack(NS, Q, complete=[], fail=[]) == []


async def test_ack_judges_each_lease_of_a_repeated_id_on_its_own(service, engine, queue):
    await service.enqueue(NS, Q, [new("a")])
    leased = await lease_one(service)
    stale = str(uuid.uuid4())
    results = await service.ack(
        NS, Q, complete=[LeaseRef("a", stale), LeaseRef("a", leased.lease_id)], fail=[]
    )
    assert (await raw_row(engine, queue, "a"))["state"] == "completed"
    assert [(r.id, r.ok, r.error) for r in results] == [
        ("a", False, "lease_mismatch"),
        ("a", True, None),
    ]


async def test_ack_complete_retried_with_the_same_lease_is_ok(service, queue):
    await service.enqueue(NS, Q, [new("a")])
    leased = await lease_one(service)
    first = await service.ack(NS, Q, complete=[LeaseRef("a", leased.lease_id)], fail=[])
    assert [(r.ok, r.error) for r in first] == [(True, None)]
    # Single complete is idempotent for the lease that completed it ...
    assert (await service.complete(NS, Q, "a", leased.lease_id)).state is State.COMPLETED
    # ... so a consumer that lost the answer of its batch ack and sends it again must not be
    # told its lease is gone.
    again = await service.ack(NS, Q, complete=[LeaseRef("a", leased.lease_id)], fail=[])
    assert [(r.ok, r.error) for r in again] == [(True, None)]


async def test_ack_of_both_kinds_is_one_transaction(service, engine, queue, monkeypatch):
    """Completions and failures of one acknowledgement commit together: when the failures'
    statement fails, the completions are taken back with it."""
    from app.store import messages

    await service.enqueue(NS, Q, [new(i) for i in ("a", "b")])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=2)}
    real = messages.acknowledgement

    def failing_second(*args, **kwargs):
        completes, _ = real(*args, **kwargs)
        return [completes, ("SELECT 1 / 0", {})]  # a data exception in the failures' place

    monkeypatch.setattr(messages, "acknowledgement", failing_second)
    with pytest.raises(ValidationError):
        await service.ack(
            NS, Q, complete=[LeaseRef("a", leases["a"])], fail=[LeaseRef("b", leases["b"])]
        )
    assert await states_of(engine, queue) == {"a": "running", "b": "running"}
    monkeypatch.undo()
    results = await service.ack(
        NS, Q, complete=[LeaseRef("a", leases["a"])], fail=[LeaseRef("b", leases["b"])]
    )
    assert [(r.id, r.ok) for r in results] == [("a", True), ("b", True)]
