"""The dashboard's reads (:mod:`app.core.insights`) on PostgreSQL: runs the bounded,
index-backed statements of :mod:`app.store.sql.insights` and turns their rows into the core's
values, per pool (docs/scaling.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.errors import UnavailableError
from app.core.insights import (
    OUTCOMES,
    MinuteCount,
    MinuteWait,
    Outcome,
    PoolNamespaces,
    RunningValue,
)
from app.core.models import DEFAULT_POOL, Namespace, Queue
from app.store.connections import available
from app.store.sql.insights import (
    MESSAGES_OLDEST_PENDING_AGE_PER_QUEUE,
    MESSAGES_RUNNING_EXCLUSIVE_WITH_BLOCKED,
    MESSAGES_THROUGHPUT_PER_MINUTE,
    MESSAGES_WAIT_TIMES_PER_MINUTE,
    NAMESPACES_LIST,
)
from app.store.sql.pools import NAMESPACE_POOLS

T = TypeVar("T")
Call = Coroutine[Any, Any, T]


class PostgresInsights:
    """Implements :class:`app.core.insights.InsightsStore` on PostgreSQL."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")

    def _connect(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection in autocommit; a lost or overloaded database is UnavailableError."""
        return available(self._engine)

    async def throughput(
        self, queues: Sequence[Queue], minutes: int
    ) -> tuple[datetime, list[MinuteCount]]:
        """Messages per minute by outcome over the window, for these queues together."""
        params = {
            "minutes": minutes,
            "queue_ids": [q.id for q in queues],
            "namespaces": [q.namespace for q in queues],
            "names": [q.name for q in queues],
        }
        async with self._connect() as conn:
            rows = (await conn.execute(MESSAGES_THROUGHPUT_PER_MINUTE, params)).all()
        start: datetime | None = None
        counts: list[MinuteCount] = []
        outcomes: dict[str, Outcome] = {outcome: outcome for outcome in OUTCOMES}
        for outcome, minute, n, window_start in rows:
            if outcome == "start":
                start = window_start
            elif outcome in outcomes:
                counts.append(MinuteCount(minute, outcomes[outcome], n))
        assert start is not None
        return start, counts

    async def wait_times(self, queue: Queue, minutes: int) -> tuple[datetime, list[MinuteWait]]:
        """Wait percentiles per minute of first lease over the window."""
        params = {
            "minutes": minutes,
            "queue_id": queue.id,
            "namespace": queue.namespace,
            "queue": queue.name,
        }
        async with self._connect() as conn:
            rows = (await conn.execute(MESSAGES_WAIT_TIMES_PER_MINUTE, params)).all()
        start: datetime = rows[0].start
        waits = [
            MinuteWait(row.minute, row.n, row.p50, row.p95, row.max)
            for row in rows
            if row.minute is not None
        ]
        return start, waits

    async def running_exclusive(
        self, queue: Queue, scan_limit: int, limit: int
    ) -> tuple[list[RunningValue], int]:
        """Running exclusive values with the head-of-queue messages blocked behind each."""
        params = {"queue_id": queue.id, "scan_limit": scan_limit, "limit": limit}
        async with self._connect() as conn:
            rows = (await conn.execute(MESSAGES_RUNNING_EXCLUSIVE_WITH_BLOCKED, params)).all()
        running = [
            RunningValue(
                value=row.exclusive_value,
                message_id=row.id,
                running_seconds=row.running_seconds or 0.0,
                lease_left_seconds=row.lease_left_seconds or 0.0,
                attempts=row.attempts,
                blocked=row.blocked,
            )
            for row in rows
        ]
        return running, rows[0].scanned if rows else 0

    async def oldest_pending_ages(self, queues: Sequence[Queue]) -> dict[int, float]:
        """Seconds the longest-waiting pending message of each queue has been visible, by queue
        id (queues without pending messages are absent)."""
        if not queues:
            return {}
        async with self._connect() as conn:
            rows = await conn.execute(
                MESSAGES_OLDEST_PENDING_AGE_PER_QUEUE, {"queue_ids": [q.id for q in queues]}
            )
            return {row.queue_id: row.age for row in rows if row.age is not None}

    async def namespaces_of(self, pool: str) -> PoolNamespaces:
        """The namespaces this database holds, as the pool named ``pool``; a database that does
        not answer is reported so (``namespaces`` None), not raised."""
        try:
            async with self._connect() as conn:
                rows = (await conn.execute(NAMESPACES_LIST)).all()
        except UnavailableError:
            return PoolNamespaces(pool, None, [])
        found = [Namespace(row.name, row.description, row.created_at, pool=pool) for row in rows]
        return PoolNamespaces(pool, found, [n.name for n in found])

    async def namespace_pools(self) -> dict[str, str]:
        """The catalogue's map (this database must be the catalogue's): every namespace's
        pool."""
        async with self._connect() as conn:
            rows = (await conn.execute(NAMESPACE_POOLS)).all()
        return {row.namespace: row.pool for row in rows}

    async def namespaces_by_pool(self) -> list[PoolNamespaces]:
        """This database's namespaces, as the only pool, ``default``."""
        return [await self.namespaces_of(DEFAULT_POOL)]


