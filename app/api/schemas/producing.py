"""The bodies of enqueue: a batch of new messages, and what enqueue did with each."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec
from msgspec import UNSET, Raw, UnsetType

from app.api.schemas.common import In, Out, payload_bytes
from app.core.models import EnqueueOutcome, NewMessage


class NewMessageIn(In):
    """One message of an enqueue batch."""

    id: str | None = None
    priority: int | None = None
    payload: Raw | UnsetType = UNSET
    metadata: dict[str, str] = msgspec.field(default_factory=dict)
    delay_seconds: int | None = None
    visible_at: datetime | None = None
    max_attempts: int | None = None
    lease_seconds: int | None = None
    ttl_seconds: int | None = None
    expires_at: datetime | None = None

    def to_model(self) -> NewMessage:
        """As the core's new message."""
        return NewMessage(
            id=self.id,
            priority=self.priority,
            payload=payload_bytes(self.payload),
            metadata=self.metadata,
            delay_seconds=self.delay_seconds,
            visible_at=self.visible_at,
            max_attempts=self.max_attempts,
            lease_seconds=self.lease_seconds,
            ttl_seconds=self.ttl_seconds,
            expires_at=self.expires_at,
        )


class Enqueue(In):
    """``POST …/messages``: 1 to 1000 messages, all or nothing. ``on_conflict``: what an id the
    queue already holds gets: ``keep`` (the default: the message stays as it is) or ``replace``
    (a message still waiting, invisible or pending, becomes the new one). ``create_queue``: a
    queue that does not exist is made first, with the default configuration."""

    messages: list[NewMessageIn]
    on_conflict: Literal["keep", "replace"] = "keep"
    create_queue: bool = False

    def to_models(self) -> list[NewMessage]:
        """As the core's new messages."""
        return [m.to_model() for m in self.messages]


class EnqueuedOut(Out):
    """What enqueue did with one message."""

    id: str
    state: str
    created: bool
    replaced: bool | UnsetType = UNSET
    """Only in the answer to ``on_conflict: replace``: whether the waiting message of this id
    was replaced."""


class EnqueueOut(Out):
    """The answer to an enqueue, in request order."""

    messages: list[EnqueuedOut]

    @classmethod
    def of(cls, outcomes: list[EnqueueOutcome], *, replace: bool = False) -> EnqueueOut:
        """From the core's outcomes (``replace``: of an enqueue that replaces)."""
        if replace:
            return cls([EnqueuedOut(o.id, o.state, o.created, o.replaced) for o in outcomes])
        return cls([EnqueuedOut(o.id, o.state, o.created) for o in outcomes])
