"""The queue's domain objects. Plain frozen dataclasses: no HTTP, no SQL.

Payloads travel through the core as JSON text (``bytes``), never parsed: the HTTP edge hands
over the raw JSON it received and gets raw JSON back, and PostgreSQL validates it as ``jsonb``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from app.core.states import State

QueueKind = Literal["simple", "exclusive"]
QueueOrdering = Literal["priority", "due"]
FilterValue = str | Sequence[str]
"""A value of a dequeue's metadata filter: one metadata value, or a list meaning any of them
(:func:`app.core.validation.dequeue_filter` checks it, and makes a list a tuple)."""


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """A queue's configuration (docs/concepts.md, "Queue configuration"). Durations are whole
    seconds."""

    kind: QueueKind = "simple"
    exclusive_key: str | None = None
    filter_keys: tuple[str, ...] = ()
    """The metadata keys whose values are indexed for filtered dequeues (at most
    :data:`MAX_FILTER_KEYS`): a filter naming one of them walks that key's index."""
    ordering: QueueOrdering = "priority"
    """The claim's order: ``priority`` (then enqueue order), or ``due`` (``visible_at`` first,
    priority breaking ties among messages due at the same instant, then enqueue order)."""
    lease_seconds: int = 30
    delay_seconds: int = 0
    max_attempts: int = 3
    retry_delay_seconds: int = 0
    retry_delay_max_seconds: int = 3600
    retention_seconds: int = 604800
    enqueue_paused: bool = False
    dequeue_paused: bool = False
    dead_letter_queue: str | None = None
    """A queue of the same namespace that takes this one's dead letters (``errored`` messages)."""

    @property
    def filter_key(self) -> str | None:
        """The first indexed key (``messages.filter_value``), or None."""
        return self.filter_keys[0] if self.filter_keys else None

    @property
    def filter_key_2(self) -> str | None:
        """The second indexed key (``messages.filter_value_2``), or None."""
        return self.filter_keys[1] if len(self.filter_keys) > 1 else None


MAX_FILTER_KEYS = 2
"""How many metadata keys a queue may index (one column and one index each)."""


# Fields that PATCH may change; kind, exclusive_key and filter_keys are fixed at creation (the
# stored messages' exclusive and filter values were extracted with them), and so is ordering
# (consumers rely on the order a queue was created with).
DEFAULT_POOL = "default"
"""The pool that is the catalogue's own database: the only one of a single-database install."""

MUTABLE_QUEUE_FIELDS = frozenset(
    {
        "lease_seconds",
        "delay_seconds",
        "max_attempts",
        "retry_delay_seconds",
        "retry_delay_max_seconds",
        "retention_seconds",
        "enqueue_paused",
        "dequeue_paused",
        "dead_letter_queue",
    }
)
IMMUTABLE_QUEUE_FIELDS = frozenset(
    {"kind", "exclusive_key", "filter_key", "filter_keys", "ordering"}
)


@dataclass(frozen=True, slots=True)
class Queue:
    """A queue as stored."""

    id: int
    namespace: str
    name: str
    config: QueueConfig
    created_at: datetime
    updated_at: datetime
    catalogue_version: int | None = field(default=None, compare=False)
    """The catalogue version this was read at (:mod:`app.core.catalogue`): a statement for this
    queue applies nothing if the catalogue has changed since. ``None``: not checked."""
    pool: str = field(default=DEFAULT_POOL, compare=False)
    """The pool (database) the queue was read from (docs/scaling.md)."""
    sqs: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """What the SQS door keeps for the queue (its SQS-only attributes and tags: docs/sqs.md);
    nothing else reads it."""


@dataclass(frozen=True, slots=True)
class QueueStats:
    """How many messages a queue holds per state, and how long the oldest pending one waits."""

    counts: dict[State, int]
    oldest_pending_age_seconds: float | None


# Not frozen, like NewRow and EnqueueOutcome: a batch builds hundreds per request, and a frozen
# dataclass's __init__ (object.__setattr__ per field) costs three times as much.
@dataclass(slots=True)
class NewMessage:
    """A message as a producer submits it; ``None`` means "use the queue's default"."""

    id: str | None = None
    priority: int | None = None
    payload: bytes | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    delay_seconds: int | None = None
    visible_at: datetime | None = None
    max_attempts: int | None = None
    lease_seconds: int | None = None
    ttl_seconds: int | None = None
    expires_at: datetime | None = None


@dataclass(slots=True)
class EnqueueOutcome:
    """What enqueue did with one message: created it, or found it already there."""

    id: str
    state: State
    created: bool
    seq: int | None = None
    """The message's place in enqueue order (its ``seq``), as the store numbered it."""
    replaced: bool = False
    """Whether an enqueue with ``on_conflict = replace`` replaced the waiting message of this id
    (``created`` is false then)."""


