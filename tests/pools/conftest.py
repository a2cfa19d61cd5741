"""Fixtures with two pools (docs/scaling.md): the test's database is the catalogue and pool
``default``, and a second fresh database on the same test server is pool ``b``. Both are
registered as a server's start registers them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.database import build_service, create_engine
from app.bootstrap.server import create_app
from app.config import Settings
from app.core.service import QueueService
from app.embedded import LocalCluster
from app.store import migrate, pool_registry
from tests.api.conftest import Caller, make_settings, serve
from tests.conftest import ADMIN_TOKEN


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


@pytest.fixture(scope="module")
def pool_b_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A PostgreSQL of its own for pool ``b``, with the schema at head, that a module's tests
    may stop and start (one per module: starting one takes seconds)."""
    cluster = LocalCluster(Path(tmp_path_factory.mktemp("pool-b")) / "postgres")
    cluster.start()
    try:
        migrate.upgrade(cluster.sqlalchemy_url)
        yield cluster
    finally:
        cluster.stop(mode="immediate")


@pytest.fixture
def outage_app(database_url: str, engine: AsyncEngine, pool_b_cluster: LocalCluster) -> Litestar:
    """The server over the catalogue and pool ``b`` on ``pool_b_cluster``, both registered."""
    pool_registry.register(database_url, "default", database_url)
    pool_registry.register(database_url, "b", pool_b_cluster.sqlalchemy_url)
    settings = make_settings(database_url, pools={"b": pool_b_cluster.sqlalchemy_url}, pool_size=5)
    return create_app(settings, engine=engine)


@pytest.fixture
async def outage_admin(outage_app: Litestar) -> AsyncIterator[Caller]:
    """The admin of the server whose pool b is ``pool_b_cluster``, its lifespan running."""
    async with serve(outage_app) as client:
        yield Caller(client, outage_app, ADMIN_TOKEN)
