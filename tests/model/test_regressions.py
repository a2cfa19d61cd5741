"""Regression tests for bugs the model-based machine (tests/model/test_stateful.py) found, each
written out as the plain sequence of calls that showed it."""

from __future__ import annotations

import pytest

from app.core.models import NewMessage
from tests.model.harness import EXCLUSIVE, KEY, NS, QUEUE_NAMES, SIMPLE, Harness


@pytest.mark.parametrize("queue", QUEUE_NAMES)
def test_due_messages_are_served_by_priority(fresh: Harness, queue: str) -> None:
    """Order without concurrency: of due messages the lowest priority goes first, whether or not
    the scheduler has promoted them yet (found by the machine). The exclusive dequeue looks at 4 due
    messages per requested one, so there it takes 4 earlier ones to hide the urgent one."""
    service = fresh.service
    earlier = 1 if queue == SIMPLE else 4
    batch = [
        NewMessage(id=f"late{i}", priority=5, delay_seconds=60, metadata={KEY: f"v{i}"})
        for i in range(earlier)
    ]
    batch.append(NewMessage(id="urgent", priority=-5, delay_seconds=120, metadata={KEY: "u"}))
    fresh.run(service.enqueue(NS, queue, batch))
    fresh.run(fresh.shift(120))  # all due; no scheduler tick
    leased = fresh.run(service.dequeue(NS, queue, count=1))
    assert [m.id for m in leased] == ["urgent"]


def test_exclusive_batch_takes_one_message_of_every_free_value(fresh: Harness) -> None:
    """A batch of 2 takes the best message of value ``a`` and the one of value ``b``, however
    many ``a`` messages rank before ``b`` (found by the machine: the claim used to look at
    ``4 * count`` candidates only)."""
    service = fresh.service
    batch = [
        NewMessage(id=f"a{i}", priority=i, delay_seconds=0, metadata={KEY: "a"}) for i in range(8)
    ]
    batch.append(NewMessage(id="b", priority=100, delay_seconds=0, metadata={KEY: "b"}))
    fresh.run(service.enqueue(NS, EXCLUSIVE, batch))
    leased = fresh.run(service.dequeue(NS, EXCLUSIVE, count=2))
    assert [m.id for m in leased] == ["a0", "b"]