class PooledInsights:
    """Implements :class:`app.core.insights.InsightsStore` over one :class:`PostgresInsights`
    per pool (docs/scaling.md): a queue's reads go to the pool it was read from; reads over
    queues of several pools ask each pool for its own and add them up (the minutes of each
    pool's window are its database's clock, which should agree with the others')."""

    def __init__(self, pools: Mapping[str, PostgresInsights]) -> None:
        self._pools = dict(pools)

    def _by_pool(self, queues: Sequence[Queue]) -> dict[str, list[Queue]]:
        grouped: dict[str, list[Queue]] = {}
        for queue in queues:
            grouped.setdefault(queue.pool, []).append(queue)
        return grouped

    async def throughput(
        self, queues: Sequence[Queue], minutes: int
    ) -> tuple[datetime, list[MinuteCount]]:
        (first, theirs), *others = (self._by_pool(queues) or {DEFAULT_POOL: []}).items()
        start, rows = await self._pools[first].throughput(theirs, minutes)
        for pool, mine in others:
            rows.extend((await self._pools[pool].throughput(mine, minutes))[1])
        return start, rows

    def wait_times(self, queue: Queue, minutes: int) -> Call[tuple[datetime, list[MinuteWait]]]:
        return self._pools[queue.pool].wait_times(queue, minutes)

    def running_exclusive(
        self, queue: Queue, scan_limit: int, limit: int
    ) -> Call[tuple[list[RunningValue], int]]:
        return self._pools[queue.pool].running_exclusive(queue, scan_limit, limit)

    async def oldest_pending_ages(self, queues: Sequence[Queue]) -> dict[int, float]:
        ages: dict[int, float] = {}
        for pool, mine in self._by_pool(queues).items():
            ages.update(await self._pools[pool].oldest_pending_ages(mine))
        return ages

    async def namespaces_by_pool(self) -> list[PoolNamespaces]:
        """Every pool's namespaces, all pools read at once; with several pools, each lists only
        the namespaces the catalogue places on it (a namespace moving between pools is listed
        once), and a pool that does not answer is named with those the catalogue places on it."""
        names = list(self._pools)
        if len(names) == 1:
            return [await self._pools[names[0]].namespaces_of(names[0])]
        placed, found = await asyncio.gather(
            self._placed(),
            asyncio.gather(*(self._pools[name].namespaces_of(name) for name in names)),
        )
        return [_as_placed(pool, placed) for pool in found]

    async def _placed(self) -> dict[str, str] | None:
        """The catalogue's map of namespaces to pools; None when the catalogue does not
        answer."""
        try:
            return await self._pools[DEFAULT_POOL].namespace_pools()
        except UnavailableError:
            return None


def _as_placed(found: PoolNamespaces, placed: Mapping[str, str] | None) -> PoolNamespaces:
    """``found`` with only the namespaces the catalogue's map ``placed`` puts on its pool, and
    the names it puts there (``placed`` None, the catalogue did not answer: ``found`` as read)."""
    if placed is None:
        return found
    names = sorted(name for name, pool in placed.items() if pool == found.pool)
    if found.namespaces is None:
        return PoolNamespaces(found.pool, None, names)
    mine = [n for n in found.namespaces if placed.get(n.name) == found.pool]
    return PoolNamespaces(found.pool, mine, names)
