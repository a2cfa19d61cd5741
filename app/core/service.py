"""The queue service: every operation of docs/concepts.md and the admin plane of docs/api.md.

It validates input (:mod:`app.core.validation`), resolves queue defaults, calls the store's
guarded statements, and turns "the guard matched nothing" into the precise error. It knows no
HTTP and no SQL; authorization of a caller for a namespace is the edge's job
(:meth:`Principal.may_access`), authentication is :meth:`QueueService.authenticate`.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import secrets
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import uuid_utils

from app.core import catalogue, validation
from app.core.errors import (
    CatalogueChangedError,
    ConflictError,
    InvalidStateError,
    LeaseMismatchError,
    NotFoundError,
    QueuePausedError,
    ValidationError,
)
from app.core.models import (
    MUTABLE_QUEUE_FIELDS,
    AckResult,
    EnqueueOutcome,
    IssuedToken,
    LeasedMessage,
    LeaseRef,
    Message,
    MessageChanges,
    MessageFilter,
    MessagePage,
    Namespace,
    NewMessage,
    Principal,
    Queue,
    QueueConfig,
    QueueStats,
    Token,
)
from app.core.ports import NewRow, Store
from app.core.states import DEAD_LETTER_STATES, LIVE_STATES, TERMINAL_STATES, Event, State

TOKEN_PREFIX = "sdl_"  # noqa: S105 - a public prefix, not a secret
_NAMESPACE_TOKEN = re.compile(r"sdl_[A-Za-z0-9_-]{43}")


@dataclass(slots=True)
class DequeuePlan:
    """A validated dequeue request with its resolved queue (looked up again when it changed)."""

    queue: Queue
    count: int
    lease_seconds: int | None
    metadata: dict[str, str]


@dataclass(frozen=True, slots=True)
class QueueDetail:
    """A queue with its live statistics."""

    queue: Queue
    stats: QueueStats


class Observer(Protocol):
    """Told what an operation changed, once it has committed (the metrics hook). Must be quick
    and must not raise: it runs inside the operation."""

    def enqueued(self, queue: Queue, count: int) -> None:
        """``count`` new messages were added to ``queue``."""

    def transitioned(self, queue: Queue, event: Event, count: int) -> None:
        """``event`` moved ``count`` messages of ``queue`` to another state."""


class _NoObserver:
    def enqueued(self, queue: Queue, count: int) -> None:
        pass

    def transitioned(self, queue: Queue, event: Event, count: int) -> None:
        pass


def is_namespace_token(secret: str) -> bool:
    """Whether ``secret`` has the shape of a namespace token: the prefix and 256 random bits,
    which no one can guess (unlike an operator-chosen admin token)."""
    return _NAMESPACE_TOKEN.fullmatch(secret) is not None


def hash_secret(secret: str) -> bytes:
    """How token secrets are stored: SHA-256 (secrets carry 256 random bits)."""
    return hashlib.sha256(secret.encode()).digest()


def _could_exist(pattern: re.Pattern[str], value: str) -> bool:
    """Whether ``value`` is a well-formed name or id; one that is not was never stored."""
    return pattern.fullmatch(value) is not None


_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _lease_uuid(lease_id: str | None) -> str | None:
    """A lease id as the database compares it; anything that is not a UUID matches nothing."""
    if lease_id is None:
        return None
    if _CANONICAL_UUID.fullmatch(lease_id):
        # The form the server hands out: already what str(UUID(...)) would give, without the
        # parse (a batch ack of 100 items spent a tenth of its CPU here).
        return lease_id
    try:
        return str(uuid.UUID(lease_id))
    except ValueError:
        return None


P = ParamSpec("P")
R = TypeVar("R")


def _again_if_catalogue_changed(
    operation: Callable[Concatenate[QueueService, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[QueueService, P], Coroutine[Any, Any, R]]:
    """Run an operation again when a token or queue it looked up changed before its statement
    ran (:class:`CatalogueChangedError`: that statement applied nothing, so running it again is
    safe), after the caller is authenticated again (:func:`catalogue.renew`); at most
    ``catalogue.ATTEMPTS`` times. An operation that answered from its lookups alone has them
    confirmed current before it answers."""

    async def run(self: QueueService, /, *args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(1, catalogue.ATTEMPTS + 1):
            try:
                result = await operation(self, *args, **kwargs)
                await self.store.confirm_lookups()
                return result
            except CatalogueChangedError:
                if attempt == catalogue.ATTEMPTS:
                    raise
                await catalogue.renew()
        raise AssertionError("unreachable")

    functools.update_wrapper(run, operation)
    return run


class QueueService:
    """The operations of Sundial, over a :class:`Store`."""

    def __init__(
        self,
        store: Store,
        *,
        limits: validation.Limits | None = None,
        admin_token: str | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.store = store
        self.limits = limits or validation.Limits()
        self._admin_token = admin_token
        self.observer: Observer = observer or _NoObserver()
        """Told about every committed change (metrics); replaceable after construction."""

    # --- callers ------------------------------------------------------------------------------

    async def authenticate(self, secret: str) -> Principal | None:
        """Who presents ``secret``: the admin, a namespace token, or nobody (``None``)."""
        if self._admin_token and hmac.compare_digest(secret.encode(), self._admin_token.encode()):
            return Principal(is_admin=True)
        if not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
            return None
        token = await self.store.find_token(hash_secret(secret))
        if token is None:
            return None
        return Principal(is_admin=False, namespace=token.namespace, token_id=token.id)

    # --- namespaces and tokens ----------------------------------------------------------------

    async def create_namespace(self, name: str, description: str = "") -> Namespace:
        """Create a namespace (ConflictError when it exists)."""
        validation.name("name", name)
        validation.text("description", description)
        return await self.store.create_namespace(name, description)

    async def list_namespaces(self) -> list[Namespace]:
        """Every namespace."""
        return await self.store.list_namespaces()

    async def delete_namespace(self, name: str) -> None:
        """Delete a namespace with everything in it."""
        if not _could_exist(validation.NAME_PATTERN, name) or not await self.store.delete_namespace(
            name
        ):
            raise NotFoundError(f"namespace {name!r} does not exist", namespace=name)

    async def issue_token(
        self, namespace: str, label: str = "", expires_at: datetime | None = None
    ) -> IssuedToken:
        """Issue a namespace token; its secret is returned now and never again."""
        await self._require_namespace(namespace)
        validation.text("label", label, 200)
        if expires_at is not None:
            validation.timestamp("expires_at", expires_at)
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)  # is_namespace_token's shape
        token = await self.store.insert_token(
            namespace, str(uuid.uuid4()), label, hash_secret(secret), expires_at
        )
        return IssuedToken(token=token, secret=secret)

    async def list_tokens(self, namespace: str) -> list[Token]:
        """A namespace's tokens, without secrets."""
        await self._require_namespace(namespace)
        return await self.store.list_tokens(namespace)

    async def revoke_token(self, namespace: str, token_id: str) -> None:
        """Revoke a token; it stops working at once."""
        if (
            _lease_uuid(token_id) is None
            or not _could_exist(validation.NAME_PATTERN, namespace)
            or not await self.store.delete_token(namespace, token_id)
        ):
            raise NotFoundError(f"token {token_id!r} does not exist", token_id=token_id)

    async def _require_namespace(self, namespace: str) -> None:
        if not _could_exist(validation.NAME_PATTERN, namespace) or not (
            await self.store.namespace_exists(namespace)
        ):
            raise NotFoundError(f"namespace {namespace!r} does not exist", namespace=namespace)

    # --- queues -----------------------------------------------------------------------------

    async def get_queue_or_404(self, namespace: str, name: str) -> Queue:
        """The queue, or NotFoundError."""
        if not (
            _could_exist(validation.NAME_PATTERN, namespace)
            and _could_exist(validation.NAME_PATTERN, name)
        ):
            raise NotFoundError(f"queue {namespace}/{name} does not exist", queue=name)
        queue = await self.store.get_queue(namespace, name)
        if queue is None:
            raise NotFoundError(f"queue {namespace}/{name} does not exist", queue=name)
        return queue

    @_again_if_catalogue_changed
    async def put_queue(self, namespace: str, name: str, config: QueueConfig) -> tuple[Queue, bool]:
        """Create a queue, or bring an existing one to ``config``; returns (queue, created).

        ``kind``, ``exclusive_key`` and ``filter_key`` are fixed at creation: changing them is a
        ConflictError.
        """
        validation.name("queue", name)
        validation.queue_config(config)
        if not _could_exist(validation.NAME_PATTERN, namespace):
            raise NotFoundError(f"namespace {namespace!r} does not exist", namespace=namespace)
        created = await self.store.insert_queue(namespace, name, config)
        if created is not None:
            return created, True
        existing = await self.get_queue_or_404(namespace, name)
        fixed = existing.config
        if (fixed.kind, fixed.exclusive_key, fixed.filter_key) != (
            config.kind,
            config.exclusive_key,
            config.filter_key,
        ):
            raise ConflictError(
                f"queue {namespace}/{name} exists as {fixed.kind}"
                f" (exclusive_key={fixed.exclusive_key!r}, filter_key={fixed.filter_key!r});"
                " kind, exclusive_key and filter_key cannot change",
                queue=name,
            )
        if existing.config == config:
            return existing, False
        changes = {
            key: getattr(config, key)
            for key in MUTABLE_QUEUE_FIELDS
            if getattr(config, key) != getattr(existing.config, key)
        }
        resumed = fixed.dequeue_paused and not config.dequeue_paused
        return await self.store.update_queue(existing.id, changes, wake=resumed), False

    @_again_if_catalogue_changed
    async def update_queue(self, namespace: str, name: str, changes: Mapping[str, Any]) -> Queue:
        """Change some of a queue's mutable settings (pause switches included)."""
        checked = validation.queue_patch(changes)
        queue = await self.get_queue_or_404(namespace, name)
        merged = replace(queue.config, **checked)
        validation.queue_config(merged)
        if not checked:
            return queue
        resumed = queue.config.dequeue_paused and not merged.dequeue_paused
        return await self.store.update_queue(queue.id, checked, wake=resumed)

    @_again_if_catalogue_changed
    async def delete_queue(self, namespace: str, name: str) -> None:
        """Delete a queue and its messages."""
        if not (
            _could_exist(validation.NAME_PATTERN, namespace)
            and _could_exist(validation.NAME_PATTERN, name)
            and await self.store.delete_queue(namespace, name)
        ):
            raise NotFoundError(f"queue {namespace}/{name} does not exist", queue=name)

    @_again_if_catalogue_changed
    async def list_queues(self, namespace: str) -> list[tuple[Queue, dict[State, int]]]:
        """A namespace's queues with their message counts per state."""
        await self._require_namespace(namespace)
        queues = await self.store.list_queues(namespace)
        counts = await self.store.queue_counts([q.id for q in queues])
        return [(q, counts[q.id]) for q in queues]

    @_again_if_catalogue_changed
    async def queue_detail(self, namespace: str, name: str) -> QueueDetail:
        """A queue's configuration, counts per state and oldest pending age."""
        queue = await self.get_queue_or_404(namespace, name)
        counts = (await self.store.queue_counts([queue.id]))[queue.id]
        age = await self.store.oldest_pending_age(queue.id)
        return QueueDetail(queue, QueueStats(counts, age))

    @_again_if_catalogue_changed
    async def purge_queue(
        self, namespace: str, name: str, states: Sequence[str] | None = None
    ) -> int:
        """Delete a queue's messages in ``states`` (all states by default); returns how many."""
        chosen = validation.states("states", states) if states is not None else tuple(State)
        queue = await self.get_queue_or_404(namespace, name)
        return await self.store.purge(queue.id, chosen)

    # --- producing ----------------------------------------------------------------------------

    @_again_if_catalogue_changed
    async def enqueue(
        self, namespace: str, queue_name: str, messages: Sequence[NewMessage]
    ) -> list[EnqueueOutcome]:
        """Add a batch (all or nothing). Ids that exist already are reported, never duplicated."""
        queue = await self.get_queue_or_404(namespace, queue_name)
        validation.enqueue_batch(messages, queue.config, self.limits)
        if queue.config.enqueue_paused:
            raise QueuePausedError(f"queue {namespace}/{queue_name} is paused for enqueue")
        rows: list[NewRow] = []
        first_index: dict[str, int] = {}
        order: list[int] = []
        for message in messages:
            row = self._new_row(message, queue.config)
            index = first_index.setdefault(row.id, len(rows))
            if index == len(rows):
                rows.append(row)
            order.append(index)
        outcomes = await self.store.enqueue(queue, rows)
        self.observer.enqueued(queue, sum(o.created for o in outcomes))
        seen: set[int] = set()
        results = []
        for index in order:
            outcome = outcomes[index]
            if index in seen:
                outcome = replace(outcome, created=False)
            seen.add(index)
            results.append(outcome)
        return results

    @staticmethod
    def _new_row(message: NewMessage, config: QueueConfig) -> NewRow:
        exclusive_value = None
        if config.exclusive_key is not None:
            exclusive_value = message.metadata[config.exclusive_key]
        delay = message.delay_seconds
        if delay is None:
            delay = config.delay_seconds
        return NewRow(
            id=message.id if message.id is not None else str(uuid_utils.uuid7()),
            priority=message.priority,
            payload=message.payload,
            metadata=message.metadata,
            exclusive_value=exclusive_value,
            max_attempts=message.max_attempts,
            lease_seconds=message.lease_seconds,
            delay_seconds=delay,
            visible_at=message.visible_at,
            ttl_seconds=message.ttl_seconds,
            expires_at=message.expires_at,
        )

    # --- consuming ----------------------------------------------------------------------------

    @_again_if_catalogue_changed
    async def plan_dequeue(
        self,
        namespace: str,
        queue_name: str,
        *,
        count: int = 1,
        lease_seconds: int | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> DequeuePlan:
        """Validate a dequeue request and resolve its queue (a long poll plans once, then
        dequeues as often as it is woken)."""
        validation.integer("count", count, 1, validation.MAX_BATCH_DEQUEUE)
        if lease_seconds is not None:
            validation.integer("lease_seconds", lease_seconds, 1, validation.MAX_LEASE_SECONDS)
        wanted = validation.metadata("metadata", metadata or {})
        queue = await self.get_queue_or_404(namespace, queue_name)
        return DequeuePlan(queue, count, lease_seconds, wanted)

    async def dequeue(
        self,
        namespace: str,
        queue_name: str,
        *,
        count: int = 1,
        lease_seconds: int | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> list[LeasedMessage]:
        """Lease up to ``count`` visible messages; none while the queue is dequeue-paused.
        Both steps look up again when the catalogue changes under them."""
        plan = await self.plan_dequeue(
            namespace, queue_name, count=count, lease_seconds=lease_seconds, metadata=metadata
        )
        return await self.dequeue_planned(plan)

    async def dequeue_planned(self, plan: DequeuePlan) -> list[LeasedMessage]:
        """Run a planned dequeue (again and again, for a long poll).

        Each run checks that the caller and the queue are still what the plan found, however
        long ago it planned: a queue paused (or resumed, reconfigured, deleted) since, or a token
        revoked since, is seen here; the plan is then made again from the queue as it is now.
        """
        for attempt in range(1, catalogue.ATTEMPTS + 1):
            catalogue.recheck()
            try:
                if plan.queue.config.dequeue_paused:
                    await self.store.confirm_lookups()  # still paused?
                    return []
                leased = await self.store.dequeue(
                    plan.queue, plan.count, plan.lease_seconds, plan.metadata
                )
                break
            except CatalogueChangedError:
                if attempt == catalogue.ATTEMPTS:
                    raise
                await catalogue.renew()
                plan.queue = await self.get_queue_or_404(plan.queue.namespace, plan.queue.name)
        if leased:
            self.observer.transitioned(plan.queue, Event.DEQUEUE, len(leased))
        return leased

    @_again_if_catalogue_changed
    async def complete(
        self, namespace: str, queue_name: str, message_id: str, lease_id: str
    ) -> Message:
        """Complete a message with its current lease.

        Completing again with the lease that completed it returns the message unchanged, so a
        consumer can safely retry a complete whose answer it lost.
        """
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        lease = _lease_uuid(lease_id)
        message = await self.store.complete(queue, message_id, lease)
        if message is not None:
            self.observer.transitioned(queue, Event.COMPLETE, 1)
            return message
        guard = await self.store.guard_state(queue, message_id)
        if guard is not None and guard.state is State.COMPLETED and guard.lease_id == lease:
            again = await self.store.get_message(queue, message_id)
            if again is not None:
                return again
        if lease is not None:
            # The same retry after the scheduler moved the message into history (even while
            # this was looking, or once its id was enqueued again): history keeps the lease
            # that completed it.
            archived = await self.store.archived_completions(queue, [(message_id, lease)])
            if message_id in archived:
                return archived[message_id]
        raise self._lease_refusal(queue, message_id, guard is not None)

    @_again_if_catalogue_changed
    async def fail(
        self,
        namespace: str,
        queue_name: str,
        message_id: str,
        lease_id: str,
        *,
        error: str | None = None,
        retry_delay_seconds: int | None = None,
    ) -> Message:
        """Fail an attempt: retried (after the retry delay) while attempts remain, else errored."""
        if error is not None:
            validation.text("error", error)
        if retry_delay_seconds is not None:
            validation.integer(
                "retry_delay_seconds", retry_delay_seconds, 0, validation.MAX_DELAY_SECONDS
            )
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        message = await self.store.fail(
            queue, message_id, _lease_uuid(lease_id), error, retry_delay_seconds
        )
        if message is not None:
            self.observer.transitioned(queue, Event.FAIL, 1)
            return message
        exists = await self.store.guard_state(queue, message_id) is not None
        raise self._lease_refusal(queue, message_id, exists)

    @_again_if_catalogue_changed
    async def extend(
        self, namespace: str, queue_name: str, message_id: str, lease_id: str, lease_seconds: int
    ) -> Message:
        """Heartbeat: the lease now expires ``lease_seconds`` from now."""
        validation.integer("lease_seconds", lease_seconds, 1, validation.MAX_LEASE_SECONDS)
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        message = await self.store.extend(queue, message_id, _lease_uuid(lease_id), lease_seconds)
        if message is not None:
            return message
        exists = await self.store.guard_state(queue, message_id) is not None
        raise self._lease_refusal(queue, message_id, exists)

    @_again_if_catalogue_changed
    async def ack(
        self,
        namespace: str,
        queue_name: str,
        complete: Sequence[LeaseRef],
        fail: Sequence[LeaseRef],
    ) -> list[AckResult]:
        """Complete and fail many messages; each item succeeds or fails on its own."""
        if len(complete) + len(fail) > validation.MAX_BATCH_ACK:
            raise ValidationError("complete", f"at most {validation.MAX_BATCH_ACK} items in all")
        for index, item in enumerate(fail):
            if item.error is not None:
                validation.text(f"fail[{index}].error", item.error)
        queue = await self.get_queue_or_404(namespace, queue_name)

        # Each lease id as the database compares it, resolved once per item.
        to_complete = [(i, _lease_uuid(i.lease_id)) for i in complete]
        to_fail = [(i, _lease_uuid(i.lease_id)) for i in fail]

        def well_formed(item: LeaseRef) -> bool:
            return _could_exist(validation.MESSAGE_ID_PATTERN, item.id)

        completed, failed = await self.store.acknowledge(
            queue,
            [(i.id, lease) for i, lease in to_complete if well_formed(i)],
            [(i.id, lease, i.error) for i, lease in to_fail if well_formed(i)],
        )
        self.observer.transitioned(queue, Event.COMPLETE, len(completed))
        self.observer.transitioned(queue, Event.FAIL, len(failed))
        # Each item is judged by its own (id, lease) pair: a stale lease listed next to the
        # current one for the same id is refused, as fencing requires.
        refused = {i.id for i, lease in to_complete if (i.id, lease) not in completed}
        refused |= {i.id for i, lease in to_fail if (i.id, lease) not in failed}
        known = [i for i in refused if _could_exist(validation.MESSAGE_ID_PATTERN, i)]
        guards = await self.store.guard_states(queue, known) if known else {}

        def repeated_live(item_id: str, lease: str | None) -> bool:
            guard = guards.get(item_id)
            return guard is not None and guard.state is State.COMPLETED and guard.lease_id == lease

        # Refused completes that may repeat one whose message is in history by now (as in
        # complete()): history keeps the lease that completed it.
        archived = await self.store.archived_completions(
            queue,
            [
                (i.id, lease)
                for i, lease in to_complete
                if lease is not None
                and (i.id, lease) not in completed
                and well_formed(i)
                and not repeated_live(i.id, lease)
            ],
        )

        def result(
            item: LeaseRef, lease: str | None, done: set[tuple[str, str]], *, completing: bool
        ) -> AckResult:
            if (item.id, lease) in done:
                return AckResult(item.id, ok=True)
            if completing and lease is not None:
                # The same idempotent retry that complete() accepts, live or from history.
                repeated_archived = item.id in archived and archived[item.id].lease_id == lease
                if repeated_live(item.id, lease) or repeated_archived:
                    return AckResult(item.id, ok=True)
            if item.id not in guards:
                return AckResult(item.id, ok=False, error=NotFoundError.code)
            return AckResult(item.id, ok=False, error=LeaseMismatchError.code)

        return [result(i, lease, completed, completing=True) for i, lease in to_complete] + [
            result(i, lease, failed, completing=False) for i, lease in to_fail
        ]

    # --- managing messages ----------------------------------------------------------------------

    @_again_if_catalogue_changed
    async def get_message(self, namespace: str, queue_name: str, message_id: str) -> Message:
        """One message, in any state."""
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        message = await self.store.get_message(queue, message_id)
        if message is None:
            raise self._message_not_found(queue, message_id)
        return message

    @_again_if_catalogue_changed
    async def update_message(
        self, namespace: str, queue_name: str, message_id: str, changes: MessageChanges
    ) -> Message:
        """Change a message that is still waiting (invisible or pending)."""
        validation.message_changes(changes, self.limits)
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        key = queue.config.exclusive_key
        if key is not None and changes.metadata is not None and not changes.metadata.get(key):
            raise ValidationError(f"metadata.{key}", "is required in this exclusive queue")
        message = await self.store.update_message(queue, message_id, changes)
        if message is not None:
            return message
        raise await self._state_refusal(queue, message_id, "invisible or pending", "changed")

    @_again_if_catalogue_changed
    async def delete_message(self, namespace: str, queue_name: str, message_id: str) -> None:
        """Remove a message in any state (a running lease becomes invalid)."""
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        if not await self.store.delete_message(queue, message_id):
            raise self._message_not_found(queue, message_id)

    @_again_if_catalogue_changed
    async def cancel(
        self,
        namespace: str,
        queue_name: str,
        message_id: str,
        *,
        lease_id: str | None = None,
        force: bool = False,
        reason: str | None = None,
    ) -> Message:
        """Cancel a live message; a running one needs its current lease or ``force``."""
        if reason is not None:
            validation.text("reason", reason)
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        message = await self.store.cancel(queue, message_id, _lease_uuid(lease_id), force, reason)
        if message is not None:
            self.observer.transitioned(queue, Event.CANCEL, 1)
            return message
        guard = await self.store.guard_state(queue, message_id)
        if guard is None:
            raise self._message_not_found(queue, message_id)
        if guard.state in TERMINAL_STATES:
            raise InvalidStateError(
                f"message {message_id!r} is already {guard.state}", state=str(guard.state)
            )
        raise LeaseMismatchError(
            f"message {message_id!r} is running: cancel it with its current lease_id or force",
            message_id=message_id,
        )

    @_again_if_catalogue_changed
    async def requeue(
        self, namespace: str, queue_name: str, message_id: str, delay_seconds: int = 0
    ) -> Message:
        """Send a dead letter (errored or canceled) back to the queue with attempts reset."""
        validation.integer("delay_seconds", delay_seconds, 0, validation.MAX_DELAY_SECONDS)
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        message = await self.store.requeue(queue, message_id, delay_seconds)
        if message is not None:
            self.observer.transitioned(queue, Event.REQUEUE, 1)
            return message
        raise await self._state_refusal(queue, message_id, "errored or canceled", "requeued")

    @_again_if_catalogue_changed
    async def requeue_dead_letters(
        self,
        namespace: str,
        queue_name: str,
        states: Sequence[str] = ("errored",),
        ids: Sequence[str] | None = None,
        limit: int = validation.MAX_QUERY_LIMIT,
    ) -> int:
        """Requeue many dead letters at once; returns how many."""
        chosen = validation.states("states", states)
        for index, state in enumerate(chosen):
            if state not in DEAD_LETTER_STATES:
                raise ValidationError(f"states[{index}]", "must be errored or canceled")
        if ids is not None:
            if len(ids) > validation.MAX_QUERY_LIMIT:
                raise ValidationError("ids", f"at most {validation.MAX_QUERY_LIMIT} ids")
            for index, message_id in enumerate(ids):
                validation.message_id(f"ids[{index}]", message_id)
        validation.integer("limit", limit, 1, 100_000)
        queue = await self.get_queue_or_404(namespace, queue_name)
        requeued = await self.store.requeue_many(queue, chosen, ids, limit)
        self.observer.transitioned(queue, Event.REQUEUE, requeued)
        return requeued

    @_again_if_catalogue_changed
    async def query_messages(
        self, namespace: str, queue_name: str, spec: MessageFilter
    ) -> MessagePage:
        """List messages by state, metadata and priority range, a page at a time."""
        validation.integer("limit", spec.limit, 1, validation.MAX_QUERY_LIMIT)
        validation.metadata("metadata", spec.metadata)
        queue = await self.get_queue_or_404(namespace, queue_name)
        return await self.store.query(queue, spec)

    async def _queue_with_message(self, namespace: str, queue_name: str, message_id: str) -> Queue:
        """The queue, after checking that ``message_id`` could name a message at all."""
        queue = await self.get_queue_or_404(namespace, queue_name)
        if not _could_exist(validation.MESSAGE_ID_PATTERN, message_id):
            raise self._message_not_found(queue, message_id)
        return queue

    # --- errors -----------------------------------------------------------------------------

    async def _state_refusal(
        self, queue: Queue, message_id: str, allowed: str, verb: str
    ) -> NotFoundError | InvalidStateError:
        """Why a state-guarded statement changed nothing: no such message, or its state."""
        guard = await self.store.guard_state(queue, message_id)
        if guard is None:
            return self._message_not_found(queue, message_id)
        return InvalidStateError(
            f"message {message_id!r} is {guard.state}; only {allowed} messages can be {verb}",
            state=str(guard.state),
        )

    @staticmethod
    def _message_not_found(queue: Queue, message_id: str) -> NotFoundError:
        return NotFoundError(
            f"message {message_id!r} does not exist in queue {queue.namespace}/{queue.name}",
            message_id=message_id,
        )

    def _lease_refusal(
        self, queue: Queue, message_id: str, exists: bool
    ) -> NotFoundError | LeaseMismatchError:
        if not exists:
            return self._message_not_found(queue, message_id)
        return LeaseMismatchError(
            f"lease_id is not the current lease of message {message_id!r}, or it has expired",
            message_id=message_id,
        )


__all__ = ["LIVE_STATES", "DequeuePlan", "Observer", "QueueDetail", "QueueService", "hash_secret"]
