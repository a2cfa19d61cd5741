"""The scheduler's metrics: every tick counted even when two finish before the watcher wakes,
and leadership, ticks and expiries of a running scheduler."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from litestar import Litestar
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.database import scheduling
from app.bootstrap.server import create_app
from app.core.maintenance import TickResult
from app.observability.endpoint import render
from app.observability.sampler import Sampler
from app.scheduler import Scheduler
from app.web.waiters import WaiterRegistry
from tests.api.conftest import Caller, make_settings, serve
from tests.conftest import ADMIN_TOKEN
from tests.observability.helpers import parse, scrape, server_metrics, value


@pytest.fixture
async def scheduled(database_url: str, engine: AsyncEngine) -> AsyncIterator[Caller]:
    """An admin caller of an app whose scheduler runs (fast ticks)."""
    settings = make_settings(database_url, scheduler_enabled=True, scheduler_tick_seconds=0.02)
    app: Litestar = create_app(settings, engine=engine)
    async with serve(app) as client:
        yield Caller(client, app, ADMIN_TOKEN)


async def test_ticks_that_finish_before_the_watcher_wakes_are_all_counted(engine, database_url):
    # The tick watcher runs on the event loop after the scheduler announces a tick; on a busy
    # loop two ticks can finish before it runs. Both must be counted. The scheduler is not
    # started: its counters are moved by hand, its announcement is the real one.
    scheduler = Scheduler(engine, make_settings(database_url), work=scheduling)
    sampler = Sampler(engine, WaiterRegistry(), scheduler)

    def expired_so_far() -> float:
        return value(parse(render({}).decode()), "sundial_messages_expired_total")

    before = expired_so_far()
    await sampler.start()
    try:
        await asyncio.sleep(0)  # one loop turn: the watcher takes its baseline and waits
        for result in (TickResult(expired=2), TickResult(expired=3)):
            scheduler.changed += result
            scheduler.ticks += 1
        await scheduler._announce()
        for _ in range(100):  # bounded loop turns, no wall-clock wait
            if expired_so_far() - before == 5:
                break
            await asyncio.sleep(0)
        assert expired_so_far() - before == 5
    finally:
        await sampler.stop()


async def test_scheduler_leadership_ticks_and_expiry_counts(scheduled: Caller, engine):
    caller = scheduled
    sampler = server_metrics(caller).samplers["default"]
    scheduler = sampler.scheduler
    assert scheduler is not None
    await asyncio.wait_for(scheduler.wait_until(leader=True), 10)
    await caller.post("/v1/namespaces", json={"name": "s"})
    base = "/v1/namespaces/s/queues/q"
    assert (await caller.put(base, json={"max_attempts": 1})).status_code == 201
    before = await scrape(caller)
    body = {"messages": [{"id": "held"}, {"id": "doomed", "ttl_seconds": 3600}]}
    assert (await caller.post(f"{base}/messages", json=body)).status_code == 201
    held = (await caller.post(f"{base}/dequeue", json={"count": 1})).json()["messages"]
    assert [m["id"] for m in held] == ["held"]
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE messages SET expires_at = now() - interval '1 second' WHERE id = 'doomed'")
        )
        await conn.execute(
            text(
                "UPDATE messages SET lease_expires_at = now() - interval '1 second'"
                " WHERE id = 'held'"
            )
        )

    def counted() -> tuple[float, float]:
        samples = parse(render({}).decode())
        return (
            value(samples, "sundial_messages_expired_total")
            - value(before, "sundial_messages_expired_total"),
            value(samples, "sundial_leases_expired_total")
            - value(before, "sundial_leases_expired_total"),
        )

    # The tick watcher counts right after each tick: wait ticks (bounded), never sleep.
    for _ in range(200):
        if counted() == (1, 1):
            break
        await asyncio.wait_for(scheduler.wait_until(ticks=scheduler.ticks + 1), 5)
    assert counted() == (1, 1)
    sampler.sample()
    samples = await scrape(caller)
    assert value(samples, "sundial_scheduler_leader", pool="default") >= 1
    assert value(samples, "sundial_scheduler_ticks_total") > value(
        before, "sundial_scheduler_ticks_total"
    )
    assert value(samples, "sundial_scheduler_leaders", pool="default") == 1
