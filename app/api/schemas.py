"""The bodies of API v1 as msgspec Structs, and their conversions to and from app.core.models.

Request structs forbid unknown fields and are decoded strictly (:mod:`app.api.body`): ``"1"`` or
``1.5`` where an integer is expected is a 400 naming the field. Message payloads are
:class:`msgspec.Raw` both ways: the JSON text the producer sent is stored and returned as is,
never parsed or re-encoded in Python. Ranges and cross-field rules are the core's
(:mod:`app.core.validation`); these types only fix the JSON shapes. Datetimes are RFC 3339.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, Literal

import msgspec
from msgspec import UNSET, Raw, UnsetType

from app.core import validation
from app.core.models import (
    AckResult,
    EnqueueOutcome,
    IssuedToken,
    LeasedMessage,
    LeaseRef,
    Message,
    MessageChanges,
    MessagePage,
    Namespace,
    NewMessage,
    Queue,
    QueueConfig,
    QueueKind,
    Token,
)
from app.core.service.queues import QueueDetail
from app.core.states import State

_DEFAULTS = QueueConfig()


class In(msgspec.Struct, forbid_unknown_fields=True):
    """Base of request bodies: an unknown field is an error."""


class Out(msgspec.Struct, gc=False):
    """Base of response bodies (never part of a reference cycle, so not GC-tracked)."""


def _raw(raw: Raw | UnsetType) -> bytes | None:
    """A payload as the core takes it: the JSON text, ``None`` when absent."""
    return None if raw is UNSET else bytes(raw)


# --- admin plane ---------------------------------------------------------------------------------


class NamespaceCreate(In):
    """``POST /v1/namespaces``."""

    name: str
    description: str = ""


class NamespaceOut(Out):
    """A namespace."""

    name: str
    description: str
    created_at: datetime

    @classmethod
    def of(cls, namespace: Namespace) -> NamespaceOut:
        """From the core model."""
        return cls(namespace.name, namespace.description, namespace.created_at)


class NamespaceList(Out):
    """``GET /v1/namespaces``."""

    namespaces: list[NamespaceOut]


class TokenIssue(In):
    """``POST /v1/namespaces/{ns}/tokens``."""

    label: str = ""
    expires_at: datetime | None = None


class TokenOut(Out):
    """A token as listed: never with its secret."""

    id: str
    label: str
    created_at: datetime
    expires_at: datetime | None

    @classmethod
    def of(cls, token: Token) -> TokenOut:
        """From the core model."""
        return cls(token.id, token.label, token.created_at, token.expires_at)


class IssuedTokenOut(Out):
    """A freshly issued token, with its secret (shown this once only)."""

    id: str
    token: str
    label: str
    created_at: datetime
    expires_at: datetime | None

    @classmethod
    def of(cls, issued: IssuedToken) -> IssuedTokenOut:
        """From the core model."""
        token = issued.token
        return cls(token.id, issued.secret, token.label, token.created_at, token.expires_at)


class TokenList(Out):
    """``GET /v1/namespaces/{ns}/tokens``."""

    tokens: list[TokenOut]


# --- queues --------------------------------------------------------------------------------------


class QueuePut(In):
    """``PUT …/queues/{queue}``: the whole configuration; absent fields take their defaults."""

    kind: QueueKind = _DEFAULTS.kind
    exclusive_key: str | None = _DEFAULTS.exclusive_key
    filter_key: str | None = _DEFAULTS.filter_key
    lease_seconds: int = _DEFAULTS.lease_seconds
    delay_seconds: int = _DEFAULTS.delay_seconds
    max_attempts: int = _DEFAULTS.max_attempts
    retry_delay_seconds: int = _DEFAULTS.retry_delay_seconds
    retry_delay_max_seconds: int = _DEFAULTS.retry_delay_max_seconds
    retention_seconds: int = _DEFAULTS.retention_seconds
    enqueue_paused: bool = _DEFAULTS.enqueue_paused
    dequeue_paused: bool = _DEFAULTS.dequeue_paused

    def to_model(self) -> QueueConfig:
        """As the core's configuration."""
        return QueueConfig(**msgspec.structs.asdict(self))


