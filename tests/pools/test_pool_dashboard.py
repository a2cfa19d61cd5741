"""The dashboard of a server over two pools: the overview's Pools card names each pool with its
namespaces, waiting and running messages, the queue table says each namespace's pool, and the
live JSON says the same; with pool b down (a PostgreSQL of its own that the test stops), the
overview still renders the default pool's namespaces and queues and shows pool b, with its
namespaces, as unavailable, and shows it again once it answers."""

from __future__ import annotations

import asyncio
import html
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import UnavailableError
from app.core.models import NewMessage
from app.core.service import QueueService
from app.embedded import LocalCluster
from tests.api.conftest import serve
from tests.dashboard.conftest import Browser
from tests.helpers import execute, make_queue

RECOVERY_SECONDS = 30.0


async def signed_in_to(app: Litestar) -> AsyncIterator[Browser]:
    """A browser signed in to ``app``'s dashboard, with the app's lifespan running."""
    async with serve(app) as client:
        browser = Browser(client)
        assert (await browser.sign_in()).status_code == 303
        yield browser


@pytest.fixture
async def signed_in(app: Litestar) -> AsyncIterator[Browser]:
    async for browser in signed_in_to(app):
        yield browser


def service_of(app: Litestar) -> QueueService:
    """The app's queue service, over both pools."""
    service: QueueService = app.state.runtime.service
    return service


async def namespace_on(service: QueueService, pool: str, namespace: str, *ids: str) -> None:
    """Namespace ``namespace`` on ``pool`` with queue ``q`` holding messages ``ids``."""
    await service.create_namespace(namespace, pool=pool)
    await make_queue(service, namespace, "q")
    if ids:
        await service.enqueue(namespace, "q", [NewMessage(id=i) for i in ids])


def pool_row(page: str, pool: str) -> str:
    """The Pools card's row of ``pool``, as text without tags."""
    match = re.search(rf'<tr data-pool="{pool}"[^>]*>(.*?)</tr>', page, re.S)
    assert match, f"no row of pool {pool} in the Pools card"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", match.group(1))).split())


def namespace_header(page: str, namespace: str) -> str:
    """The queue table's header row of ``namespace``, as text without tags."""
    match = re.search(rf'<tr class="ns-row"><th colspan="10">{namespace}\b(.*?)</th>', page, re.S)
    assert match, f"no row of namespace {namespace} in the queue table"
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(1)).split())


async def test_the_overview_shows_each_pool_and_each_namespaces_pool(
    signed_in: Browser, app: Litestar, engine_b: AsyncEngine
) -> None:
    service = service_of(app)
    await namespace_on(service, "default", "near", "n1", "n2", "n3")
    await service.dequeue("near", "q", count=1)
    await namespace_on(service, "b", "far", "f1")
    await service.enqueue("far", "q", [NewMessage(id="later", delay_seconds=3600)])
    await service.create_namespace("idle", pool="b")
    # "near" in pool b's database too, as a move between pools leaves it for a while: the
    # catalogue places it on default, so it is not one of pool b's.
    await execute(engine_b, "INSERT INTO namespaces (name) VALUES ('near')")

    page = await signed_in.get("/dashboard/")

    assert page.status_code == 200
    assert pool_row(page.text, "default") == "default answering near 2 1"
    assert pool_row(page.text, "b") == "b answering far, idle 2 0"
    assert namespace_header(page.text, "near") == "pool default"
    assert namespace_header(page.text, "far") == "pool b"
    assert 'href="/dashboard/queues/far/q"' in page.text
    assert 'href="/dashboard/queues/near/q"' in page.text
    data = (await signed_in.get("/dashboard/api/overview")).json()
    assert data["pools"] == [
        {
            "name": "default",
            "available": True,
            "namespaces": ["near"],
            "unavailable_namespaces": [],
            "waiting": 2,
            "running": 1,
        },
        {
            "name": "b",
            "available": True,
            "namespaces": ["far", "idle"],
            "unavailable_namespaces": [],
            "waiting": 2,
            "running": 0,
        },
    ]
    assert sorted((q["key"], q["pool"]) for q in data["queues"]) == [
        ("far/q", "b"),
        ("near/q", "default"),
    ]


