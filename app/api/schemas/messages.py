"""The bodies of managing messages outside a consumer's lease: cancel, requeue, change, read and
query them, and send dead letters back."""

from __future__ import annotations

from datetime import datetime

import msgspec
from msgspec import UNSET, Raw, UnsetType

from app.api.schemas.common import In, Out, payload_bytes
from app.core import validation
from app.core.models import Message, MessageChanges, MessagePage


class Cancel(In):
    """``POST …/messages/{id}/cancel``."""

    lease_id: str | None = None
    force: bool = False
    reason: str | None = None


class Requeue(In):
    """``POST …/messages/{id}/requeue``: visible after ``delay_seconds``; expiring
    ``ttl_seconds`` after the requeue or at ``expires_at`` (neither: never)."""

    delay_seconds: int = 0
    ttl_seconds: int | None = None
    expires_at: datetime | None = None


class MessagePatch(In):
    """``PATCH …/messages/{id}``: absent (or ``null``) fields stay as they are; a ``null``
    payload is not "absent": it sets the payload to JSON ``null``."""

    priority: int | None = None
    payload: Raw | UnsetType = UNSET
    metadata: dict[str, str] | None = None
    visible_at: datetime | None = None

    def to_model(self) -> MessageChanges:
        """As the core's message changes."""
        return MessageChanges(
            self.priority, payload_bytes(self.payload), self.metadata, self.visible_at
        )


class MessageOut(Out):
    """Everything known about a message (docs/concepts.md, "Message fields")."""

    id: str
    state: str
    priority: int
    payload: Raw
    metadata: dict[str, str]
    attempts: int
    max_attempts: int
    lease_seconds: int
    lease_id: str | None
    lease_expires_at: datetime | None
    visible_at: datetime
    expires_at: datetime | None
    enqueued_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    last_error: str | None
    exclusive_value: str | None

    @classmethod
    def of(cls, m: Message) -> MessageOut:
        """From the core model."""
        return cls(
            m.id,
            m.state,
            m.priority,
            Raw(m.payload),
            m.metadata,
            m.attempts,
            m.max_attempts,
            m.lease_seconds,
            m.lease_id,
            m.lease_expires_at,
            m.visible_at,
            m.expires_at,
            m.enqueued_at,
            m.updated_at,
            m.finished_at,
            m.last_error,
            m.exclusive_value,
        )


class MessagePageOut(Out):
    """A page of a message query; ``next_cursor`` is ``null`` on the last page."""

    messages: list[MessageOut]
    next_cursor: str | None

    @classmethod
    def of(cls, page: MessagePage) -> MessagePageOut:
        """From the core's page."""
        return cls([MessageOut.of(m) for m in page.messages], page.next_cursor)


class RequeueDeadLetters(In):
    """``POST …/requeue``: send dead letters back, by state and optionally by id, with the
    terms of their new life (as ``…/messages/{id}/requeue``)."""

    states: list[str] = msgspec.field(default_factory=lambda: ["errored"])
    ids: list[str] | None = None
    limit: int = validation.MAX_QUERY_LIMIT
    delay_seconds: int = 0
    ttl_seconds: int | None = None
    expires_at: datetime | None = None


class DeleteDeadLetters(In):
    """``POST …/dead-letters/delete``: delete dead letters, by state and optionally by id, the
    ones ``…/requeue`` would take."""

    states: list[str] = msgspec.field(default_factory=lambda: ["errored"])
    ids: list[str] | None = None
    limit: int = validation.MAX_QUERY_LIMIT


class DeletedDeadLetters(Out):
    """How many dead letters were deleted."""

    deleted: int


class Requeued(Out):
    """How many dead letters were requeued."""

    requeued: int
