"""What a connection that reaches a standby means to the store: after a failover, a pooled
connection (or a new one to a node that was just demoted) may find its session read-only, and
every write on it fails with SQLSTATE 25006. Such a write must answer 503, never 500, and the
pool must be renewed rather than hand the same connection to the next request.

A standby is played by the test's own database set to ``default_transaction_read_only``: its
connections refuse writes with the same SQLSTATE a standby's do.
"""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import UnavailableError
from app.core.models import NewMessage, QueueConfig
from app.core.service import QueueService
from tests.conftest import TestDatabase as Postgres
from tests.helpers import make_queue


def set_read_only(postgres: Postgres, database: str, read_only: bool) -> None:
    """Make new sessions of ``database`` read-only (a standby) or not (the primary again)."""
    value = "on" if read_only else "off"
    with psycopg.connect(postgres.admin_dsn(), autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{database}" SET default_transaction_read_only = {value}')


async def test_writes_on_a_standby_are_503_and_the_pool_is_renewed(
    service: QueueService, engine: AsyncEngine, database_url: str, postgres: Postgres
) -> None:
    await make_queue(service)
    database = make_url(database_url).database
    assert database is not None
    # From now on every connection the pool opens is read-only: a demoted primary's.
    set_read_only(postgres, database, True)
    await engine.dispose()
    for _ in range(3):
        with pytest.raises(UnavailableError):
            await service.enqueue("ns", "q", [NewMessage()])  # the driver path
        with pytest.raises(UnavailableError):
            await service.put_queue("ns", "other", QueueConfig())  # the SQLAlchemy path

    # The primary is writable again: the very next writes succeed, because the connections that
    # refused were discarded, with every connection pooled before them.
    set_read_only(postgres, database, False)
    [outcome] = await service.enqueue("ns", "q", [NewMessage()])
    assert outcome.created
    _, created = await service.put_queue("ns", "other", QueueConfig())
    assert created
