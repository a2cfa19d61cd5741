"""Exactly once per tick, however many schedulers fire at once and across a leader's failover.

Each firing's message id is made unique per firing for these tests (the deterministic id
``cron:<job>:<tick>`` would hide a second firing of a tick behind ``ON CONFLICT DO NOTHING``):
so one message per job and round proves that the lock and the guarded advance of
``next_run_at`` alone let one firing through. Time moves by setting ``next_run_at`` in the
past; progress is awaited through the schedulers' own tick counters, never with sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.database import create_engine, scheduling
from app.config import Settings
from app.core import periodic
from app.core.service import QueueService
from app.scheduler import Scheduler
from app.store import periodic_firing
from app.store.leadership import LEADER_LOCK_KEY
from tests.helpers import execute, fetch, make_queue, scalar
from tests.periodic.helpers import NS, make_job

JOBS = 12
ROUNDS = 25
WAIT_SECONDS = 10


@pytest.fixture
def firings_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every firing gets an id of its own (``cron:<job>:<tick>:<n>``)."""
    counter = itertools.count()
    real = periodic.tick_message_id

    def unique(job: str, tick: datetime) -> str:
        return f"{real(job, tick)}:{next(counter)}"

    monkeypatch.setattr(periodic_firing.periodic, "tick_message_id", unique)


async def make_jobs(service: QueueService) -> None:
    await make_queue(service, NS, "q")
    for n in range(JOBS):
        await make_job(service, f"job{n}")


async def make_all_due(engine: AsyncEngine) -> None:
    """Every job due now, each at a tick of its own in the past."""
    await execute(
        engine,
        "UPDATE periodic_jobs SET next_run_at = clock_timestamp() - interval '1 ms'"
        " * (1 + substring(name FROM 4)::int)",
    )


async def due_jobs(engine: AsyncEngine) -> int:
    return int(
        await scalar(engine, "SELECT count(*) FROM periodic_jobs WHERE next_run_at <= now()")
    )


async def fired_per_job(engine: AsyncEngine) -> Counter[str]:
    rows = await fetch(engine, "SELECT split_part(id, ':', 2) AS job FROM messages")
    return Counter(row["job"] for row in rows)


@contextlib.asynccontextmanager
async def engines(database_url: str, n: int) -> AsyncIterator[list[AsyncEngine]]:
    made = [create_engine(database_url, pool_size=2) for _ in range(n)]
    try:
        yield made
    finally:
        for engine in made:
            await engine.dispose()


@pytest.mark.usefixtures("firings_apart")
async def test_two_schedulers_firing_at_once_fire_each_tick_once(
    service: QueueService, engine: AsyncEngine, database_url: str
) -> None:
    """Two schedulers' firing passes (two leaders at once: one fenced late) run concurrently,
    each on its own connection, over the same due jobs, round after round."""
    await make_jobs(service)
    async with engines(database_url, 2) as (one, two):

        async def fire(on: AsyncEngine) -> int:
            async with on.connect() as conn:
                return await periodic_firing.fire_due(conn)

        for _ in range(ROUNDS):
            await make_all_due(engine)
            fired = await asyncio.gather(fire(one), fire(two), fire(one), fire(two))
            assert sum(fired) == JOBS
            assert await due_jobs(engine) == 0
    assert await fired_per_job(engine) == Counter({f"job{n}": ROUNDS for n in range(JOBS)})


def settings_for(database_url: str) -> Settings:
    return Settings(
        database_url=database_url,
        scheduler_tick_seconds=0.01,
        leader_poll_seconds=0.05,
        scheduler_cleanup_seconds=1,
        leader_stale_seconds=1,
    )


async def first_to_lead(*schedulers: Scheduler) -> Scheduler:
    """Whichever of ``schedulers`` is (or becomes) the leader first."""
    waits = {asyncio.ensure_future(s.wait_until(leader=True)): s for s in schedulers}
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    return waits[done.pop()]


async def next_tick_of_any(*schedulers: Scheduler) -> None:
    """Until one of ``schedulers`` has done one more tick."""
    waits = [asyncio.ensure_future(s.wait_until(ticks=s.ticks + 1)) for s in schedulers]
    try:
        await asyncio.wait(waits, timeout=WAIT_SECONDS, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


@pytest.mark.usefixtures("firings_apart")
async def test_each_tick_fires_once_across_leader_failover(
    service: QueueService, engine: AsyncEngine, database_url: str
) -> None:
    """Two servers' schedulers, the leader's backend killed a third of the way (either takes
    over), the leader then stopped two thirds of the way (the other takes over), and all
    along a stale leader that was never told it lost (its own firing loop on its own
    connection, as a leader fenced late would run): each job fires once per round."""
    await make_jobs(service)
    async with engines(database_url, 3) as (first_engine, second_engine, zombie_engine):
        settings = settings_for(database_url)
        first = Scheduler(first_engine, settings, work=scheduling, node_id="first")
        second = Scheduler(second_engine, settings, work=scheduling, node_id="second")
        stop_zombie = asyncio.Event()
        zombie_fired = 0

        async def zombie() -> None:
            nonlocal zombie_fired
            async with zombie_engine.connect() as conn:
                while not stop_zombie.is_set():
                    zombie_fired += await periodic_firing.fire_due(conn)
                    # At the leaders' pace, so that it races them rather than outruns them.
                    await next_tick_of_any(*(s for s in (first, second) if s._task is not None))

        await first.start()
        await asyncio.wait_for(first.wait_until(leader=True), WAIT_SECONDS)
        await second.start()
        zombie_task = asyncio.create_task(zombie())
        try:
            for round_ in range(ROUNDS):
                if round_ == ROUNDS // 3:
                    async with engine.begin() as conn:
                        await conn.execute(
                            text(
                                "SELECT pg_terminate_backend(pid) FROM pg_locks"
                                " WHERE locktype = 'advisory' AND granted"
                                " AND objid = :low AND classid = :high"
                            ),
                            {"low": LEADER_LOCK_KEY & 0xFFFFFFFF, "high": LEADER_LOCK_KEY >> 32},
                        )
                    await asyncio.wait_for(first.wait_until(leader=False), WAIT_SECONDS)
                    await asyncio.wait_for(first_to_lead(first, second), WAIT_SECONDS)
                if round_ == 2 * ROUNDS // 3:
                    leader = await asyncio.wait_for(first_to_lead(first, second), WAIT_SECONDS)
                    heir = second if leader is first else first
                    await leader.stop()
                    await asyncio.wait_for(heir.wait_until(leader=True), WAIT_SECONDS)
                await make_all_due(engine)
                running = [s for s in (first, second) if s._task is not None]
                async with asyncio.timeout(WAIT_SECONDS):  # a stalled round fails, not hangs
                    while await due_jobs(engine):
                        await next_tick_of_any(*running)
        finally:
            stop_zombie.set()
            await zombie_task
            await first.stop()
            await second.stop()
    fired = await fired_per_job(engine)
    assert fired == Counter({f"job{n}": ROUNDS for n in range(JOBS)})
    # The leaders did fire (not only the stale one).
    assert first.changed.fired + second.changed.fired > 0
    assert first.changed.fired + second.changed.fired + zombie_fired == JOBS * ROUNDS
