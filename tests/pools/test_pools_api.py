"""The server over two pools: the API reaches each namespace on its pool, a long poll on pool
b's queue is woken by pool b's notifications, each pool has its scheduler, and /readyz reports
every pool."""

from __future__ import annotations

import asyncio

import pytest
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.server import create_app
from app.config import Settings
from app.store import migrate
from tests.api.conftest import Caller, assert_error, namespace_caller, serve
from tests.conftest import ADMIN_TOKEN
from tests.helpers import execute, scalar

TIMEOUT = 10.0


async def test_namespaces_are_created_on_a_pool_and_say_which(admin: Caller) -> None:
    created = await admin.post("/v1/namespaces", json={"name": "far", "pool": "b"})
    assert created.status_code == 201, created.text
    assert created.json()["pool"] == "b"
    placed = await admin.post("/v1/namespaces", json={"name": "near"})
    assert placed.json()["pool"] in {"b", "default"}
    listed = (await admin.get("/v1/namespaces")).json()["namespaces"]
    assert [(n["name"], n["pool"]) for n in listed] == [
        ("far", "b"),
        ("near", placed.json()["pool"]),
    ]
    refused = await admin.post("/v1/namespaces", json={"name": "x", "pool": "nowhere"})
    assert_error(refused, 400, "validation_error", "pool")
    assert [n["name"] for n in (await admin.get("/v1/namespaces")).json()["namespaces"]] == [
        "far",
        "near",
    ]


async def test_a_long_poll_on_pool_b_is_woken_by_its_notification(
    admin: Caller, engine_b: AsyncEngine
) -> None:
    far = await namespace_caller(admin, "far", pool="b")
    base = "/v1/namespaces/far/queues/q"
    assert (await far.put(base, json={})).status_code == 201
    registry = far.runtime.pools["b"].waiters
    registry.fallback_seconds = 60  # only pool b's notification can wake it in time
    assert far.runtime.pools["default"].waiters is not registry
    queue = await far.runtime.service.get_queue_or_404("far", "q")
    consumer = asyncio.create_task(far.post(f"{base}/dequeue", json={"wait_seconds": 20}))
    await asyncio.wait_for(registry.wait_for_waiting(queue.id, 1), TIMEOUT)
    enqueued = await far.post(f"{base}/messages", json={"messages": [{"id": "m"}]})
    assert enqueued.status_code == 201, enqueued.text
    answered = await asyncio.wait_for(consumer, TIMEOUT)
    assert [m["id"] for m in answered.json()["messages"]] == ["m"]
    assert await scalar(engine_b, "SELECT state::text FROM messages WHERE id = 'm'") == ("running")


async def test_readiness_reports_every_pool(admin: Caller) -> None:
    head = migrate.head_revision()
    response = await admin.get("/readyz")
    assert response.status_code == 200, response.text
    assert response.json()["pools"] == {
        "default": {"status": "ready", "revision": head},
        "b": {"status": "ready", "revision": head},
    }


async def test_a_pool_behind_the_schema_makes_the_server_unready(
    admin: Caller, engine_b: AsyncEngine
) -> None:
    await execute(engine_b, "UPDATE alembic_version SET version_num = '0010'")
    error = assert_error(await admin.get("/readyz"), 503, "unavailable")
    assert "pool 'b'" in error["message"]
    assert error["details"]["pool"] == "b"


@pytest.fixture
def scheduled(settings: Settings, engine: AsyncEngine) -> Litestar:
    return create_app(settings.model_copy(update={"scheduler_enabled": True}), engine=engine)


async def test_each_pool_has_its_scheduler(scheduled: Litestar, engine_b: AsyncEngine) -> None:
    """Pool b's kept counts are folded by pool b's own scheduler leader."""
    async with serve(scheduled) as client:
        admin = Caller(client, scheduled, ADMIN_TOKEN)
        far = await namespace_caller(admin, "far", pool="b")
        await far.put("/v1/namespaces/far/queues/q", json={})
        await far.post("/v1/namespaces/far/queues/q/messages", json={"messages": [{}, {}]})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        # No event to await across databases: poll pool b until its leader has folded.
        while await scalar(engine_b, "SELECT count(*) FROM queue_state_count_deltas"):
            assert loop.time() < deadline, "pool b's scheduler never folded its counts"
            await asyncio.sleep(0.05)
        assert await scalar(engine_b, "SELECT sum(n) FROM queue_state_counts") == 2
        assert await scalar(engine_b, "SELECT count(*) FROM scheduler_nodes WHERE is_leader") == 1
