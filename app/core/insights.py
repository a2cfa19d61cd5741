"""What operators look at (the dashboard): depth and age per queue, throughput and wait times
over the last hour, the exclusive values running and the messages blocked behind them; and the
bulk removal of dead letters.

Reads that :class:`app.core.service.QueueService` already answers (queues, counts, message
queries) go through it; the rest goes through :class:`InsightsStore`, which
:class:`app.store.insights.PostgresInsights` provides. Every series is bucketed by minute of
the database clock, over a window that ends with the current (partial) minute.

The overview reads every pool (docs/scaling.md) on its own: a pool that does not answer is
shown as unavailable, with the names of the namespaces the catalogue places on it, and the other
pools' namespaces and queues as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, Protocol

from app.core.errors import NotFoundError, UnavailableError, ValidationError
from app.core.models import Namespace, Queue
from app.core.service import QueueService
from app.core.service.queues import QueueDetail
from app.core.states import DEAD_LETTER_STATES, State

WINDOW_MINUTES = 60
"""The series cover the last hour, one point a minute."""

BLOCKED_SCAN_LIMIT = 10_000
"""How many pending messages at the head of an exclusive queue are examined for values blocked
behind a running one (the head is what would be served next; the scan stays bounded)."""

RUNNING_VALUES_LIMIT = 200
"""At most this many running exclusive values are listed (longest running first)."""

Outcome = Literal["enqueued", "completed", "errored", "canceled"]
OUTCOMES: tuple[Outcome, ...] = ("enqueued", "completed", "errored", "canceled")


@dataclass(frozen=True, slots=True)
class MinuteCount:
    """How many messages had ``outcome`` during minute ``minute`` of a window (0 = first)."""

    minute: int
    outcome: Outcome
    count: int


@dataclass(frozen=True, slots=True)
class MinuteWait:
    """Wait times (enqueue to first lease) of the messages first leased in one minute."""

    minute: int
    count: int
    p50_seconds: float
    p95_seconds: float
    max_seconds: float


@dataclass(frozen=True, slots=True)
class RunningValue:
    """An exclusive value that is running now, and how many messages wait behind it."""

    value: str
    message_id: str
    running_seconds: float
    lease_left_seconds: float
    attempts: int
    blocked: int


@dataclass(frozen=True, slots=True)
class Throughput:
    """Messages per minute by outcome; ``start`` is the first minute of the window.

    Finished messages count by their current outcome: a message that errored and was then
    requeued and completed counts once, as completed.
    """

    start: datetime
    step_seconds: int
    enqueued: list[int]
    completed: list[int]
    errored: list[int]
    canceled: list[int]

    def total(self, outcome: Outcome) -> int:
        """The window's total of one outcome."""
        return sum(getattr(self, outcome))


@dataclass(frozen=True, slots=True)
class WaitTimes:
    """Per minute of first lease: how many messages, and their wait p50 / p95 / max (``None``
    for a minute without any)."""

    start: datetime
    step_seconds: int
    count: list[int]
    p50_seconds: list[float | None]
    p95_seconds: list[float | None]
    max_seconds: list[float | None]


@dataclass(frozen=True, slots=True)
class ExclusiveActivity:
    """An exclusive queue's running values (longest running first) and the messages blocked
    behind them among the first ``scanned`` pending ones."""

    running: list[RunningValue]
    scanned: int
    scan_limit: int

    @property
    def blocked(self) -> int:
        """Messages at the head of the queue waiting for their value to finish."""
        return sum(r.blocked for r in self.running)


@dataclass(frozen=True, slots=True)
class QueueSummary:
    """One row of the overview."""

    queue: Queue
    counts: dict[State, int]
    oldest_pending_age_seconds: float | None