async def test_a_namespace_whose_queues_cannot_be_read_is_shown_so(
    signed_in: Browser, app: Litestar, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = service_of(app)
    await namespace_on(service, "b", "far", "f1")
    await namespace_on(service, "b", "next", "x1", "x2")
    list_queues = service.list_queues

    async def moving(namespace: str) -> Any:
        if namespace == "far":  # as while it moves to another pool
            raise UnavailableError("namespace 'far' is moving to another pool; retry")
        return await list_queues(namespace)

    monkeypatch.setattr(service, "list_queues", moving)

    page = await signed_in.get("/dashboard/")

    assert page.status_code == 200, page.text
    assert pool_row(page.text, "b") == "b answering far, next 2 0"
    assert namespace_header(page.text, "far") == "pool b"
    assert "Its queues cannot be read now" in page.text
    assert 'href="/dashboard/queues/next/q"' in page.text
    data = (await signed_in.get("/dashboard/api/overview")).json()
    assert data["pools"][1]["unavailable_namespaces"] == ["far"]
    assert [q["key"] for q in data["queues"]] == ["next/q"]


# --- pool b down --------------------------------------------------------------------------------


@pytest.fixture
async def outage_browser(outage_app: Litestar) -> AsyncIterator[Browser]:
    async for browser in signed_in_to(outage_app):
        yield browser


async def overview_data(browser: Browser, app: Litestar) -> dict[str, Any]:
    """The live JSON of the overview, read now (not the one cached for a moment)."""
    app.state.dashboard_overview.ttl = 0  # never served from the cache
    response = await browser.get("/dashboard/api/overview")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


async def test_the_overview_shows_a_pool_that_is_down_as_unavailable(
    outage_browser: Browser, outage_app: Litestar, pool_b_cluster: LocalCluster
) -> None:
    browser, app = outage_browser, outage_app
    service = service_of(app)
    await namespace_on(service, "default", "near", "n1")
    await namespace_on(service, "b", "far", "f1", "f2")

    await asyncio.to_thread(pool_b_cluster.stop, mode="immediate")
    try:
        page = await browser.get("/dashboard/")
        assert page.status_code == 200, page.text
        # The default pool's namespace and queue, as usual.
        assert 'href="/dashboard/queues/near/q"' in page.text
        assert re.search(r'data-q="near/q" data-count="pending">1<', page.text)
        assert pool_row(page.text, "default") == "default answering near 1 0"
        # Pool b and its namespace, as unavailable; none of its queues.
        assert pool_row(page.text, "b") == "b unavailable far — —"
        assert "1 of 2 pools unavailable: b" in page.text
        assert namespace_header(page.text, "far") == "pool b"
        assert "Pool <strong>b</strong> is not answering: its queues are not shown." in page.text
        assert "/dashboard/queues/far/q" not in page.text
        data = await overview_data(browser, app)
        assert data["pools"][1] == {
            "name": "b",
            "available": False,
            "namespaces": ["far"],
            "unavailable_namespaces": ["far"],
            "waiting": None,
            "running": None,
        }
        assert [q["key"] for q in data["queues"]] == ["near/q"]
        assert (await browser.get("/dashboard/dead-letters")).status_code == 200
    finally:
        await asyncio.to_thread(pool_b_cluster.start)

    # Back: pool b's namespace and queue are shown again once it answers.
    deadline = time.monotonic() + RECOVERY_SECONDS
    while not (data := await overview_data(browser, app))["pools"][1]["available"]:
        assert time.monotonic() < deadline, "pool b did not come back on the overview"
        await asyncio.sleep(0.2)
    assert data["pools"][1]["waiting"] == 2
    assert sorted(q["key"] for q in data["queues"]) == ["far/q", "near/q"]
