"""The seam between the queue's rules (:mod:`app.core.service`) and its storage.

:class:`Store` is what the service needs; :class:`app.store.postgres.PostgresStore` provides it.
Each transition method is one guarded statement that returns ``None`` when its guard matched
nothing; the service then asks :meth:`Store.guard_state` why, and raises the matching error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from app.core.dead_letters import Respawn
from app.core.models import (
    AccessKey,
    EnqueueOutcome,
    FilterValue,
    LeasedMessage,
    Message,
    MessageChanges,
    MessageFilter,
    MessagePage,
    Namespace,
    NextLease,
    Queue,
    QueueConfig,
    Token,
)
from app.core.periodic import PeriodicJob, PeriodicSpec
from app.core.states import State
from app.core.topics import TagFilter, Topic


@dataclass(slots=True)  # not frozen: see app.core.models.NewMessage
class NewRow:
    """A message ready to insert: id chosen, queue defaults resolved where they are fixed."""

    id: str
    priority: int | None
    payload: bytes | None
    metadata: dict[str, str]
    exclusive_value: str | None
    max_attempts: int | None
    lease_seconds: int | None
    delay_seconds: int
    visible_at: datetime | None
    ttl_seconds: int | None
    expires_at: datetime | None


Acked = dict[tuple[str, str], float | None]
"""The ``(id, lease_id)`` pairs an acknowledgement completed (or failed), each with how many
seconds its lease had been held (None if unknown): the processing-time metric's readings."""


@dataclass(frozen=True, slots=True)
class GuardState:
    """What a message looks like to a guard: its state, its lease, whether the lease is live."""

    state: State
    lease_id: str | None
    lease_live: bool


@dataclass(frozen=True, slots=True)
class LeaseRefusal:
    """Why a lease by id leased nothing, as the store found the message: its state, whether
    its ``visible_at`` has passed, whether its ``expires_at`` has, and whether another message of
    its exclusive value (``exclusive_value``) is running."""

    state: State
    due: bool
    expired: bool
    value_running: bool
    exclusive_value: str | None = None


