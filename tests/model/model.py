"""An in-memory model of Sundial's message life cycle, written from docs/concepts.md alone.

One module though over 400 lines: one model of the spec, to be read as a whole against
docs/concepts.md (the choices it makes, listed below, and the operations that make them).

It covers states and transitions with fenced leases, per-message overrides and retry backoff,
exclusive queues and order, for the operations of ``QueueService`` that a
:mod:`tests.model.test_stateful` machine drives. It deliberately imports nothing from ``app``:
the point is to compare two independent readings of the spec, so the transition table, the retry
rule and the backoff formula are restated here, not reused.

Time is a model clock in whole seconds (``Model.now``) that only :meth:`Model.advance` moves.
Every timestamp of a message is a model time. Nothing happens to a message "by itself": the
time-driven transitions run only in :meth:`Model.tick`, as the scheduler's passes do.

Where the spec leaves freedom, the model makes one precise choice: the behaviour the service
has today and its docstrings describe. Changing one of these is an API change; change it here too.

* **Lease operations** (complete, fail, extend) succeed only with the message's current lease:
  running, that ``lease_id``, and ``lease_expires_at`` still in the future. Anything else is
  ``LEASE_MISMATCH`` whatever the state (a lease of a pending message is not current either);
  ``NOT_FOUND`` when the message does not exist.
* **Idempotent complete**: completing a completed message again with the lease that completed it
  succeeds and changes nothing.
* **Cancel** of a terminal message is ``INVALID_STATE``; of a running one needs the current lease
  or ``force`` (else ``LEASE_MISMATCH``); a lease given for a waiting message is ignored.
* **Between ticks**: a running message whose lease has expired stays running (its exclusive value
  stays held) until the scheduler releases it, though its lease is no longer current; a message past
  ``expires_at`` keeps its state until the scheduler cancels it, but is no longer dequeued.
* **Due messages**: dequeue serves an invisible message whose ``visible_at`` has passed as if it
  were pending (the scheduler need not have promoted it).
* **Tick order**: promote, then release expired leases, then expire (a running message whose lease
  and ``expires_at`` have both passed is released first).
* **Retry** (fail, lease expiry): errored when ``attempts >= max_attempts``; otherwise the delay is
  the explicit ``retry_delay_seconds`` of a fail, else the queue's backoff
  ``min(base * 2**(attempts-1), cap)``; invisible until ``now + delay`` when it is positive,
  pending otherwise.
* **Requeue** resets attempts, drops lease and ``expires_at``; visible after ``delay``.
* **Update** (invisible or pending only) recomputes the state from ``visible_at``.
* **Enqueue** of an existing id creates nothing and reports the existing message's state; within
  one batch the first occurrence of an id wins. A batch is refused as a whole (validation first,
  then ``enqueue_paused``).
* **Dequeue** picks, among eligible messages, lowest ``priority`` first, then enqueue order; an
  exclusive queue skips values held by a running message and takes at most one per value. With no
  concurrency that makes the answer unique.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

INVISIBLE = "invisible"
PENDING = "pending"
RUNNING = "running"
COMPLETED = "completed"
CANCELED = "canceled"
ERRORED = "errored"

LIVE = frozenset({INVISIBLE, PENDING, RUNNING})
TERMINAL = frozenset({COMPLETED, CANCELED, ERRORED})
DEAD_LETTERS = frozenset({ERRORED, CANCELED})
WAITING = frozenset({INVISIBLE, PENDING})

# Refusal kinds (the machine maps them to app.core.errors classes).
NOT_FOUND = "not_found"
LEASE_MISMATCH = "lease_mismatch"
INVALID_STATE = "invalid_state"
VALIDATION = "validation"
PAUSED = "paused"


class Refusal(Exception):
    """The model refuses an operation; ``kind`` is one of the refusal constants."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


