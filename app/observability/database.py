"""Database-wide gauges: queue depth by state, oldest pending age, scheduler lag and leaders,
dead tuples, each labelled with its ``pool`` (docs/scaling.md). They describe the databases, not
a process, so they are computed by the worker that answers the scrape, from one statement per
pool (:mod:`app.store.stats`) whose result is cached for :data:`CACHE_SECONDS`
(:class:`DatabaseStatsCache`, one per pool): however many scrapers there are, each worker runs
it at most once per period and pool, and concurrent scrapes share one run. A pool that does not
answer shows ``sundial_database_up 0`` and none of its other gauges; the other pools' are
unaffected.

Which queues exist is not cached: every scrape reads their ids from every pool
(:func:`read_existing_queues`, an index-only scan each) and shows per-queue series of those
queues only, so a queue deleted before the scrape was sent is not in it, even while the cached
reading still counts its messages. Queue ids are unique across pools, so the ids of all pools
make one set.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import Metric
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.database import read_database_stats, read_live_queue_ids
from app.core.readings import DatabaseStats, QueueDepth
from app.observability import metrics
from app.recent import Recent

log = logging.getLogger("sundial.metrics")

CACHE_SECONDS = 5.0
"""How long one reading of the database serves scrapes."""
QUERY_TIMEOUT_SECONDS = 2.0
"""A scrape does not wait longer than this for the database."""


@dataclass(frozen=True, slots=True)
class Reading:
    """The database stats as of ``taken_at`` (monotonic seconds); None when the query failed."""

    stats: DatabaseStats | None
    taken_at: float


@dataclass(frozen=True, slots=True)
class PoolReading:
    """What a scrape shows of one pool's database: its latest stats (None: it did not answer)
    and how many seconds old they are."""

    stats: DatabaseStats | None
    age: float


class DatabaseStatsCache:
    """The latest :class:`DatabaseStats`, read again when older than ``ttl`` seconds; a failure
    is kept as long, so a database that is down is not asked again by every scrape."""

    def __init__(
        self,
        engine: AsyncEngine,
        ttl: float = CACHE_SECONDS,
        timeout: float = QUERY_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.timeout = timeout
        self.recent: Recent[Reading] = Recent(ttl, clock)

    async def reading(self) -> Reading:
        """A reading no older than the cache's ``ttl``."""
        return await self.recent.get(self._read)

    async def current(self) -> PoolReading:
        """A reading no older than the cache's ``ttl``, with its age now."""
        reading = await self.reading()
        return PoolReading(reading.stats, max(0.0, self.recent.clock() - reading.taken_at))

    async def _read(self) -> Reading:
        try:
            async with asyncio.timeout(self.timeout):
                stats: DatabaseStats | None = await read_database_stats(self.engine)
        except (TimeoutError, OSError, sa_exc.SQLAlchemyError) as error:
            log.warning("metrics: database stats unavailable: %s", error)
            stats = None
        return Reading(stats, self.recent.clock())


async def read_existing_queues(
    engine: AsyncEngine, within: float = QUERY_TIMEOUT_SECONDS
) -> frozenset[int] | None:
    """The ids of the queues that exist now, read fresh; None when the database does not answer
    (``within`` that many seconds)."""
    try:
        async with asyncio.timeout(within):
            return await read_live_queue_ids(engine)
    except (TimeoutError, OSError, sa_exc.SQLAlchemyError) as error:
        log.warning("metrics: list of queues unavailable: %s", error)
        return None


PooledDepth = tuple[str, QueueDepth]
"""A queue's depth and the name of the pool it was read from."""


def _folded(rest: list[QueueDepth]) -> QueueDepth:
    """One :data:`metrics.OTHER` row standing for the queues ``rest``."""
    ages = [q.oldest_pending_age for q in rest if q.oldest_pending_age is not None]
    return QueueDepth(
        namespace=metrics.OTHER,
        queue=metrics.OTHER,
        invisible=sum(q.invisible for q in rest),
        pending=sum(q.pending for q in rest),
        running=sum(q.running for q in rest),
        errored=sum(q.errored for q in rest),
        oldest_pending_age=max(ages) if ages else None,
    )


def _capped(queues: list[PooledDepth], limit: int) -> Iterator[PooledDepth]:
    """The first ``limit`` queues of all pools by name, then one :data:`metrics.OTHER` row per
    pool for the rest (so that each pool's totals stay exact)."""
    yield from queues[:limit]
    rest: dict[str, list[QueueDepth]] = {}
    for pool, queue in queues[limit:]:
        rest.setdefault(pool, []).append(queue)
    for pool, theirs in rest.items():
        yield pool, _folded(theirs)


def _existing_depths(
    readings: Mapping[str, PoolReading], existing: Collection[int] | None
) -> list[PooledDepth]:
    """The depths of the queues in ``existing`` (None: none) of every pool that answered, by
    namespace and name across pools."""
    if existing is None:
        return []
    found = [
        (pool, queue)
        for pool, reading in readings.items()
        if reading.stats is not None
        for queue in reading.stats.queues
        if queue.queue_id in existing
    ]
    return sorted(found, key=lambda row: (row[1].namespace, row[1].queue, row[0]))