class QueuePatch(In):
    """``PATCH …/queues/{queue}``: only the fields given change (``kind``, ``exclusive_key``
    and ``filter_key`` are accepted here only to be refused with a clear error)."""

    kind: str | UnsetType = UNSET
    exclusive_key: str | UnsetType | None = UNSET
    filter_key: str | UnsetType | None = UNSET
    lease_seconds: int | UnsetType = UNSET
    delay_seconds: int | UnsetType = UNSET
    max_attempts: int | UnsetType = UNSET
    retry_delay_seconds: int | UnsetType = UNSET
    retry_delay_max_seconds: int | UnsetType = UNSET
    retention_seconds: int | UnsetType = UNSET
    enqueue_paused: bool | UnsetType = UNSET
    dequeue_paused: bool | UnsetType = UNSET

    def to_changes(self) -> dict[str, Any]:
        """The fields that were given."""
        return {
            name: value
            for name in self.__struct_fields__
            if (value := getattr(self, name)) is not UNSET
        }


class QueueOut(Out):
    """A queue: its name, namespace and configuration."""

    name: str
    namespace: str
    kind: str
    exclusive_key: str | None
    filter_key: str | None
    lease_seconds: int
    delay_seconds: int
    max_attempts: int
    retry_delay_seconds: int
    retry_delay_max_seconds: int
    retention_seconds: int
    enqueue_paused: bool
    dequeue_paused: bool
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, queue: Queue) -> QueueOut:
        """From the core model."""
        return cls(**_queue_fields(queue))


def _queue_fields(queue: Queue) -> dict[str, Any]:
    return {
        "name": queue.name,
        "namespace": queue.namespace,
        **dataclasses.asdict(queue.config),
        "created_at": queue.created_at,
        "updated_at": queue.updated_at,
    }


def _counts(counts: dict[State, int]) -> dict[str, int]:
    """Every state, 0 when the queue holds none in it."""
    return {state.value: counts.get(state, 0) for state in State}


class QueueListItem(QueueOut):
    """A queue in a listing: its configuration and message counts per state."""

    counts: dict[str, int]

    @classmethod
    def of_counts(cls, queue: Queue, counts: dict[State, int]) -> QueueListItem:
        """From the core model and counts."""
        return cls(**_queue_fields(queue), counts=_counts(counts))


class QueueDetailOut(QueueOut):
    """One queue: configuration, counts per state, and how long its oldest pending message
    has waited (``null`` when none is pending)."""

    counts: dict[str, int]
    oldest_pending_age_seconds: float | None

    @classmethod
    def of_detail(cls, detail: QueueDetail) -> QueueDetailOut:
        """From the core's queue detail."""
        stats = detail.stats
        return cls(
            **_queue_fields(detail.queue),
            counts=_counts(stats.counts),
            oldest_pending_age_seconds=stats.oldest_pending_age_seconds,
        )


class QueueList(Out):
    """``GET …/queues``."""

    queues: list[QueueListItem]


class Purge(In):
    """``POST …/purge``: the states to delete (all by default)."""

    states: list[str] | None = None


class Purged(Out):
    """How many messages a purge deleted."""

    deleted: int


# --- producing -----------------------------------------------------------------------------------


class NewMessageIn(In):
    """One message of an enqueue batch."""

    id: str | None = None
    priority: int | None = None
    payload: Raw | UnsetType = UNSET
    metadata: dict[str, str] = {}
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
            payload=_raw(self.payload),
            metadata=self.metadata,
            delay_seconds=self.delay_seconds,
            visible_at=self.visible_at,
            max_attempts=self.max_attempts,
            lease_seconds=self.lease_seconds,
            ttl_seconds=self.ttl_seconds,
            expires_at=self.expires_at,
        )


class Enqueue(In):
    """``POST …/messages``: 1 to 1000 messages, all or nothing."""

    messages: list[NewMessageIn]

    def to_models(self) -> list[NewMessage]:
        """As the core's new messages."""
        return [m.to_model() for m in self.messages]


class EnqueuedOut(Out):
    """What enqueue did with one message."""

    id: str
    state: str
    created: bool


class EnqueueOut(Out):
    """The answer to an enqueue, in request order."""

    messages: list[EnqueuedOut]

    @classmethod
    def of(cls, outcomes: list[EnqueueOutcome]) -> EnqueueOut:
        """From the core's outcomes."""
        return cls([EnqueuedOut(o.id, o.state, o.created) for o in outcomes])


