"""API test fixtures: the app on this test's database, driven over HTTP at the ASGI level.

The client is :class:`httpx.AsyncClient` over :class:`httpx.ASGITransport`, with the app's
lifespan (listener included) entered around it, all in the test's event loop. Litestar's
``AsyncTestClient`` is not used: it runs each request synchronously on a portal thread with its
own event loop, so two requests can never be in flight at once (a long poll and the enqueue that
wakes it) and the app would use the test's engine from another loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from litestar import Litestar
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.server import create_app
from app.config import Settings
from app.web.runtime import Runtime
from tests.conftest import ADMIN_TOKEN

PAYLOAD_LIMIT = 4096
BODY_LIMIT = 64 * 1024


def make_settings(database_url: str | None, **overrides: Any) -> Settings:
    """Test settings: no scheduler, the test admin token, small limits, no throttle of failed
    authentication, no .env file."""
    values: dict[str, Any] = {
        "database_url": database_url,
        "admin_token": SecretStr(ADMIN_TOKEN),
        "scheduler_enabled": False,
        "max_payload_bytes": PAYLOAD_LIMIT,
        "max_body_bytes": BODY_LIMIT,
        # Tests send many unknown or revoked tokens from one address; the throttle of failed
        # authentication has tests of its own (tests/web/test_throttle.py), which turn it on.
        "auth_failure_limit": 0,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@dataclass
class Caller:
    """An HTTP client that presents one bearer token (or none)."""

    client: httpx.AsyncClient
    app: Litestar
    token: str | None
    namespace: str = ""
    headers: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        return await self.client.request(method, path, headers=headers, **kwargs)

    async def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("GET", path, **kwargs)

    async def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("POST", path, **kwargs)

    async def put(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("PUT", path, **kwargs)

    async def patch(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("PATCH", path, **kwargs)

    async def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("DELETE", path, **kwargs)

    @property
    def runtime(self) -> Runtime:
        runtime: Runtime = self.app.state.runtime
        return runtime


def assert_error(response: httpx.Response, status: int, code: str, field: str | None = None):
    """The response is an error in the API's shape, with this status, code (and field)."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    if field is not None:
        assert body["error"]["details"].get("field") == field, body
    return body["error"]


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


@pytest.fixture
def app(settings: Settings, engine: AsyncEngine) -> Litestar:
    return create_app(settings, engine=engine)


@asynccontextmanager
async def serve(app: Litestar) -> AsyncIterator[httpx.AsyncClient]:
    """Run ``app``'s lifespan and give an HTTP client that calls it in this event loop.

    The lifespan runs in a task of its own (it holds an anyio task group, which must be
    exited by the task that entered it; pytest may tear fixtures down in another task).
    """
    started, stop = asyncio.Event(), asyncio.Event()

    async def run() -> None:
        async with app.lifespan():
            started.set()
            await stop.wait()

    lifespan = asyncio.create_task(run())
    ready = asyncio.create_task(started.wait())
    await asyncio.wait({lifespan, ready}, return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if lifespan.done():
        lifespan.result()  # startup failed: raise its error
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sundial.test") as client:
            yield client
    finally:
        stop.set()
        await lifespan


@asynccontextmanager
async def two_processes(database_url: str, engine: AsyncEngine) -> AsyncIterator[list[Caller]]:
    """Admin callers of two apps on one database, each app with its own lookup cache (kept a
    minute, so no expiry can hide a stale entry): two server processes."""
    settings = make_settings(database_url, lookup_cache_seconds=60)
    first, second = create_app(settings, engine=engine), create_app(settings, engine=engine)
    async with serve(first) as one, serve(second) as two:
        yield [Caller(one, first, ADMIN_TOKEN), Caller(two, second, ADMIN_TOKEN)]


def as_token(caller: Caller, token: str) -> Caller:
    """``caller``'s client and app, presenting ``token``."""
    return Caller(caller.client, caller.app, token)


@pytest.fixture
async def client(app: Litestar) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(app) as client:
        yield client


@pytest.fixture
def anonymous(client: httpx.AsyncClient, app: Litestar) -> Caller:
    return Caller(client, app, None)


@pytest.fixture
def admin(client: httpx.AsyncClient, app: Litestar) -> Caller:
    return Caller(client, app, ADMIN_TOKEN)


async def namespace_caller(admin: Caller, name: str, pool: str | None = None) -> Caller:
    """Create namespace ``name`` (on ``pool``) and a caller with a fresh token of it."""
    body = {"name": name} if pool is None else {"name": name, "pool": pool}
    response = await admin.post("/v1/namespaces", json=body)
    assert response.status_code == 201, response.text
    response = await admin.post(f"/v1/namespaces/{name}/tokens", json={"label": "test"})
    assert response.status_code == 201, response.text
    return Caller(admin.client, admin.app, response.json()["token"], namespace=name)


@pytest.fixture
async def alpha(admin: Caller) -> Caller:
    """A caller holding a token of namespace ``alpha``."""
    return await namespace_caller(admin, "alpha")


@pytest.fixture
async def queue(alpha: Caller) -> str:
    """A simple queue ``q`` in ``alpha``; its base path."""
    base = "/v1/namespaces/alpha/queues/q"
    response = await alpha.put(base, json={})
    assert response.status_code == 201, response.text
    return base
