"""The database side of the Prometheus metrics: runs the statements of
:mod:`app.store.sql.stats` (app/observability/database.py caches what they read).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.readings import DatabaseStats, QueueDepth, TableTuples
from app.store.sql.stats import DATABASE_STATS, QUEUES_LIST_IDS

LEADER_FRESH_SECONDS = 5.0
"""A scheduler node counts as leading while its heartbeat (every second) is this recent."""


def _queue(row: dict[str, Any]) -> QueueDepth:
    age = row["oldest_pending_age"]
    return QueueDepth(
        namespace=row["namespace"],
        queue=row["queue"],
        invisible=int(row["invisible"]),
        pending=int(row["pending"]),
        running=int(row["running"]),
        errored=int(row["errored"]),
        oldest_pending_age=None if age is None else float(age),
        queue_id=int(row["id"]),
    )


async def read_database_stats(engine: AsyncEngine) -> DatabaseStats:
    """Run :data:`~app.store.sql.stats.DATABASE_STATS` once."""
    async with engine.connect() as conn:
        row = (await conn.execute(DATABASE_STATS, {"fresh_seconds": LEADER_FRESH_SECONDS})).one()
        await conn.rollback()
    return DatabaseStats(
        queues=[_queue(q) for q in row.queues],
        promotion_lag=float(row.promotion_lag),
        lease_release_lag=float(row.lease_release_lag),
        expiry_lag=float(row.expiry_lag),
        leaders=int(row.leaders),
        tables=[TableTuples(t["table"], int(t["dead"]), int(t["live"])) for t in row.tables],
    )


async def read_live_queue_ids(engine: AsyncEngine) -> frozenset[int]:
    """Run :data:`~app.store.sql.stats.QUEUES_LIST_IDS` once."""
    async with engine.connect() as conn:
        ids = (await conn.execute(QUEUES_LIST_IDS)).scalars().all()
        await conn.rollback()
    return frozenset(ids)