class DatabaseCollector(Collector):
    """Renders each pool's :class:`PoolReading` as Prometheus metrics labelled with the pool's
    name, with the per-queue gauges of the queues in ``existing`` only (None: unknown, then no
    per-queue gauge), at most ``queue_limit`` of them over all pools together."""

    def __init__(
        self,
        readings: Mapping[str, PoolReading],
        existing: Collection[int] | None,
        queue_limit: int = metrics.MAX_QUEUE_SERIES,
    ) -> None:
        self.readings = readings
        self.existing = existing
        self.queue_limit = queue_limit

    def collect(self) -> Iterable[Metric]:
        """The database-wide metrics of every pool."""
        up = GaugeMetricFamily(
            "sundial_database_up",
            "1 if the last stats query of the pool's database succeeded, else 0 (the pool's"
            " other sundial_queue_*, sundial_scheduler_lag_*, sundial_table_* metrics are then"
            " absent).",
            labels=[metrics.POOL],
        )
        age = GaugeMetricFamily(
            "sundial_database_stats_age_seconds",
            "Age of the reading of the pool's database these metrics come from (it is cached"
            " briefly).",
            labels=[metrics.POOL],
        )
        for pool, reading in self.readings.items():
            up.add_metric([pool], 0 if reading.stats is None else 1)
            age.add_metric([pool], reading.age)
        yield up
        yield age
        answered = {pool: r.stats for pool, r in self.readings.items() if r.stats is not None}
        if not answered:
            return
        yield from self._queue_gauges()
        yield from _scheduler_gauges(answered)
        yield from _table_gauges(answered)

    def _queue_gauges(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily(
            "sundial_queue_messages",
            "Live messages per queue and state (invisible, pending, running).",
            labels=[metrics.POOL, *metrics.QUEUE_LABELS, "state"],
        )
        oldest = GaugeMetricFamily(
            "sundial_queue_oldest_pending_age_seconds",
            "Seconds since the oldest pending message of the queue became visible (0: none).",
            labels=[metrics.POOL, *metrics.QUEUE_LABELS],
        )
        dead = GaugeMetricFamily(
            "sundial_queue_dead_letters",
            "Dead letters per queue: errored messages still in the live table (kept for the"
            " queue's retention_seconds, or until requeued, deleted or moved to its"
            " dead_letter_queue).",
            labels=[metrics.POOL, *metrics.QUEUE_LABELS],
        )
        queues = _existing_depths(self.readings, self.existing)
        for pool, q in _capped(queues, self.queue_limit):
            depth.add_metric([pool, q.namespace, q.queue, "invisible"], q.invisible)
            depth.add_metric([pool, q.namespace, q.queue, "pending"], q.pending)
            depth.add_metric([pool, q.namespace, q.queue, "running"], q.running)
            oldest.add_metric([pool, q.namespace, q.queue], q.oldest_pending_age or 0.0)
            dead.add_metric([pool, q.namespace, q.queue], q.errored)
        yield depth
        yield oldest
        yield dead


def _scheduler_gauges(answered: Mapping[str, DatabaseStats]) -> Iterator[Metric]:
    """The scheduler's lags and leaders of each pool that answered."""
    lag = GaugeMetricFamily(
        "sundial_scheduler_lag_seconds",
        "How overdue the scheduler's most overdue work of the pool is, by kind (promotion of"
        " due messages, release of expired leases, expiry); 0 when nothing is overdue.",
        labels=[metrics.POOL, "work"],
    )
    leaders = GaugeMetricFamily(
        "sundial_scheduler_leaders",
        "Scheduler nodes that lead the pool, by their recent heartbeats in its database"
        " (expect 1).",
        labels=[metrics.POOL],
    )
    for pool, stats in answered.items():
        lag.add_metric([pool, "promotion"], stats.promotion_lag)
        lag.add_metric([pool, "lease_release"], stats.lease_release_lag)
        lag.add_metric([pool, "expiry"], stats.expiry_lag)
        leaders.add_metric([pool], stats.leaders)
    yield lag
    yield leaders


def _table_gauges(answered: Mapping[str, DatabaseStats]) -> Iterator[Metric]:
    """Dead and live tuples per table of each pool that answered."""
    dead = GaugeMetricFamily(
        "sundial_table_dead_tuples",
        "Dead tuples per table (pg_stat_user_tables; history partitions summed).",
        labels=[metrics.POOL, "table"],
    )
    live = GaugeMetricFamily(
        "sundial_table_live_tuples",
        "Live tuples per table (pg_stat_user_tables; history partitions summed).",
        labels=[metrics.POOL, "table"],
    )
    for pool, stats in answered.items():
        for table in stats.tables:
            dead.add_metric([pool, table.table], table.dead)
            live.add_metric([pool, table.table], table.live)
    yield dead
    yield live
