"""A pipeline that an error aborts leaves its connection usable: psycopg (3.3) counts the
statements it sent a PREPARE for in the aborted pipeline as prepared, though the server prepared
none, so each of them then failed on that connection ("prepared statement _pg3_N does not
exist") until the connection was replaced. The store replaces it (app/store/paths.py, _driver).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.core.errors import ValidationError
from app.store.postgres import PostgresStore

FIRST = "SELECT 1 WHERE %(x)s::int > 0"
DIVIDE = "SELECT 1 / %(x)s::int"
LAST = "SELECT 2 WHERE %(x)s::int > 0"

PREPARED_FROM = 6
"""The execution at which psycopg prepares a statement (its prepare_threshold is 5)."""


@pytest.fixture
async def one_connection(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine of exactly one pooled connection, so every call runs on the same one."""
    engine = create_async_engine(database_url, pool_size=1, max_overflow=0, pool_timeout=5)
    yield engine
    await engine.dispose()


async def _pipeline(store: PostgresStore, x: int) -> list[list[object]]:
    statements = [(FIRST, {"x": x}), (DIVIDE, {"x": x}), (LAST, {"x": x})]
    rows = await store._driver_rows_together(statements)
    return [[tuple(row) for row in result] for result in rows]


@pytest.mark.parametrize("failing", [PREPARED_FROM - 1, PREPARED_FROM, PREPARED_FROM + 1])
async def test_statements_run_again_after_a_pipeline_an_error_aborted(
    one_connection: AsyncEngine, failing: int
) -> None:
    store = PostgresStore(one_connection)
    for _ in range(failing - 1):
        assert await _pipeline(store, 1) == [[(1,)], [(1,)], [(2,)]]
    with pytest.raises(ValidationError):  # division by zero: a value the database refused
        await _pipeline(store, 0)
    for _ in range(3):
        assert await _pipeline(store, 1) == [[(1,)], [(1,)], [(2,)]]
