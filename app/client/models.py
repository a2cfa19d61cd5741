"""What the Sundial API answers, as typed, immutable msgspec Structs.

Unknown fields in an answer are ignored, so a newer server does not break an older client.
Times are timezone-aware :class:`~datetime.datetime` values; payloads are any JSON value.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType


class Model(msgspec.Struct, frozen=True, kw_only=True):
    """Base of the answers."""


class Namespace(Model, frozen=True, kw_only=True):
    """A tenant."""

    name: str
    description: str
    created_at: datetime


class Token(Model, frozen=True, kw_only=True):
    """A namespace token as listed (never with its secret): ``kind`` is ``"bearer"``, or
    ``"sqs"`` for an SQS access key, whose ``access_key_id`` is set."""

    id: str
    label: str
    created_at: datetime
    expires_at: datetime | None
    kind: str = "bearer"  # older servers send neither
    access_key_id: str | None = None
    read_rate: float | None = None
    """Read requests per second the token may make (None: no limit of its own)."""
    write_rate: float | None = None
    """Write requests per second the token may make (None: no limit of its own)."""


class IssuedToken(Token, frozen=True, kw_only=True):
    """A freshly issued token: ``token`` is the secret (of an SQS access key, the secret access
    key), shown this once only."""

    token: str


class Queue(Model, frozen=True, kw_only=True):
    """A queue's configuration; ``counts`` (messages per state) and
    ``oldest_pending_age_seconds`` are filled where the endpoint reports them."""

    name: str
    namespace: str
    kind: str
    exclusive_key: str | None
    filter_key: str | None = None  # older servers do not send it
    filter_keys: list[str] = []  # older servers do not send it
    ordering: str = "priority"  # older servers do not send it
    lease_seconds: int
    delay_seconds: int
    max_attempts: int
    retry_delay_seconds: int
    retry_delay_max_seconds: int
    retention_seconds: int
    enqueue_paused: bool
    dequeue_paused: bool
    dead_letter_queue: str | None = None  # older servers do not send it
    created_at: datetime
    updated_at: datetime
    counts: dict[str, int] = {}
    oldest_pending_age_seconds: float | None = None

    @property
    def path(self) -> str:
        """``namespace/name``, as the client's methods take it."""
        return f"{self.namespace}/{self.name}"


class Enqueued(Model, frozen=True, kw_only=True):
    """What enqueue did with one message: ``created`` is false for an id already there;
    ``replaced`` (only with ``on_conflict="replace"``) is true when the waiting message of that
    id was replaced by this one."""

    id: str
    state: str
    created: bool
    replaced: bool = False


class Leased(Model, frozen=True, kw_only=True):
    """A message handed out by dequeue, with its lease."""

    id: str
    lease_id: str
    lease_expires_at: datetime
    attempt: int
    priority: int
    payload: Any
    metadata: dict[str, str]
    enqueued_at: datetime
    remaining_attempts: int | None = None
    """Leases the message may still get after this one (0 on its last attempt); None from a
    server that does not say."""
    expires_at: datetime | None = None
    """When the message expires if not finished; None: never."""
    ttl_remaining_seconds: float | None = None
    """Seconds from this lease to ``expires_at``; None: it never expires."""
    waited_seconds: float | None = None
    """How long it waited for this lease, from when it became ready (enqueued, or visible at
    the end of its delay or retry backoff) to the lease; None from a server that does not
    say."""


class LeasedFrom(Leased, frozen=True, kw_only=True):
    """A message handed out by a dequeue of several queues (:meth:`Client.dequeue_many`), with
    the queue it came from: ``"namespace/queue"``, as the client's methods take it (complete,
    fail or extend it there)."""

    queue: str


class Message(Model, frozen=True, kw_only=True):
    """Everything known about a message."""

    id: str
    state: str
    priority: int
    payload: Any
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


class MessagePage(Model, frozen=True, kw_only=True):
    """One page of a message query; ``next_cursor`` is ``None`` on the last page."""

    messages: list[Message]
    next_cursor: str | None


class AckResult(Model, frozen=True, kw_only=True):
    """The outcome of one item of a batch acknowledgement (``error`` is an error code)."""

    id: str
    ok: bool
    error: str | None = None


class Acknowledged(Model, frozen=True, kw_only=True):
    """The answer to an acknowledgement that also dequeued: each item's outcome, complete items
    first, and the messages leased after it."""

    results: list[AckResult]
    messages: list[Leased]


class Health(Model, frozen=True, kw_only=True):
    """``/healthz`` or ``/readyz``."""

    status: str
    revision: str | None = None


class NewMessage(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A message to enqueue with :meth:`Client.enqueue_many`; unset fields take the queue's
    defaults. Give ``delay_seconds`` or ``visible_at``, ``ttl_seconds`` or ``expires_at``."""

    id: str | None = None
    payload: Any | UnsetType = UNSET
    priority: int | None = None
    metadata: dict[str, str] | None = None
    delay_seconds: int | None = None
    visible_at: datetime | None = None
    max_attempts: int | None = None
    lease_seconds: int | None = None
    ttl_seconds: int | None = None
    expires_at: datetime | None = None