@dataclass(frozen=True)
class QueueSpec:
    """A queue's configuration (the fields the model needs)."""

    name: str
    exclusive_key: str | None = None
    lease_seconds: int = 30
    delay_seconds: int = 0
    max_attempts: int = 3
    retry_delay_seconds: int = 0
    retry_delay_max_seconds: int = 3600


@dataclass(frozen=True)
class Submitted:
    """One message of an enqueue batch, ids already resolved (server-generated ones included)."""

    id: str
    priority: int | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    delay_seconds: int | None = None
    max_attempts: int | None = None
    lease_seconds: int | None = None
    ttl_seconds: int | None = None


@dataclass
class MessageModel:
    """What the model knows about one message."""

    id: str
    seq: int
    priority: int | None  # None until the machine learns the server's default (enqueue time)
    state: str
    metadata: dict[str, str]
    exclusive_value: str | None
    max_attempts: int
    lease_seconds: int | None
    visible_at: int
    expires_at: int | None
    attempts: int = 0
    lease_id: str | None = None
    lease_expires_at: int | None = None
    expired: bool = False  # canceled by the scheduler because expires_at passed
    leases: list[str] = field(default_factory=list)  # every lease ever granted, oldest first

    @property
    def order(self) -> tuple[int, int]:
        """Dequeue order: priority, then enqueue order."""
        assert self.priority is not None, f"priority of {self.id} not resolved"
        return (self.priority, self.seq)


@dataclass
class QueueModel:
    """One queue: its configuration, pause switches and messages."""

    spec: QueueSpec
    messages: dict[str, MessageModel] = field(default_factory=dict)
    enqueue_paused: bool = False
    dequeue_paused: bool = False

    @property
    def exclusive(self) -> bool:
        return self.spec.exclusive_key is not None

    def held_values(self) -> set[str]:
        """Exclusive values that a running message holds (expired lease or not)."""
        return {
            m.exclusive_value
            for m in self.messages.values()
            if m.state == RUNNING and m.exclusive_value is not None
        }


@dataclass(frozen=True)
class TickCounts:
    """How many messages each scheduler pass changed."""

    promoted: int
    released: int
    expired: int


