"""Small helpers for tests that run against the real database.

Time never passes by sleeping: a lease expires, a delayed message falls due or a pending message
ages because a direct SQL UPDATE moves the row's timestamps into the past, which is deterministic.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import ConflictError
from app.core.models import FilterValue, NewMessage, Queue, QueueConfig
from app.core.service import QueueService
from app.core.states import Event
from app.store.sql.guards import from_states
from app.store.sql.scheduler import MESSAGES_RELEASE_IF_LEASE_EXPIRED

# Columns of ``messages`` whose timestamps the helpers may shift.
_TIMESTAMP_COLUMNS = frozenset(
    {
        "lease_expires_at",
        "visible_at",
        "expires_at",
        "enqueued_at",
        "updated_at",
        "finished_at",
        "leased_at",
        "first_leased_at",
    }
)


async def make_queue(
    service: QueueService, namespace: str = "ns", name: str = "q", **config: Any
) -> Queue:
    """Create ``namespace`` (if missing) and the queue ``name`` with ``config``; return it."""
    with contextlib.suppress(ConflictError):
        await service.create_namespace(namespace)
    queue, created = await service.put_queue(namespace, name, QueueConfig(**config))
    assert created, f"queue {namespace}/{name} already existed"
    return queue


async def execute(engine: AsyncEngine, sql: str | sa.TextClause, **params: Any) -> int:
    """Run one statement in its own committed transaction; return the rowcount."""
    stmt = sa.text(sql) if isinstance(sql, str) else sql
    async with engine.begin() as conn:
        result = await conn.execute(stmt, params)
        return result.rowcount


async def fetch(engine: AsyncEngine, sql: str | sa.TextClause, **params: Any) -> list[dict]:
    """Run a query in its own transaction; return its rows as dicts."""
    stmt = sa.text(sql) if isinstance(sql, str) else sql
    async with engine.begin() as conn:
        result = await conn.execute(stmt, params)
        return [dict(row) for row in result.mappings()]


async def scalar(engine: AsyncEngine, sql: str, **params: Any) -> Any:
    """The single value a query returns."""
    async with engine.begin() as conn:
        return (await conn.execute(sa.text(sql), params)).scalar()


def _where(queue: Queue | None, ids: Sequence[str] | None) -> tuple[str, dict[str, Any]]:
    clauses = ["true"]
    params: dict[str, Any] = {}
    if queue is not None:
        clauses.append("queue_id = :queue_id")
        params["queue_id"] = queue.id
    if ids is not None:
        clauses.append("id = ANY(CAST(:ids AS text[]))")
        params["ids"] = list(ids)
    return " AND ".join(clauses), params


async def shift_back(
    engine: AsyncEngine,
    column: str,
    seconds: float,
    *,
    queue: Queue | None = None,
    ids: Sequence[str] | None = None,
) -> int:
    """Move ``column`` of the chosen messages ``seconds`` into the past; returns rows touched."""
    assert column in _TIMESTAMP_COLUMNS, column
    where, params = _where(queue, ids)
    return await execute(
        engine,
        f"UPDATE messages SET {column} = {column} - make_interval(secs => :seconds) "
        f"WHERE {column} IS NOT NULL AND {where}",
        seconds=seconds,
        **params,
    )


async def expire_leases(
    engine: AsyncEngine, *, queue: Queue | None = None, ids: Sequence[str] | None = None
) -> int:
    """Make the running leases of the chosen messages expired (1 s ago); returns how many."""
    where, params = _where(queue, ids)
    return await execute(
        engine,
        "UPDATE messages SET lease_expires_at = now() - interval '1 second' "
        f"WHERE state = 'running' AND {where}",
        **params,
    )


async def make_due(
    engine: AsyncEngine, *, queue: Queue | None = None, ids: Sequence[str] | None = None
) -> int:
    """Make the chosen invisible messages due (``visible_at`` 1 s ago), without promoting them."""
    where, params = _where(queue, ids)
    return await execute(
        engine,
        "UPDATE messages SET visible_at = now() - interval '1 second' "
        f"WHERE state = 'invisible' AND {where}",
        **params,
    )


async def release_expired(engine: AsyncEngine, batch: int = 1000) -> int:
    """Run the scheduler's release of expired leases once; returns how many were released."""
    params = {"from_states": from_states(Event.LEASE_EXPIRE), "batch": batch}
    async with engine.begin() as conn:
        rows = (await conn.execute(MESSAGES_RELEASE_IF_LEASE_EXPIRED, params)).mappings().all()
    return sum(row["n"] for row in rows)


async def raw_row(engine: AsyncEngine, queue: Queue, message_id: str) -> dict[str, Any] | None:
    """The message's row in ``messages`` exactly as stored (state as text), or None."""
    rows = await fetch(
        engine,
        "SELECT *, state::text AS state, lease_id::text AS lease_id FROM messages "
        "WHERE queue_id = :queue_id AND id = :id",
        queue_id=queue.id,
        id=message_id,
    )
    return rows[0] if rows else None


async def states_of(engine: AsyncEngine, queue: Queue) -> dict[str, str]:
    """``{id: state}`` of every message of the queue."""
    rows = await fetch(
        engine,
        "SELECT id, state::text AS state FROM messages WHERE queue_id = :queue_id",
        queue_id=queue.id,
    )
    return {row["id"]: row["state"] for row in rows}


async def count_messages(engine: AsyncEngine, queue_id: int) -> int:
    """How many rows the queue has in ``messages`` (works after the queue is deleted)."""
    return await scalar(
        engine, "SELECT count(*) FROM messages WHERE queue_id = :queue_id", queue_id=queue_id
    )


def index_scans(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every index scan node of an EXPLAIN (FORMAT JSON) plan."""
    found = [plan] if "Index Name" in plan else []
    for child in plan.get("Plans", []):
        found.extend(index_scans(child))
    return found


def tagged(message_id: str, priority: int, **metadata: str) -> NewMessage:
    """A message of this ``priority`` with ``metadata`` (what the filter tests enqueue)."""
    return NewMessage(id=message_id, priority=priority, metadata=metadata)


async def leased_ids(
    service: QueueService, namespace: str, queue: str, count: int, **wanted: FilterValue
) -> list[str]:
    """The ids of the messages one dequeue of up to ``count`` leases, filtered by ``wanted``."""
    leased = await service.dequeue(namespace, queue, count=count, metadata=wanted)
    return [m.id for m in leased]
