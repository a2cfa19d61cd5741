"""The driver path renews the pool after a disconnect as SQLAlchemy does on its own path, with
public API only (app/store/renewal.py): the broken connection is discarded, every connection
made before it is replaced at its next checkout, a checkout never meets two renewals at once, and
a connection that a renewal condemned already does not start another."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn

from app.core.errors import UnavailableError
from app.core.service import QueueService
from app.core.validation import Limits
from app.store import renewal
from app.store.postgres import PostgresStore
from tests.helpers import make_queue


@pytest.fixture
async def small(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine of two pooled connections, no overflow: checkouts are predictable."""
    engine = create_async_engine(database_url, pool_size=2, max_overflow=0, pool_timeout=5)
    yield engine
    await engine.dispose()


async def _checkout(engine: AsyncEngine) -> PoolProxiedConnection:
    return await engine.raw_connection()


def _pid(pooled: PoolProxiedConnection) -> int:
    driver: Any = pooled.driver_connection
    pid: int = driver.info.backend_pid
    return pid


async def _discard(engine: AsyncEngine, pooled: PoolProxiedConnection) -> None:
    await greenlet_spawn(renewal.discard, engine, pooled, OSError("gone"))
    await greenlet_spawn(pooled.close)


async def _give_back(pooled: PoolProxiedConnection) -> None:
    await greenlet_spawn(pooled.close)


def _terminate_all(postgres: Any, database_url: str) -> None:
    dsn = postgres.dsn(make_url(database_url).database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        )


async def test_a_restart_costs_the_driver_path_one_request(
    small: AsyncEngine, postgres: Any, database_url: str
) -> None:
    store = PostgresStore(small)
    queue = await make_queue(QueueService(store, limits=Limits()))
    held = [await _checkout(small) for _ in range(2)]  # both pooled connections in use once
    for pooled in held:
        await _give_back(pooled)
    _terminate_all(postgres, database_url)
    outcomes = []
    for _ in range(4):
        try:
            await store.dequeue(queue, 1, None, {})  # the driver path alone
            outcomes.append("ok")
        except UnavailableError:
            outcomes.append("503")
    assert outcomes == ["503", "ok", "ok", "ok"]


async def test_two_disconnects_arm_one_renewal(small: AsyncEngine) -> None:
    PostgresStore(small)  # watches the engine
    PostgresStore(small)  # a second store of the same engine shares its renewal
    first, second = await _checkout(small), await _checkout(small)
    await _discard(small, first)
    await _discard(small, second)
    # SQLAlchemy gives a checkout two tries: two renewals at once would make it fail.
    pooled = await _checkout(small)
    assert _pid(pooled)
    await _give_back(pooled)


async def test_a_pending_renewal_survives_dispose(small: AsyncEngine) -> None:
    PostgresStore(small)
    await _discard(small, await _checkout(small))
    await small.dispose()
    for _ in range(3):
        pooled = await _checkout(small)
        assert _pid(pooled)
        await _give_back(pooled)
    await _discard(small, await _checkout(small))  # and one armed after it fires too
    pooled = await _checkout(small)
    assert _pid(pooled)
    await _give_back(pooled)


async def test_a_condemned_connection_does_not_renew_the_pool_again(small: AsyncEngine) -> None:
    PostgresStore(small)
    old, condemned = await _checkout(small), await _checkout(small)
    await _discard(small, old)  # arms a renewal
    fresh = await _checkout(small)  # the renewal fires here: `condemned` is older than it
    fresh_pid = _pid(fresh)
    await _discard(small, condemned)  # made before that renewal: nothing to renew
    await _give_back(fresh)
    # The pool holds an empty entry, then `fresh`'s: a renewal would replace `fresh` too.
    other, again = await _checkout(small), await _checkout(small)
    assert _pid(again) == fresh_pid
    await _give_back(other)
    await _give_back(again)
