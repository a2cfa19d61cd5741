"""The worker's cycle in the store (``acknowledge_and_claim``): on a simple queue the
acknowledgement and the claim are one transaction, so a claim that fails takes the
acknowledgement back with it; on an exclusive queue the acknowledgement commits first and the
value it frees is leased in the same call."""

from __future__ import annotations

from typing import Any, LiteralString

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import ValidationError
from app.core.models import LeaseRef, NewMessage, NextLease
from app.core.service import QueueService
from app.store.postgres import PostgresStore
from tests.helpers import make_queue, states_of


async def test_one_transaction_on_a_simple_queue(
    service: QueueService, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, name="cycle")
    await service.enqueue("ns", "cycle", [NewMessage(id=i) for i in ("a", "b", "c")])
    (a,) = await service.dequeue("ns", "cycle")
    results, leased = await service.ack_and_dequeue(
        "ns", "cycle", [LeaseRef("a", a.lease_id)], [], NextLease(count=5)
    )
    assert [(r.id, r.ok) for r in results] == [("a", True)]
    assert [m.id for m in leased] == ["b", "c"]
    assert await states_of(engine, queue) == {"a": "completed", "b": "running", "c": "running"}


async def test_a_failing_claim_takes_the_acknowledgement_back(
    service: QueueService, engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = await make_queue(service, name="atomic")
    await service.enqueue("ns", "atomic", [NewMessage(id=i) for i in ("a", "b")])
    (a,) = await service.dequeue("ns", "atomic")

    def broken_claim(*args: Any) -> tuple[LiteralString, dict[str, Any]]:
        return "SELECT 1 / 0", {}  # a data exception, raised in the claim's place

    monkeypatch.setattr(PostgresStore, "_claim", staticmethod(broken_claim))
    with pytest.raises(ValidationError):
        await service.ack_and_dequeue(
            "ns", "atomic", [LeaseRef("a", a.lease_id)], [], NextLease(count=1)
        )
    assert await states_of(engine, queue) == {"a": "running", "b": "pending"}
    monkeypatch.undo()
    results, leased = await service.ack_and_dequeue(
        "ns", "atomic", [LeaseRef("a", a.lease_id)], [], NextLease(count=1)
    )
    assert [(r.id, r.ok) for r in results] == [("a", True)]
    assert [m.id for m in leased] == ["b"]


async def test_an_exclusive_value_is_freed_then_leased(
    service: QueueService, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, name="x", kind="exclusive", exclusive_key="k")
    messages = [NewMessage(id=f"k-{i}", metadata={"k": "1"}) for i in range(3)]
    await service.enqueue("ns", "x", messages)
    (first,) = await service.dequeue("ns", "x", count=3)
    results, leased = await service.ack_and_dequeue(
        "ns", "x", [LeaseRef(first.id, first.lease_id)], [], NextLease(count=3)
    )
    assert [(r.id, r.ok) for r in results] == [("k-0", True)]
    assert [m.id for m in leased] == ["k-1"]  # still one at a time per value
    assert await states_of(engine, queue) == {
        "k-0": "completed",
        "k-1": "running",
        "k-2": "pending",
    }
