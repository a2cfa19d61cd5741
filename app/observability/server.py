"""Everything the metrics need from one running server process, started and stopped with it."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from app.observability import multiprocess
from app.observability.database import DatabaseStatsCache, PoolReading, read_existing_queues
from app.observability.observer import MetricsObserver
from app.observability.sampler import Sampler, SchedulerProgress
from app.web.runtime import Pool
from app.web.waiters import WaiterRegistry

FORGET_SECONDS = 10.0
"""How often a process whose per-queue labels are full checks for deleted queues to forget (a
process that answers scrapes also forgets them at every scrape)."""


@dataclass(frozen=True, slots=True)
class MeteredPool:
    """What the metrics follow of one pool (docs/scaling.md) in this process: its database,
    the long polls parked on its queues, and its scheduler (None when the scheduler is off)."""

    engine: AsyncEngine
    waiters: WaiterRegistry
    scheduler: SchedulerProgress | None = None


def metered_pools(
    pools: Mapping[str, Pool], schedulers: Sequence[SchedulerProgress]
) -> dict[str, MeteredPool]:
    """Every pool of the server as the metrics follow it; ``schedulers`` are the pools' in pool
    order, or none at all (the scheduler is off)."""
    return {
        name: MeteredPool(pool.engine, pool.waiters, schedulers[index] if schedulers else None)
        for index, (name, pool) in enumerate(pools.items())
    }


@dataclass(frozen=True, slots=True)
class ExistingQueues:
    """The ids of the queues that exist now in the pools that answered (None: no pool did), and
    whether every pool did."""

    ids: frozenset[int] | None
    complete: bool


class ServerMetrics:
    """The queue service's observer, a database stats cache and a sampler per pool (by pool
    name, ``default`` first), and the token ``/metrics`` asks for (None: no token)."""

    def __init__(self, pools: Mapping[str, MeteredPool], token: str | None = None) -> None:
        if not pools:
            raise ValueError("the metrics follow at least one pool")
        self.observer = MetricsObserver()
        self.databases = {name: DatabaseStatsCache(pool.engine) for name, pool in pools.items()}
        self.samplers = {
            name: Sampler(pool.engine, pool.waiters, pool.scheduler, pool=name)
            for name, pool in pools.items()
        }
        self.token = token
        self._forgetting: asyncio.Task[None] | None = None

    async def readings(self) -> dict[str, PoolReading]:
        """Every pool's database reading (each no older than its cache's ``ttl``), read
        concurrently."""
        names = list(self.databases)
        found = await asyncio.gather(*(self.databases[name].current() for name in names))
        return dict(zip(names, found, strict=True))

    async def existing_queues(self) -> frozenset[int] | None:
        """The ids of the queues that exist now in every pool that answers (None if none does);
        once every pool has answered, what this process counted for any other queue is
        forgotten (a pool that does not answer keeps its queues' counts)."""
        found = await self._read_existing_queues()
        if found.complete and found.ids is not None:
            self.observer.forget(found.ids)
        return found.ids

    async def _read_existing_queues(self) -> ExistingQueues:
        """Every pool's queue ids, read concurrently; their union (queue ids are unique across
        pools)."""
        caches = list(self.databases.values())
        found = await asyncio.gather(
            *(read_existing_queues(cache.engine, cache.timeout) for cache in caches)
        )
        answered = [ids for ids in found if ids is not None]
        union = frozenset(itertools.chain.from_iterable(answered)) if answered else None
        return ExistingQueues(union, complete=len(answered) == len(found))

    async def start(self) -> None:
        """Begin sampling."""
        for sampler in self.samplers.values():
            await sampler.start()
        self._forgetting = asyncio.create_task(
            self._forget_when_full(), name="sundial-metrics-forget"
        )

    async def stop(self) -> None:
        """Stop sampling; a worker process also drops its live gauges."""
        if self._forgetting is not None:
            self._forgetting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._forgetting
            self._forgetting = None
        for sampler in self.samplers.values():
            await sampler.stop()
        multiprocess.process_exiting()

    async def forget_if_full(self) -> None:
        """Free the places of deleted queues if new queues are being folded into ``_other``."""
        if self.observer.labels.refused:
            await self.existing_queues()

    async def _forget_when_full(self) -> None:
        """:meth:`forget_if_full` every :data:`FORGET_SECONDS`, for a worker that scrapes may
        never reach (a scraper keeps its connection to one worker)."""
        while True:
            await asyncio.sleep(FORGET_SECONDS)
            await self.forget_if_full()
