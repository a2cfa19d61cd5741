"""A per-process task per pool that copies what this process holds in memory of the pool
(connection pool usage, parked long polls, scheduler leadership and results) into metrics; the
gauges carry the pool's name (``pool``), the scheduler's counters add up every pool's.

Gauges are moved by the difference from what this sampler last reported, not set, so several
apps in one process (tests) add up instead of overwriting each other.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from prometheus_client import Gauge
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import QueuePool

from app.core.models import DEFAULT_POOL
from app.observability import metrics
from app.web.waiters import WaiterRegistry

SAMPLE_SECONDS = 1.0


class TickCounts(Protocol):
    """Messages the scheduler's ticks have changed so far, by kind."""

    @property
    def promoted(self) -> int: ...

    @property
    def released(self) -> int: ...

    @property
    def expired(self) -> int: ...

    @property
    def redriven(self) -> int: ...

    @property
    def fired(self) -> int: ...


class SchedulerProgress(Protocol):
    """What the metrics follow of this process's scheduler (:class:`app.scheduler.Scheduler`)."""

    @property
    def is_leader(self) -> bool: ...

    @property
    def ticks(self) -> int: ...

    @property
    def changed(self) -> TickCounts: ...

    async def wait_until(self, *, leader: bool | None = None, ticks: int | None = None) -> None:
        """Return once the scheduler leads (or not) and has ticked ``ticks`` times."""
        ...


class _Reported:
    """A gauge this sampler contributes to, and how much it contributes now."""

    def __init__(self, gauge: Gauge) -> None:
        self.gauge = gauge
        self.value = 0.0

    def report(self, value: float) -> None:
        if value != self.value:
            self.gauge.inc(value - self.value)
            self.value = value


class Sampler:
    """Samples what this process holds of one pool (``pool``, its name): the connection pool of
    ``engine``, the long polls parked in ``waiters`` and the pool's ``scheduler``."""

    def __init__(
        self,
        engine: AsyncEngine,
        waiters: WaiterRegistry,
        scheduler: SchedulerProgress | None,
        interval: float = SAMPLE_SECONDS,
        *,
        pool: str = DEFAULT_POOL,
    ) -> None:
        self.pool = pool
        self.engine = engine
        self.waiters = waiters
        self.scheduler = scheduler
        self.interval = interval
        self._waiters = _Reported(metrics.LONGPOLL_WAITERS.labels(pool))
        self._in_use = _Reported(metrics.POOL_CONNECTIONS.labels(pool, "in_use"))
        self._idle = _Reported(metrics.POOL_CONNECTIONS.labels(pool, "idle"))
        self._size = _Reported(metrics.POOL_SIZE.labels(pool))
        self._leader = _Reported(metrics.SCHEDULER_LEADER.labels(pool))
        self._tasks: list[asyncio.Task[None]] = []

    def sample(self) -> None:
        """Report the current values once."""
        self._waiters.report(self.waiters.waiting_anywhere())
        pool = self.engine.pool
        if isinstance(pool, QueuePool):
            self._in_use.report(pool.checkedout())
            self._idle.report(pool.checkedin())
            self._size.report(pool.size())
        leading = self.scheduler is not None and self.scheduler.is_leader
        self._leader.report(1 if leading else 0)

    async def start(self) -> None:
        """Start sampling (and following the scheduler's ticks) in the background."""
        self.sample()
        self._tasks.append(
            asyncio.create_task(self._sample_forever(), name=f"sundial-metrics-{self.pool}")
        )
        if self.scheduler is not None:
            self._tasks.append(
                asyncio.create_task(
                    self._follow_ticks(self.scheduler), name=f"sundial-tick-metrics-{self.pool}"
                )
            )

    async def stop(self) -> None:
        """Stop, withdrawing this sampler's share of the gauges."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for reported in (self._waiters, self._in_use, self._idle, self._size, self._leader):
            reported.report(0)

    async def _sample_forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.sample()

    async def _follow_ticks(self, scheduler: SchedulerProgress) -> None:
        """Count every tick and what it changed, woken by the scheduler after each one.

        Counts come from the scheduler's running totals, so ticks that finish before this
        wakes up are counted all the same.
        """
        seen = scheduler.ticks
        counted = scheduler.changed
        while True:
            await scheduler.wait_until(ticks=seen + 1)
            ticks, changed = scheduler.ticks, scheduler.changed
            metrics.SCHEDULER_TICKS.inc(ticks - seen)
            metrics.PROMOTED.inc(changed.promoted - counted.promoted)
            metrics.LEASES_EXPIRED.inc(changed.released - counted.released)
            metrics.EXPIRED.inc(changed.expired - counted.expired)
            metrics.REDRIVEN.inc(changed.redriven - counted.redriven)
            metrics.PERIODIC_FIRED.inc(changed.fired - counted.fired)
            seen, counted = ticks, changed
            self._leader.report(1 if scheduler.is_leader else 0)
