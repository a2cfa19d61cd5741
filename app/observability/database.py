"""Database-wide gauges: queue depth by state, oldest pending age, scheduler lag and leaders,
dead tuples. They describe the database, not a process, so they are computed by the worker that
answers the scrape, from one statement (:mod:`app.store.stats`) whose result is cached for
:data:`CACHE_SECONDS`: however many scrapers there are, each worker runs it at most once per
period, and concurrent scrapes share one run.

Which queues exist is not cached: every scrape reads their ids (:func:`read_existing_queues`,
an index-only scan) and shows per-queue series of those queues only, so a queue deleted before
the scrape was sent is not in it, even while the cached reading still counts its messages.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Iterable, Iterator
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


def _capped(queues: list[QueueDepth], limit: int) -> Iterator[QueueDepth]:
    """The first ``limit`` queues by name, then one :data:`metrics.OTHER` row for the rest."""
    yield from queues[:limit]
    rest = queues[limit:]
    if rest:
        ages = [q.oldest_pending_age for q in rest if q.oldest_pending_age is not None]
        yield QueueDepth(
            namespace=metrics.OTHER,
            queue=metrics.OTHER,
            invisible=sum(q.invisible for q in rest),
            pending=sum(q.pending for q in rest),
            running=sum(q.running for q in rest),
            oldest_pending_age=max(ages) if ages else None,
        )


class DatabaseCollector(Collector):
    """Renders one :class:`Reading` as Prometheus metrics, with the per-queue gauges of the
    queues in ``existing`` only (None: unknown, then no per-queue gauge)."""

    def __init__(
        self,
        reading: Reading,
        now: float,
        existing: Collection[int] | None,
        queue_limit: int = metrics.MAX_QUEUE_SERIES,
    ) -> None:
        self.reading = reading
        self.now = now
        self.existing = existing
        self.queue_limit = queue_limit

    def collect(self) -> Iterable[Metric]:
        """The database-wide metrics."""
        stats = self.reading.stats
        yield GaugeMetricFamily(
            "sundial_database_up",
            "1 if the last database stats query succeeded, else 0 (the other sundial_queue_*,"
            " sundial_scheduler_lag_*, sundial_table_* metrics are then absent).",
            value=0 if stats is None else 1,
        )
        yield GaugeMetricFamily(
            "sundial_database_stats_age_seconds",
            "Age of the database reading these metrics come from (it is cached briefly).",
            value=max(0.0, self.now - self.reading.taken_at),
        )
        if stats is None:
            return
        depth = GaugeMetricFamily(
            "sundial_queue_messages",
            "Live messages per queue and state (invisible, pending, running).",
            labels=["namespace", "queue", "state"],
        )
        age = GaugeMetricFamily(
            "sundial_queue_oldest_pending_age_seconds",
            "Seconds since the oldest pending message of the queue became visible (0: none).",
            labels=["namespace", "queue"],
        )
        existing = self.existing if self.existing is not None else ()
        queues = [q for q in stats.queues if q.queue_id in existing]
        for q in _capped(queues, self.queue_limit):
            depth.add_metric([q.namespace, q.queue, "invisible"], q.invisible)
            depth.add_metric([q.namespace, q.queue, "pending"], q.pending)
            depth.add_metric([q.namespace, q.queue, "running"], q.running)
            age.add_metric([q.namespace, q.queue], q.oldest_pending_age or 0.0)
        yield depth
        yield age
        lag = GaugeMetricFamily(
            "sundial_scheduler_lag_seconds",
            "How overdue the scheduler's most overdue work is, by kind (promotion of due"
            " messages, release of expired leases, expiry); 0 when nothing is overdue.",
            labels=["work"],
        )
        lag.add_metric(["promotion"], stats.promotion_lag)
        lag.add_metric(["lease_release"], stats.lease_release_lag)
        lag.add_metric(["expiry"], stats.expiry_lag)
        yield lag
        yield GaugeMetricFamily(
            "sundial_scheduler_leaders",
            "Scheduler nodes that lead, by their recent heartbeats in the database (expect 1).",
            value=stats.leaders,
        )
        dead = GaugeMetricFamily(
            "sundial_table_dead_tuples",
            "Dead tuples per table (pg_stat_user_tables; history partitions summed).",
            labels=["table"],
        )
        live = GaugeMetricFamily(
            "sundial_table_live_tuples",
            "Live tuples per table (pg_stat_user_tables; history partitions summed).",
            labels=["table"],
        )
        for table in stats.tables:
            dead.add_metric([table.table], table.dead)
            live.add_metric([table.table], table.live)
        yield dead
        yield live
