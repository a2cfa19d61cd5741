"""What the service tests share: the queue they work in, and the steps many of them take."""

from __future__ import annotations

from datetime import timedelta

from app.core.models import LeasedMessage, NewMessage
from app.core.service import QueueService
from app.core.states import State

ADMIN_TOKEN = "test-admin-token-32-characters-ok"  # = tests/conftest.py's ADMIN_TOKEN
NS, Q = "ns", "q"


def seconds(delta: timedelta | None) -> float:
    assert delta is not None
    return delta.total_seconds()


def new(message_id: str, **fields) -> NewMessage:
    return NewMessage(id=message_id, **fields)


async def lease_one(service: QueueService, queue: str = Q, **kwargs) -> LeasedMessage:
    leased = await service.dequeue(NS, queue, **kwargs)
    assert len(leased) == 1, leased
    return leased[0]


async def dead_letters(service: QueueService, ids: list[str], error: str = "boom") -> None:
    """Turn ``ids`` (pending, in a max_attempts=1 queue) into errored messages, in that order."""
    for message_id in ids:
        leased = await service.dequeue(NS, Q, metadata={"n": message_id})
        assert [m.id for m in leased] == [message_id]
        failed = await service.fail(NS, Q, message_id, leased[0].lease_id, error=error)
        assert failed.state is State.ERRORED