class Model:
    """Queues, messages and a clock; every operation mirrors docs/concepts.md's transitions."""

    def __init__(self, queues: Iterable[QueueSpec]) -> None:
        self.now = 0
        self.queues = {q.name: QueueModel(q) for q in queues}
        self._seq = 0

    # --- helpers -------------------------------------------------------------------------------

    def _message(self, queue: str, message_id: str) -> MessageModel:
        message = self.queues[queue].messages.get(message_id)
        if message is None:
            raise Refusal(NOT_FOUND, f"{queue}/{message_id}")
        return message

    def _lease_is_current(self, message: MessageModel, lease_id: str | None) -> bool:
        return (
            message.state == RUNNING
            and lease_id is not None
            and lease_id == message.lease_id
            and message.lease_expires_at is not None
            and message.lease_expires_at > self.now
        )

    @staticmethod
    def backoff(spec: QueueSpec, attempt: int) -> int:
        """The queue's retry delay after failed attempt ``attempt`` (1-based)."""
        if spec.retry_delay_seconds <= 0:
            return 0
        return min(
            spec.retry_delay_seconds * 2 ** max(attempt - 1, 0), spec.retry_delay_max_seconds
        )

    def _retry_or_dead(self, queue: QueueModel, message: MessageModel, delay: int | None) -> None:
        """After a failed or expired attempt: errored when attempts are used up, else retried."""
        message.lease_expires_at = None
        if message.attempts >= message.max_attempts:
            message.state = ERRORED
            return
        if delay is None:
            delay = self.backoff(queue.spec, message.attempts)
        message.visible_at = self.now + delay
        message.state = INVISIBLE if delay > 0 else PENDING

    def get(self, queue: str, message_id: str) -> MessageModel:
        """The message, or NOT_FOUND."""
        return self._message(queue, message_id)

    # --- time ----------------------------------------------------------------------------------

    def advance(self, seconds: int) -> None:
        """Let ``seconds`` pass. Nothing changes state until :meth:`tick`."""
        assert seconds >= 0
        self.now += seconds

    def tick(self) -> TickCounts:
        """The scheduler's passes, in its order: promote, release expired leases, expire."""
        everything = [(q, m) for q in self.queues.values() for m in q.messages.values()]
        promoted = released = expired = 0
        for _, m in everything:
            if m.state == INVISIBLE and m.visible_at <= self.now:
                m.state = PENDING
                promoted += 1
        for q, m in everything:
            if (
                m.state == RUNNING
                and m.lease_expires_at is not None
                and (m.lease_expires_at <= self.now)
            ):
                self._retry_or_dead(q, m, None)
                released += 1
        for _, m in everything:
            if m.state in LIVE and m.expires_at is not None and m.expires_at <= self.now:
                m.state = CANCELED
                m.lease_expires_at = None
                m.expired = True
                expired += 1
        return TickCounts(promoted, released, expired)

    # --- producing -----------------------------------------------------------------------------

    def check_enqueue(self, queue: str, metadatas: Iterable[dict[str, str]]) -> None:
        """Raise the refusal a batch with these metadata maps gets, if any (nothing changes)."""
        q = self.queues[queue]
        key = q.spec.exclusive_key
        for metadata in metadatas:
            if key is not None and not metadata.get(key):
                raise Refusal(VALIDATION, f"metadata.{key} missing")
        if q.enqueue_paused:
            raise Refusal(PAUSED)

    def enqueue(self, queue: str, batch: list[Submitted]) -> list[tuple[str, str, bool]]:
        """Add a batch; returns ``(id, state, created)`` per item, in order."""
        self.check_enqueue(queue, [item.metadata for item in batch])
        q = self.queues[queue]
        results = []
        for item in batch:
            existing = q.messages.get(item.id)
            if existing is not None:
                results.append((item.id, existing.state, False))
                continue
            delay = item.delay_seconds if item.delay_seconds is not None else q.spec.delay_seconds
            visible_at = self.now + delay
            key = q.spec.exclusive_key
            self._seq += 1
            message = MessageModel(
                id=item.id,
                seq=self._seq,
                priority=item.priority,
                state=INVISIBLE if visible_at > self.now else PENDING,
                metadata=dict(item.metadata),
                exclusive_value=item.metadata[key] if key is not None else None,
                max_attempts=(
                    item.max_attempts if item.max_attempts is not None else q.spec.max_attempts
                ),
                lease_seconds=item.lease_seconds,
                visible_at=visible_at,
                expires_at=self.now + item.ttl_seconds if item.ttl_seconds else None,
            )
            q.messages[item.id] = message
            results.append((item.id, message.state, True))
        return results

    # --- consuming -----------------------------------------------------------------------------

    def is_eligible(self, queue: QueueModel, m: MessageModel, wanted: dict[str, str]) -> bool:
        """Whether dequeue may lease ``m`` now, exclusivity aside."""
        ready = m.state == PENDING or (m.state == INVISIBLE and m.visible_at <= self.now)
        alive = m.expires_at is None or m.expires_at > self.now
        matches = all(m.metadata.get(k) == v for k, v in wanted.items())
        return ready and alive and matches

    def dequeue_choice(
        self, queue: str, count: int, wanted: dict[str, str] | None = None
    ) -> list[str]:
        """The ids a dequeue must lease, in the order it returns them (order; exclusive queues)."""
        q = self.queues[queue]
        if q.dequeue_paused:
            return []
        wanted = wanted or {}
        held = q.held_values()
        chosen: list[str] = []
        candidates = sorted(
            (m for m in q.messages.values() if self.is_eligible(q, m, wanted)),
            key=lambda m: m.order,
        )
        for m in candidates:
            if len(chosen) == count:
                break
            if q.exclusive:
                assert m.exclusive_value is not None
                if m.exclusive_value in held:
                    continue
                held.add(m.exclusive_value)
            chosen.append(m.id)
        return chosen

    def grant(
        self, queue: str, message_id: str, lease_id: str, lease_seconds: int | None = None
    ) -> MessageModel:
        """Apply a lease that dequeue granted (the machine checked the choice before)."""
        q = self.queues[queue]
        m = q.messages[message_id]
        assert self.is_eligible(q, m, {}), f"{message_id} is not eligible"
        assert lease_id not in m.leases, "a lease id was granted twice"
        m.state = RUNNING
        m.attempts += 1
        m.lease_id = lease_id
        m.leases.append(lease_id)
        duration = lease_seconds or m.lease_seconds or q.spec.lease_seconds
        m.lease_expires_at = self.now + duration
        return m

    def complete(self, queue: str, message_id: str, lease_id: str | None) -> MessageModel:
        m = self._message(queue, message_id)
        if self._lease_is_current(m, lease_id):
            m.state = COMPLETED
            m.lease_expires_at = None
            return m
        if m.state == COMPLETED and lease_id is not None and lease_id == m.lease_id:
            return m  # the idempotent retry of a complete whose answer was lost
        raise Refusal(LEASE_MISMATCH)

    def fail(
        self, queue: str, message_id: str, lease_id: str | None, retry_delay: int | None = None
    ) -> MessageModel:
        m = self._message(queue, message_id)
        if not self._lease_is_current(m, lease_id):
            raise Refusal(LEASE_MISMATCH)
        self._retry_or_dead(self.queues[queue], m, retry_delay)
        return m

    def extend(
        self, queue: str, message_id: str, lease_id: str | None, lease_seconds: int
    ) -> MessageModel:
        m = self._message(queue, message_id)
        if not self._lease_is_current(m, lease_id):
            raise Refusal(LEASE_MISMATCH)
        m.lease_expires_at = self.now + lease_seconds
        return m

    # --- managing ------------------------------------------------------------------------------

    def cancel(
        self, queue: str, message_id: str, lease_id: str | None, force: bool
    ) -> MessageModel:
        m = self._message(queue, message_id)
        if m.state in TERMINAL:
            raise Refusal(INVALID_STATE, m.state)
        if m.state == RUNNING and not force and not self._lease_is_current(m, lease_id):
            raise Refusal(LEASE_MISMATCH)
        m.state = CANCELED
        m.lease_expires_at = None
        return m

    def requeue(self, queue: str, message_id: str, delay: int) -> MessageModel:
        m = self._message(queue, message_id)
        if m.state not in DEAD_LETTERS:
            raise Refusal(INVALID_STATE, m.state)
        m.attempts = 0
        m.lease_id = None
        m.lease_expires_at = None
        m.expires_at = None
        m.expired = False
        m.visible_at = self.now + delay
        m.state = INVISIBLE if delay > 0 else PENDING
        return m

    def delete(self, queue: str, message_id: str) -> None:
        self._message(queue, message_id)
        del self.queues[queue].messages[message_id]

    def update(
        self, queue: str, message_id: str, priority: int | None, visible_at: int | None
    ) -> MessageModel:
        m = self._message(queue, message_id)
        if m.state not in WAITING:
            raise Refusal(INVALID_STATE, m.state)
        if priority is not None:
            m.priority = priority
        if visible_at is not None:
            m.visible_at = visible_at
        m.state = INVISIBLE if m.visible_at > self.now else PENDING
        return m

    def set_paused(self, queue: str, *, enqueue: bool | None, dequeue: bool | None) -> None:
        q = self.queues[queue]
        if enqueue is not None:
            q.enqueue_paused = enqueue
        if dequeue is not None:
            q.dequeue_paused = dequeue