@dataclass(frozen=True, slots=True)
class LeasedMessage:
    """A message handed to a consumer by dequeue, with the lease that fences it."""

    id: str
    lease_id: str
    lease_expires_at: datetime
    attempt: int
    priority: int
    payload: bytes
    metadata: dict[str, str]
    enqueued_at: datetime
    first_leased_at: datetime | None = None
    """When the message was first leased (this lease, on its first attempt)."""
    seq: int | None = None
    """The message's place in enqueue order."""
    leased_at: datetime | None = None
    """When this lease was granted (the database's clock)."""
    visible_at: datetime | None = None
    """When the message became visible: its enqueue's delay ended, or its retry's backoff, or
    its requeue's delay."""
    expires_at: datetime | None = None
    """When the message expires if not finished (None: never)."""
    max_attempts: int | None = None
    """The effective ``max_attempts`` (the message's override, else the queue's)."""

    @property
    def remaining_attempts(self) -> int | None:
        """Leases the message may still get after this one (0 on its last attempt)."""
        return None if self.max_attempts is None else max(0, self.max_attempts - self.attempt)

    @property
    def waited_seconds(self) -> float | None:
        """How long the message waited for this lease: from when it became ready (enqueued,
        or visible at the end of its delay, retry backoff or requeue, whichever is later) to
        this lease; never negative. On a first lease, the wait since enqueue or the end of its
        delay."""
        if self.leased_at is None or self.visible_at is None:
            return None
        ready = max(self.visible_at, self.enqueued_at)
        return max(0.0, (self.leased_at - ready).total_seconds())

    @property
    def ttl_remaining_seconds(self) -> float | None:
        """Seconds from this lease to ``expires_at`` (None: it never expires)."""
        if self.expires_at is None or self.leased_at is None:
            return None
        return max(0.0, (self.expires_at - self.leased_at).total_seconds())


@dataclass(frozen=True, slots=True)
class Message:
    """Everything known about one live message (docs/concepts.md, "Message fields")."""

    id: str
    state: State
    priority: int
    payload: bytes
    metadata: dict[str, str]
    exclusive_value: str | None
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
    leased_at: datetime | None = None
    """When its latest lease was granted (None before its first); answers do not show it, the
    metrics measure processing time with it."""


@dataclass(frozen=True, slots=True)
class MessageChanges:
    """A PATCH of a waiting message; ``None`` leaves a field as it is."""

    priority: int | None = None
    payload: bytes | None = None
    metadata: dict[str, str] | None = None
    visible_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class MessageFilter:
    """Which messages a query lists, in which order, from which cursor."""

    states: tuple[State, ...] = ()
    metadata: dict[str, str] = field(default_factory=dict)
    priority_gte: int | None = None
    priority_lt: int | None = None
    order: Literal["enqueued_at", "priority"] = "enqueued_at"
    limit: int = 100
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class MessagePage:
    """One page of a message query; ``next_cursor`` is ``None`` on the last page."""

    messages: list[Message]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class LeaseRef:
    """A message id and the lease a consumer holds on it (batch acknowledgement item)."""

    id: str
    lease_id: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class NextLease:
    """What an acknowledgement asks to lease once it is applied: up to ``count`` messages, for
    ``lease_seconds`` (default the message's, else the queue's), whose metadata holds all
    ``metadata`` pairs (a list: any of its values)."""

    count: int = 1
    lease_seconds: int | None = None
    metadata: Mapping[str, FilterValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AckResult:
    """The outcome of one item of a batch acknowledgement; ``error`` is an error code."""

    id: str
    ok: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Namespace:
    """A tenant: holds queues, reached with its tokens."""

    name: str
    description: str
    created_at: datetime
    pool: str = DEFAULT_POOL
    """The pool (database) that holds the namespace's tokens, queues and messages."""


@dataclass(frozen=True, slots=True)
class Token:
    """A namespace token as listed (never with its secret)."""

    id: str
    namespace: str
    label: str
    created_at: datetime
    expires_at: datetime | None
    access_key_id: str | None = None
    """Set when the token is an SQS access key (docs/sqs.md): it signs requests with its secret
    rather than presenting it."""
    read_rate: float | None = None
    """Read requests per second the token may make (None: no limit of its own; docs/security.md,
    "Per-token rate limits")."""
    write_rate: float | None = None
    """Write requests per second the token may make (None: no limit of its own)."""


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A freshly issued token: the only time its secret is shown."""

    token: Token
    secret: str


@dataclass(frozen=True, slots=True)
class AccessKey:
    """An SQS access key as stored: its token, and its secret sealed by the server."""

    token: Token
    sealed_secret: bytes


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the admin, or a namespace's token."""

    is_admin: bool
    namespace: str | None = None
    token_id: str | None = None
    read_rate: float | None = None
    """The token's own limit of read requests per second, as last looked up (None: none)."""
    write_rate: float | None = None
    """The token's own limit of write requests per second, as last looked up (None: none)."""

    def rate(self, kind: str) -> float | None:
        """The token's limit of requests per second of ``kind`` (``read``, ``write``)."""
        return self.read_rate if kind == "read" else self.write_rate

    def may_access(self, namespace: str) -> bool:
        """Whether this caller may act on ``namespace``'s data."""
        return self.is_admin or self.namespace == namespace
