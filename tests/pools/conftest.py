"""Fixtures with two pools (docs/scaling.md): the test's database is the catalogue and pool
``default``, and a second fresh database on the same test server is pool ``b``. Both are
registered as a server's start registers them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.database import build_service, create_engine
from app.bootstrap.server import create_app
from app.config import Settings
from app.core.service import QueueService
from app.store import pool_registry
from tests.api.conftest import Caller, make_settings, serve
from tests.conftest import ADMIN_TOKEN, TestDatabase


@pytest.fixture
def pool_b_url(postgres: TestDatabase) -> Iterator[str]:
    """A second fresh, migrated database: pool ``b``."""
    name = postgres.create()
    yield postgres.url(name)
    postgres.drop(name)


@pytest.fixture
def settings(database_url: str, pool_b_url: str) -> Settings:
    """Settings with pool ``b`` beside the catalogue, both registered."""
    pool_registry.register(database_url, "default", database_url)
    pool_registry.register(database_url, "b", pool_b_url)
    return make_settings(database_url, pools={"b": pool_b_url})


@pytest.fixture
async def engine_b(pool_b_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(pool_b_url, pool_size=10)
    yield engine
    await engine.dispose()


@pytest.fixture
def pooled(settings: Settings, engine: AsyncEngine, engine_b: AsyncEngine) -> QueueService:
    """The queue service over both pools."""
    return build_service({"default": engine, "b": engine_b}, settings)


@pytest.fixture
def app(settings: Settings, engine: AsyncEngine) -> Litestar:
    """The server over both pools (pool b's engine, listener and waiters its own)."""
    return create_app(settings, engine=engine)


@pytest.fixture
async def admin(app: Litestar) -> AsyncIterator[Caller]:
    """The admin's caller, with the app's lifespan running."""
    async with serve(app) as client:
        yield Caller(client, app, ADMIN_TOKEN)