class Store(Protocol):
    """Durable storage of namespaces, tokens, queues and messages."""

    async def create_namespace(
        self, name: str, description: str, pool: str | None = None
    ) -> Namespace: ...
    async def list_namespaces(self) -> list[Namespace]: ...
    async def namespace_exists(self, name: str) -> bool: ...
    async def delete_namespace(self, name: str) -> bool: ...
    async def insert_token(
        self,
        namespace: str,
        token_id: str,
        label: str,
        secret_hash: bytes,
        expires_at: datetime | None,
        access_key: tuple[str, bytes] | None = None,
        *,
        limits: Mapping[str, float | None],
    ) -> Token: ...
    async def list_tokens(self, namespace: str) -> list[Token]: ...
    async def delete_token(self, namespace: str, token_id: str) -> bool: ...
    async def update_token_limits(
        self, namespace: str, token_id: str, limits: Mapping[str, float | None]
    ) -> Token | None: ...
    async def hit_token_rate(self, namespace: str, token_id: str, kind: str) -> float | None: ...
    async def find_token(
        self, secret_hash: bytes, namespace: str | None = None
    ) -> Token | None: ...
    async def find_access_key(self, access_key_id: str) -> AccessKey | None: ...
    async def confirm_lookups(self) -> None: ...

    async def get_queue(self, namespace: str, name: str) -> Queue | None: ...
    async def insert_queue(
        self,
        namespace: str,
        name: str,
        config: QueueConfig,
        sqs: Mapping[str, Any] | None = None,
    ) -> Queue | None: ...
    async def update_queue(
        self,
        queue: Queue,
        changes: Mapping[str, Any],
        *,
        wake: bool = False,
        sqs_patch: Mapping[str, Mapping[str, str | None]] | None = None,
    ) -> Queue: ...
    async def delete_queue(self, namespace: str, name: str) -> bool: ...
    async def list_queues(self, namespace: str) -> list[Queue]: ...
    async def queue_counts(self, of: Sequence[Queue]) -> dict[int, dict[State, int]]: ...
    async def oldest_pending_age(self, queue: Queue) -> float | None: ...
    async def purge(self, queue: Queue, states: Sequence[State]) -> int: ...

    async def enqueue(
        self, queue: Queue, rows: Sequence[NewRow], replace: bool = False
    ) -> list[EnqueueOutcome]: ...
    async def lease_message(
        self, queue: Queue, message_id: str, lease_seconds: int | None
    ) -> LeasedMessage | LeaseRefusal | None: ...
    async def dequeue(
        self,
        queue: Queue,
        count: int,
        lease_seconds: int | None,
        metadata: Mapping[str, FilterValue],
    ) -> list[LeasedMessage]: ...
    async def next_due_in(self, queue: Queue) -> float | None: ...
    async def next_due_in_any(self, queues: Sequence[Queue]) -> float | None: ...
    async def get_message(self, queue: Queue, message_id: str) -> Message | None: ...
    async def guard_state(self, queue: Queue, message_id: str) -> GuardState | None: ...
    async def guard_states(
        self, queue: Queue, message_ids: Sequence[str]
    ) -> dict[str, GuardState]: ...
    async def archived_completions(
        self, queue: Queue, items: Sequence[tuple[str, str]]
    ) -> dict[str, Message]: ...
    async def complete(
        self, queue: Queue, message_id: str, lease_id: str | None
    ) -> Message | None: ...
    async def fail(
        self,
        queue: Queue,
        message_id: str,
        lease_id: str | None,
        error: str | None,
        retry_delay_seconds: int | None,
    ) -> Message | None: ...
    async def extend(
        self, queue: Queue, message_id: str, lease_id: str | None, lease_seconds: int
    ) -> Message | None: ...
    async def cancel(
        self,
        queue: Queue,
        message_id: str,
        lease_id: str | None,
        force: bool,
        reason: str | None,
    ) -> Message | None: ...
    async def requeue(self, queue: Queue, message_id: str, terms: Respawn) -> Message | None: ...
    async def update_message(
        self, queue: Queue, message_id: str, changes: MessageChanges
    ) -> Message | None: ...
    async def delete_message(self, queue: Queue, message_id: str) -> bool: ...
    async def acknowledge(
        self,
        queue: Queue,
        complete: Sequence[tuple[str, str | None]],
        fail: Sequence[tuple[str, str | None, str | None]],
    ) -> tuple[Acked, Acked]: ...
    async def acknowledge_and_claim(
        self,
        queue: Queue,
        complete: Sequence[tuple[str, str | None]],
        fail: Sequence[tuple[str, str | None, str | None]],
        claim: NextLease,
    ) -> tuple[Acked, Acked, list[LeasedMessage]]: ...
    async def requeue_many(
        self,
        queue: Queue,
        states: Sequence[State],
        ids: Sequence[str] | None,
        limit: int,
        terms: Respawn,
    ) -> int: ...
    async def delete_dead_letters(
        self, queue: Queue, states: Sequence[State], ids: Sequence[str] | None, limit: int
    ) -> int: ...
    async def query(self, queue: Queue, spec: MessageFilter) -> MessagePage: ...
    # Fan-out topics (app/core/topics.py): read fresh, never from memory.
    async def get_topic(self, namespace: str, name: str) -> Topic | None: ...
    async def list_topics(self, namespace: str) -> list[Topic]: ...
    async def put_topic(
        self, namespace: str, name: str, subscriptions: Sequence[tuple[Queue, TagFilter | None]]
    ) -> tuple[Topic, bool]: ...
    async def subscribe(
        self, namespace: str, topic: str, queue: Queue, tags: TagFilter | None
    ) -> tuple[Topic, bool]: ...
    async def unsubscribe(self, namespace: str, topic: str, queue: Queue) -> bool: ...
    async def delete_topic(self, namespace: str, name: str) -> bool: ...
    async def publish(
        self, topic: Topic, targets: Sequence[tuple[Queue, Sequence[NewRow]]]
    ) -> list[list[EnqueueOutcome]]: ...
    # Periodic (cron) jobs (app/core/periodic.py); their firing is the scheduler's.
    async def put_periodic_job(
        self,
        namespace: str,
        name: str,
        spec: PeriodicSpec,
        expected_updated_at: datetime | None = None,
    ) -> tuple[PeriodicJob, bool] | None: ...
    async def get_periodic_job(self, namespace: str, name: str) -> PeriodicJob | None: ...
    async def list_periodic_jobs(
        self, namespace: str, queue: str | None = None
    ) -> list[PeriodicJob]: ...
    async def delete_periodic_job(self, namespace: str, name: str) -> bool: ...
    async def trigger_periodic_job(
        self, namespace: str, name: str
    ) -> tuple[bool, str | None, str | None]: ...
