"""The bodies of dequeue: what a consumer asks for, and the messages it leases."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Self

import msgspec
from msgspec import Raw

from app.api.schemas.common import In, Out
from app.core.models import LeasedMessage, NextLease


class Dequeue(In):
    """``POST …/dequeue``."""

    count: int = 1
    lease_seconds: int | None = None
    wait_seconds: int = 0
    metadata: dict[str, str | list[str]] = msgspec.field(default_factory=dict)
    """Pairs that must all match; a list matches any of its values."""

    def next_lease(self) -> NextLease:
        """What to lease (without the wait), as the core asks for it."""
        return NextLease(self.count, self.lease_seconds, self.metadata)


class LeaseById(In):
    """``POST …/messages/{id}/lease``: the lease's length (default: the message's own
    ``lease_seconds``, else the queue's)."""

    lease_seconds: int | None = None


class LeasedOut(Out):
    """A message handed out by dequeue, with its lease."""

    id: str
    lease_id: str
    lease_expires_at: datetime
    attempt: int
    priority: int
    payload: Raw
    metadata: dict[str, str]
    enqueued_at: datetime
    remaining_attempts: int
    expires_at: datetime | None
    ttl_remaining_seconds: float | None
    waited_seconds: float

    @classmethod
    def of(cls, m: LeasedMessage, **extra: Any) -> Self:
        """From the core's leased message (``extra``: the fields a subclass adds)."""
        return cls(
            m.id,
            m.lease_id,
            m.lease_expires_at,
            m.attempt,
            m.priority,
            Raw(m.payload),
            m.metadata,
            m.enqueued_at,
            m.remaining_attempts or 0,
            m.expires_at,
            m.ttl_remaining_seconds,
            m.waited_seconds or 0.0,
            **extra,
        )


class DequeueOut(Out):
    """The answer to a dequeue (possibly empty)."""

    messages: list[LeasedOut]

    @classmethod
    def of(cls, leased: list[LeasedMessage]) -> DequeueOut:
        """From the core's leased messages."""
        return cls([LeasedOut.of(m) for m in leased])
