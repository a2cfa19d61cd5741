"""Registering databases as pools: numbers given once and kept, each pool its own range of queue
ids, and a database that is not the pool the configuration says refused with the reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.database import build_service, create_engine, upgrade_pools
from app.core.errors import UnavailableError
from app.core.models import QueueConfig
from app.store import pool_registry
from app.store.pool_registry import PoolMisconfigured, RegisteredPool
from app.store.postgres import PostgresStore
from tests.api.conftest import make_settings
from tests.helpers import scalar

if TYPE_CHECKING:
    from tests.conftest import TestDatabase


def test_pools_are_numbered_once_in_the_order_they_are_registered(
    database_url: str, postgres: TestDatabase
) -> None:
    b, c = postgres.url(postgres.create()), postgres.url(postgres.create())
    assert pool_registry.register(database_url, "default", database_url) == RegisteredPool(
        "default", 0
    )
    assert pool_registry.register(database_url, "c", c).number == 1
    assert pool_registry.register(database_url, "b", b).number == 2
    # Registering again (every start does) changes nothing.
    assert pool_registry.register(database_url, "b", b).number == 2
    assert pool_registry.registered(database_url) == [
        RegisteredPool("default", 0),
        RegisteredPool("c", 1),
        RegisteredPool("b", 2),
    ]


def test_a_database_registered_as_one_pool_refuses_to_be_another(
    database_url: str, postgres: TestDatabase
) -> None:
    b = postgres.url(postgres.create())
    pool_registry.register(database_url, "default", database_url)
    pool_registry.register(database_url, "b", b)
    with pytest.raises(PoolMisconfigured, match="registered as pool 'b'"):
        pool_registry.register(database_url, "c", b)
    # The catalogue's own database is the pool default, and no other.
    with pytest.raises(PoolMisconfigured, match="registered as pool 'default'"):
        pool_registry.register(database_url, "d", database_url)


async def test_a_database_that_already_holds_queues_is_refused_as_a_new_pool(
    database_url: str, postgres: TestDatabase
) -> None:
    used = postgres.url(postgres.create())
    engine = create_engine(used, pool_size=1)
    try:
        alone = PostgresStore(engine)  # the database served alone before
        await alone.create_namespace("ns", "")
        await alone.insert_queue("ns", "q", QueueConfig())
    finally:
        await engine.dispose()
    pool_registry.register(database_url, "default", database_url)
    with pytest.raises(PoolMisconfigured, match="outside the pool's range"):
        pool_registry.register(database_url, "b", used)


async def test_upgrading_migrates_and_registers_every_pool(
    database_url: str, postgres: TestDatabase, engine: AsyncEngine
) -> None:
    blank = postgres.create(template=None)  # not even migrated
    settings = make_settings(database_url, pools={"b": postgres.url(blank)})
    upgrade_pools(settings, database_url)
    pool_b = create_engine(postgres.url(blank), pool_size=1)
    try:
        assert await scalar(pool_b, "SELECT name FROM pool_identity") == "b"
        assert await scalar(pool_b, "SELECT count(*) FROM alembic_version") == 1
    finally:
        await pool_b.dispose()
    assert await scalar(engine, "SELECT name FROM pool_identity") == "default"
    assert await scalar(engine, "SELECT number FROM pools WHERE name = 'b'") == 1


def test_the_server_starts_without_a_pool_that_does_not_answer(
    database_url: str, pool_b_url: str
) -> None:
    """A pool that is down at the server's start keeps only its own namespaces from being
    served; ``sundial db upgrade`` (not serving) insists on every pool."""
    down = "postgresql+psycopg://postgres@127.0.0.1:9/nowhere"  # nothing listens on port 9
    settings = make_settings(
        database_url, pools={"b": pool_b_url, "c": down}, startup_timeout_seconds=0.2
    )
    upgrade_pools(settings, database_url, serving=True)
    assert [p.name for p in pool_registry.registered(database_url)] == ["default", "b"]
    with pytest.raises(click.ClickException, match="pool 'c'"):
        upgrade_pools(settings, database_url)


async def test_no_namespace_or_queue_is_made_on_a_pool_not_registered_as_such(
    database_url: str, pool_b_url: str, postgres: TestDatabase
) -> None:
    c = postgres.url(postgres.create())  # migrated, never registered
    pool_registry.register(database_url, "default", database_url)
    pool_registry.register(database_url, "b", pool_b_url)
    engines = {n: create_engine(u, pool_size=1) for n, u in (("default", database_url),
               ("b", pool_b_url), ("c", c))}  # fmt: skip
    settings = make_settings(database_url, pools={"b": pool_b_url, "c": c})
    try:
        service = build_service(engines, settings)
        with pytest.raises(UnavailableError, match="'c' is not registered"):
            await service.create_namespace("ns", pool="c")
        # b is b: it may hold namespaces.
        await service.create_namespace("ns", pool="b")
        # And a database that says it is b is not c.
        misnamed = build_service({"default": engines["default"], "c": engines["b"]}, settings)
        with pytest.raises(UnavailableError, match="registered as 'b'"):
            await misnamed.create_namespace("other", pool="c")
    finally:
        for engine in engines.values():
            await engine.dispose()
