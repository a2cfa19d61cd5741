"""The database side of the model-based test (tests/model/test_stateful.py): a database with the
model's namespace and queues, an event loop of its own with an engine made inside it, and the
service on them; time passes by moving every stored timestamp back, and the scheduler's tick runs
on demand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.database import create_engine
from app.core.maintenance import TickResult
from app.core.models import QueueConfig
from app.core.service import QueueService
from app.core.validation import Limits
from app.store import maintenance
from app.store.postgres import PostgresStore
from tests.model import model as M

T = TypeVar("T")

NS = "model"
SIMPLE, EXCLUSIVE = "jobs", "builds"
KEY = "project"
QUEUE_SPECS = (
    M.QueueSpec(SIMPLE, lease_seconds=60, max_attempts=3),
    M.QueueSpec(
        EXCLUSIVE,
        exclusive_key=KEY,
        lease_seconds=120,
        delay_seconds=60,
        max_attempts=2,
        retry_delay_seconds=60,
        retry_delay_max_seconds=120,
    ),
)
QUEUE_NAMES = tuple(spec.name for spec in QUEUE_SPECS)


async def _make_engine(url: str) -> AsyncEngine:
    return create_engine(url, pool_size=2)


ROWS = sa.text(
    """
    SELECT q.name AS queue, m.id, m.seq, m.state::text AS state, m.priority, m.attempts,
           coalesce(m.max_attempts, q.max_attempts) AS max_attempts, m.exclusive_value,
           m.lease_id::text AS lease_id, m.last_error,
           extract(epoch FROM m.visible_at - now())::float AS visible_in,
           extract(epoch FROM m.lease_expires_at - now())::float AS lease_in,
           extract(epoch FROM m.expires_at - now())::float AS expires_in
    FROM messages m JOIN queues q ON q.id = m.queue_id
    ORDER BY m.seq
    """
)

# Time passes: every timestamp of every message moves into the past by :secs, in one statement.
SHIFT = sa.text(
    """
    UPDATE messages SET
        visible_at = visible_at - make_interval(secs => :secs),
        lease_expires_at = lease_expires_at - make_interval(secs => :secs),
        expires_at = expires_at - make_interval(secs => :secs),
        enqueued_at = enqueued_at - make_interval(secs => :secs),
        updated_at = updated_at - make_interval(secs => :secs),
        leased_at = leased_at - make_interval(secs => :secs),
        first_leased_at = first_leased_at - make_interval(secs => :secs),
        finished_at = finished_at - make_interval(secs => :secs)
    """
)


class Harness:
    """A database, an event loop of our own, an engine made inside it, and the service."""

    def __init__(self, url: str) -> None:
        self.runner = asyncio.Runner()
        self.engine = self.run(_make_engine(url))
        self.service = QueueService(PostgresStore(self.engine), limits=Limits())

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coro)

    def close(self) -> None:
        self.run(self.engine.dispose())
        self.runner.close()

    async def reset(self) -> None:
        """Empty the database and create the namespace and queues again."""
        async with self.engine.begin() as conn:
            await conn.execute(
                sa.text("TRUNCATE namespaces, tokens, queues, messages RESTART IDENTITY CASCADE")
            )
        await self.service.create_namespace(NS)
        for spec in QUEUE_SPECS:
            config = QueueConfig(
                kind="exclusive" if spec.exclusive_key else "simple",
                exclusive_key=spec.exclusive_key,
                lease_seconds=spec.lease_seconds,
                delay_seconds=spec.delay_seconds,
                max_attempts=spec.max_attempts,
                retry_delay_seconds=spec.retry_delay_seconds,
                retry_delay_max_seconds=spec.retry_delay_max_seconds,
            )
            await self.service.put_queue(NS, spec.name, config)

    async def shift(self, seconds: int) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(SHIFT, {"secs": seconds})

    async def tick(self) -> TickResult:
        async with self.engine.connect() as conn:
            return await maintenance.tick(conn)

    async def rows(self) -> list[dict[str, Any]]:
        async with self.engine.begin() as conn:
            return [dict(row) for row in (await conn.execute(ROWS)).mappings()]