@dataclass(frozen=True, slots=True)
class PoolNamespaces:
    """One pool's namespaces, as the overview reads them from the pool itself."""

    pool: str
    namespaces: list[Namespace] | None
    """The namespaces the pool holds, by name; None when the pool did not answer."""
    placed: list[str]
    """The names of the namespaces the catalogue places on the pool, by name (what is known of
    them when the pool does not answer; empty when the catalogue did not answer either)."""


@dataclass(frozen=True, slots=True)
class PoolSummary:
    """One pool in the overview: whether it answered, its namespaces (and those whose queues
    could not be read: all of them when it did not answer), and the messages waiting (pending or
    delayed) and running in the namespaces read (None when it did not answer)."""

    name: str
    available: bool
    namespaces: list[str]
    unavailable_namespaces: list[str]
    waiting: int | None
    running: int | None


@dataclass(frozen=True, slots=True)
class Overview:
    """Every namespace and queue of the pools that answered, the whole server's throughput, and
    every pool (in the server's order, ``default`` first)."""

    namespaces: list[Namespace]
    queues: list[QueueSummary]
    throughput: Throughput
    pools: list[PoolSummary]


@dataclass(frozen=True, slots=True)
class QueueActivity:
    """A queue's detail, throughput, wait times and (exclusive queues) running values."""

    detail: QueueDetail
    throughput: Throughput
    wait_times: WaitTimes
    exclusive: ExclusiveActivity | None


class InsightsStore(Protocol):
    """The reads (and the dead-letter delete) the insights need beyond :class:`Store`."""

    async def throughput(
        self, queues: Sequence[Queue], minutes: int
    ) -> tuple[datetime, list[MinuteCount]]: ...
    async def wait_times(self, queue: Queue, minutes: int) -> tuple[datetime, list[MinuteWait]]: ...
    async def running_exclusive(
        self, queue: Queue, scan_limit: int, limit: int
    ) -> tuple[list[RunningValue], int]: ...
    async def oldest_pending_ages(self, queues: Sequence[Queue]) -> dict[int, float]: ...
    async def namespaces_by_pool(self) -> list[PoolNamespaces]:
        """Every pool's namespaces, each pool read on its own (one that does not answer is
        reported so, not raised), in the server's order of pools."""
        ...


def _series(minutes: int, points: dict[int, int]) -> list[int]:
    return [points.get(minute, 0) for minute in range(minutes)]


