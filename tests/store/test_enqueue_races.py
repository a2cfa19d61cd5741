"""Enqueue's answer stays true when the ids it finds taken change while it runs.

The enqueue statement reports the state of every id it found taken, except one that a producer
committed while the statement ran (its snapshot predates that commit): that one is read by a
second statement. These tests force the interleavings with a real concurrent transaction and a
hook before that second statement.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import NewMessage
from app.core.service import QueueService
from app.core.validation import Limits
from app.database_url import psycopg_dsn
from app.store.paths import driver_sql
from app.store.postgres import PostgresStore
from app.store.sql.reads import MESSAGES_STATES
from tests.concurrency.helpers import wait_for_lock_wait
from tests.helpers import fetch, make_queue

Hook = Callable[[], Awaitable[None]]

# The statement by which enqueue reads the states it missed, as the driver path runs it.
_STATES = driver_sql(MESSAGES_STATES)


class _Cursor:
    def __init__(self, cursor: psycopg.AsyncCursor[Any], before_states: Hook) -> None:
        self._cursor, self._before_states = cursor, before_states

    async def execute(self, statement: str, params: Any) -> None:
        if statement == _STATES:
            await self._before_states()
        await self._cursor.execute(statement, params)

    async def fetchall(self) -> list[Any]:
        return await self._cursor.fetchall()


class _Driver:
    def __init__(self, driver: psycopg.AsyncConnection[Any], before_states: Hook) -> None:
        self._driver, self._before_states = driver, before_states

    def cursor(self, **kwargs: Any) -> _Cursor:
        return _Cursor(self._driver.cursor(**kwargs), self._before_states)


class HookedStore(PostgresStore):
    """A store that runs ``before_states`` just before enqueue reads the states it missed."""

    before_states: Hook

    @asynccontextmanager
    async def _driver(self) -> AsyncIterator[Any]:
        async with super()._driver() as driver:
            yield _Driver(driver, self.before_states)


@pytest.fixture
async def racing(engine: AsyncEngine, database_url: str):
    """A hooked service, and a second producer's connection (autocommit off)."""
    store = HookedStore(engine)
    service = QueueService(store, limits=Limits())
    queue = await make_queue(service)
    other = await psycopg.AsyncConnection.connect(psycopg_dsn(database_url))
    yield service, store, queue, other
    await other.close()


async def insert_uncommitted(other: psycopg.AsyncConnection[Any], queue_id: int, id: str) -> None:
    await other.execute(
        "INSERT INTO messages (queue_id, id, priority, state, visible_at)"
        " VALUES (%s, %s, 0, 'pending', now())",
        (queue_id, id),
    )


async def test_an_id_another_producer_commits_meanwhile_is_reported_with_its_state(racing, engine):
    service, store, queue, other = racing

    async def nothing() -> None:
        pass

    store.before_states = nothing
    await insert_uncommitted(other, queue.id, "taken")
    enqueue = asyncio.create_task(
        service.enqueue("ns", "q", [NewMessage(id="taken"), NewMessage(id="new")])
    )
    await wait_for_lock_wait(engine)  # on the other producer's uncommitted "taken"
    await other.commit()
    outcomes = {o.id: (o.created, str(o.state)) for o in await enqueue}
    assert outcomes == {"taken": (False, "pending"), "new": (True, "pending")}


async def test_an_id_gone_before_its_state_is_read_is_enqueued_again_not_a_500(racing, engine):
    service, store, queue, other = racing

    async def delete_taken() -> None:
        # Between the insert and the read: the other producer's message is deleted (or
        # purged, or archived), so there is no state to report.
        await other.execute("DELETE FROM messages WHERE id = 'taken'")
        await other.commit()

    store.before_states = delete_taken
    await insert_uncommitted(other, queue.id, "taken")
    enqueue = asyncio.create_task(
        service.enqueue("ns", "q", [NewMessage(id="taken"), NewMessage(id="new")])
    )
    await wait_for_lock_wait(engine)
    await other.commit()
    outcomes = {o.id: o.created for o in await enqueue}
    assert outcomes == {"taken": True, "new": True}
    rows = await fetch(engine, "SELECT id FROM messages ORDER BY id")
    assert [r["id"] for r in rows] == ["new", "taken"]


async def test_an_id_taken_before_the_statement_is_reported_by_the_statement_itself(racing):
    service, store, _, _ = racing

    async def fail() -> None:
        raise AssertionError("no second statement was needed")

    store.before_states = fail
    await service.enqueue("ns", "q", [NewMessage(id="old")])
    outcomes = await service.enqueue("ns", "q", [NewMessage(id="old"), NewMessage(id="fresh")])
    assert [(o.id, o.created) for o in outcomes] == [("old", False), ("fresh", True)]
