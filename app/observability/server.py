"""Everything the metrics need from one running server process, started and stopped with it."""

from __future__ import annotations

import asyncio
import contextlib

from sqlalchemy.ext.asyncio import AsyncEngine

from app.observability import multiprocess
from app.observability.database import DatabaseStatsCache, read_existing_queues
from app.observability.observer import MetricsObserver
from app.observability.sampler import Sampler, SchedulerProgress
from app.web.waiters import WaiterRegistry

FORGET_SECONDS = 10.0
"""How often a process whose per-queue labels are full checks for deleted queues to forget (a
process that answers scrapes also forgets them at every scrape)."""


class ServerMetrics:
    """The queue service's observer, the database stats cache, the sampler of a process, and
    the token ``/metrics`` asks for (None: no token)."""

    def __init__(
        self,
        engine: AsyncEngine,
        waiters: WaiterRegistry,
        scheduler: SchedulerProgress | None,
        token: str | None = None,
    ) -> None:
        self.observer = MetricsObserver()
        self.database = DatabaseStatsCache(engine)
        self.sampler = Sampler(engine, waiters, scheduler)
        self.token = token
        self._forgetting: asyncio.Task[None] | None = None

    async def existing_queues(self) -> frozenset[int] | None:
        """The ids of the queues that exist now (None if the database does not answer); what
        this process counted for any other queue is forgotten."""
        existing = await read_existing_queues(self.database.engine, self.database.timeout)
        if existing is not None:
            self.observer.forget(existing)
        return existing

    async def start(self) -> None:
        """Begin sampling."""
        await self.sampler.start()
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
        await self.sampler.stop()
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