class QueueInsights:
    """The operator's read side, over the queue service and an :class:`InsightsStore`."""

    def __init__(self, service: QueueService, store: InsightsStore) -> None:
        self.service = service
        self.store = store

    async def overview(self) -> Overview:
        """Every namespace, every queue with its counts and oldest pending age, the throughput
        of all queues together, and every pool's load; a pool that does not answer is reported
        as unavailable and the rest is shown without it."""
        namespaces: list[Namespace] = []
        rows: list[tuple[Queue, dict[State, int]]] = []
        pools: list[PoolSummary] = []
        for found in await self.store.namespaces_by_pool():
            if found.namespaces is None:
                down = PoolSummary(found.pool, False, found.placed, list(found.placed), None, None)
                pools.append(down)
                continue
            read = await self._queues_of(found.namespaces)
            namespaces.extend(n for n in found.namespaces if read.get(n.name) is not None)
            theirs = [row for queues in read.values() if queues is not None for row in queues]
            rows.extend(theirs)
            pools.append(_pool_summary(found.pool, read, theirs))
        namespaces.sort(key=lambda n: n.name)
        ages = await self.store.oldest_pending_ages([q for q, _ in rows])
        summaries = [QueueSummary(q, counts, ages.get(q.id)) for q, counts in rows]
        throughput = await self._throughput([q for q, _ in rows])
        return Overview(namespaces, summaries, throughput, pools)

    async def _queues_of(
        self, namespaces: Sequence[Namespace]
    ) -> dict[str, list[tuple[Queue, dict[State, int]]] | None]:
        """The queues of each of one pool's ``namespaces`` with their counts, by namespace:
        None for a namespace whose queues cannot be read now (its pool stopped answering, or
        it is moving between pools); a namespace deleted meanwhile is left out."""
        read: dict[str, list[tuple[Queue, dict[State, int]]] | None] = {}
        for namespace in namespaces:
            try:
                read[namespace.name] = await self.service.list_queues(namespace.name)
            except NotFoundError:
                continue
            except UnavailableError:
                read[namespace.name] = None
        return read

    async def queue_activity(self, namespace: str, name: str) -> QueueActivity:
        """What the queue page shows."""
        detail = await self.service.queue_detail(namespace, name)
        queue = detail.queue
        exclusive = None
        if queue.config.kind == "exclusive":
            running, scanned = await self.store.running_exclusive(
                queue, BLOCKED_SCAN_LIMIT, RUNNING_VALUES_LIMIT
            )
            exclusive = ExclusiveActivity(running, scanned, BLOCKED_SCAN_LIMIT)
        return QueueActivity(
            detail=detail,
            throughput=await self._throughput([queue]),
            wait_times=await self._wait_times(queue),
            exclusive=exclusive,
        )

    async def delete_dead_letters(self, namespace: str, name: str, ids: Sequence[str]) -> int:
        """Delete the listed messages that are dead letters (errored or canceled); a listed
        message in any other state (say, requeued meanwhile) is left alone. Returns how many
        were deleted."""
        if not ids:
            raise ValidationError("ids", "choose at least one message")
        states = sorted(str(state) for state in DEAD_LETTER_STATES)
        return await self.service.delete_dead_letters(namespace, name, states, ids, len(ids))

    async def _throughput(self, queues: Sequence[Queue]) -> Throughput:
        start, rows = await self.store.throughput(queues, WINDOW_MINUTES)
        points: dict[Outcome, dict[int, int]] = {outcome: {} for outcome in OUTCOMES}
        for row in rows:
            if 0 <= row.minute < WINDOW_MINUTES:
                bucket = points[row.outcome]
                bucket[row.minute] = bucket.get(row.minute, 0) + row.count
        return Throughput(
            start=start,
            step_seconds=60,
            enqueued=_series(WINDOW_MINUTES, points["enqueued"]),
            completed=_series(WINDOW_MINUTES, points["completed"]),
            errored=_series(WINDOW_MINUTES, points["errored"]),
            canceled=_series(WINDOW_MINUTES, points["canceled"]),
        )

    async def _wait_times(self, queue: Queue) -> WaitTimes:
        start, rows = await self.store.wait_times(queue, WINDOW_MINUTES)
        by_minute = {row.minute: row for row in rows if 0 <= row.minute < WINDOW_MINUTES}
        minutes = [by_minute.get(minute) for minute in range(WINDOW_MINUTES)]
        return WaitTimes(
            start=start,
            step_seconds=60,
            count=[row.count if row else 0 for row in minutes],
            p50_seconds=[row.p50_seconds if row else None for row in minutes],
            p95_seconds=[row.p95_seconds if row else None for row in minutes],
            max_seconds=[row.max_seconds if row else None for row in minutes],
        )


def _pool_summary(
    name: str,
    read: dict[str, list[tuple[Queue, dict[State, int]]] | None],
    rows: Sequence[tuple[Queue, dict[State, int]]],
) -> PoolSummary:
    """A pool that answered: its namespaces (``read``: their queues, None where they could not
    be read), and the messages waiting and running in its queues ``rows``."""
    waiting = sum(c.get(State.PENDING, 0) + c.get(State.INVISIBLE, 0) for _, c in rows)
    running = sum(c.get(State.RUNNING, 0) for _, c in rows)
    unread = [namespace for namespace, queues in read.items() if queues is None]
    return PoolSummary(name, True, list(read), unread, waiting, running)


def window_times(start: datetime, step_seconds: int, points: int) -> list[datetime]:
    """The start of each bucket of a series."""
    return [start + timedelta(seconds=step_seconds * index) for index in range(points)]
