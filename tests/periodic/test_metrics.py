"""A server whose scheduler runs fires a due periodic job by itself, and counts it in
``sundial_periodic_fired_total``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.server import create_app
from app.observability.endpoint import render
from tests.api.conftest import Caller, make_settings, serve
from tests.conftest import ADMIN_TOKEN
from tests.observability.helpers import parse, scrape, server_metrics, value
from tests.periodic.helpers import set_next_run

FIRED = "sundial_periodic_fired_total"


@pytest.fixture
async def scheduled(database_url: str, engine: AsyncEngine) -> AsyncIterator[Caller]:
    """An admin caller of an app whose scheduler runs (fast ticks)."""
    settings = make_settings(database_url, scheduler_enabled=True, scheduler_tick_seconds=0.02)
    app: Litestar = create_app(settings, engine=engine)
    async with serve(app) as client:
        yield Caller(client, app, ADMIN_TOKEN)


async def test_the_server_fires_a_due_job_and_counts_it(
    scheduled: Caller, engine: AsyncEngine
) -> None:
    scheduler = server_metrics(scheduled).samplers["default"].scheduler
    assert scheduler is not None
    await asyncio.wait_for(scheduler.wait_until(leader=True), 10)
    await scheduled.post("/v1/namespaces", json={"name": "s"})
    assert (await scheduled.put("/v1/namespaces/s/queues/q", json={})).status_code == 201
    job = {"queue": "q", "schedule": "* * * * *", "payload": {"n": 1}}
    assert (await scheduled.put("/v1/namespaces/s/periodic/job", json=job)).status_code == 201
    before = await scrape(scheduled)
    await set_next_run(engine, "job", "now() - interval '1 second'")

    def counted() -> float:
        return value(parse(render({}).decode()), FIRED) - value(before, FIRED)

    for _ in range(200):  # bounded: wait ticks, never sleep
        if counted() >= 1:
            break
        await asyncio.wait_for(scheduler.wait_until(ticks=scheduler.ticks + 1), 5)
    assert counted() == 1
    fired = (await scheduled.get("/v1/namespaces/s/periodic/job")).json()
    message = await scheduled.get(f"/v1/namespaces/s/queues/q/messages/{fired['last_message_id']}")
    assert message.status_code == 200, message.text
    assert message.json()["payload"] == {"n": 1}
