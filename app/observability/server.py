"""Everything the metrics need from one running server process, started and stopped with it."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.longpoll import WaiterRegistry
from app.observability import multiprocess
from app.observability.database import DatabaseStatsCache
from app.observability.observer import MetricsObserver
from app.observability.sampler import Sampler
from app.scheduler import Scheduler


class ServerMetrics:
    """The queue service's observer, the database stats cache and the sampler of a process."""

    def __init__(
        self, engine: AsyncEngine, waiters: WaiterRegistry, scheduler: Scheduler | None
    ) -> None:
        self.observer = MetricsObserver()
        self.database = DatabaseStatsCache(engine)
        self.sampler = Sampler(engine, waiters, scheduler)

    async def start(self) -> None:
        """Begin sampling."""
        await self.sampler.start()

    async def stop(self) -> None:
        """Stop sampling; a worker process also drops its live gauges."""
        await self.sampler.stop()
        multiprocess.process_exiting()