# --- consuming -----------------------------------------------------------------------------------


class Dequeue(In):
    """``POST …/dequeue``."""

    count: int = 1
    lease_seconds: int | None = None
    wait_seconds: int = 0
    metadata: dict[str, str] = {}


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


class DequeueOut(Out):
    """The answer to a dequeue (possibly empty)."""

    messages: list[LeasedOut]

    @classmethod
    def of(cls, leased: list[LeasedMessage]) -> DequeueOut:
        """From the core's leased messages."""
        return cls(
            [
                LeasedOut(
                    m.id,
                    m.lease_id,
                    m.lease_expires_at,
                    m.attempt,
                    m.priority,
                    Raw(m.payload),
                    m.metadata,
                    m.enqueued_at,
                )
                for m in leased
            ]
        )


class Complete(In):
    """``POST …/messages/{id}/complete``."""

    lease_id: str


class Fail(In):
    """``POST …/messages/{id}/fail``."""

    lease_id: str
    error: str | None = None
    retry_delay_seconds: int | None = None


class Extend(In):
    """``POST …/messages/{id}/extend``."""

    lease_id: str
    lease_seconds: int


class Cancel(In):
    """``POST …/messages/{id}/cancel``."""

    lease_id: str | None = None
    force: bool = False
    reason: str | None = None


class Requeue(In):
    """``POST …/messages/{id}/requeue``."""

    delay_seconds: int = 0


class AckComplete(In):
    """A message to complete in a batch acknowledgement."""

    id: str
    lease_id: str


class AckFail(In):
    """A message to fail in a batch acknowledgement."""

    id: str
    lease_id: str
    error: str | None = None


class Ack(In):
    """``POST …/ack``."""

    complete: list[AckComplete] = []
    fail: list[AckFail] = []

    def refs(self) -> tuple[list[LeaseRef], list[LeaseRef]]:
        """The complete and fail items as the core's lease references."""
        return (
            [LeaseRef(i.id, i.lease_id) for i in self.complete],
            [LeaseRef(i.id, i.lease_id, i.error) for i in self.fail],
        )


class AckResultOut(Out, omit_defaults=True):
    """The outcome of one item; ``error`` (an error code) only when it failed."""

    id: str
    ok: bool
    error: str | None = None


class AckOut(Out):
    """The answer to a batch acknowledgement, complete items first, in request order."""

    results: list[AckResultOut]

    @classmethod
    def of(cls, results: list[AckResult]) -> AckOut:
        """From the core's results."""
        return cls([AckResultOut(r.id, r.ok, r.error) for r in results])


# --- managing messages ---------------------------------------------------------------------------


class MessagePatch(In):
    """``PATCH …/messages/{id}``: absent (or ``null``) fields stay as they are; a ``null``
    payload is not "absent": it sets the payload to JSON ``null``."""

    priority: int | None = None
    payload: Raw | UnsetType = UNSET
    metadata: dict[str, str] | None = None
    visible_at: datetime | None = None

    def to_model(self) -> MessageChanges:
        """As the core's message changes."""
        return MessageChanges(self.priority, _raw(self.payload), self.metadata, self.visible_at)


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
    """``POST …/requeue``: send dead letters back, by state and optionally by id."""

    states: list[str] = msgspec.field(default_factory=lambda: ["errored"])
    ids: list[str] | None = None
    limit: int = validation.MAX_QUERY_LIMIT


class Requeued(Out):
    """How many dead letters were requeued."""

    requeued: int


# --- operations ----------------------------------------------------------------------------------


class Health(Out):
    """``GET /healthz``."""

    status: Literal["ok"] = "ok"


class Ready(Out):
    """``GET /readyz``: the database answers and its schema is at ``revision`` (the head)."""

    status: Literal["ready"]
    revision: str | None


REQUEST_TYPES: tuple[type[In], ...] = (
    NamespaceCreate,
    TokenIssue,
    QueuePut,
    QueuePatch,
    Purge,
    Enqueue,
    Dequeue,
    Complete,
    Fail,
    Extend,
    Cancel,
    Requeue,
    Ack,
    MessagePatch,
    RequeueDeadLetters,
)
