"""What the scheduler's leader does for retention besides archiving: history past
``SUNDIAL_HISTORY_RETENTION_DAYS`` dropped by SQL alone (:mod:`app.store.history_prune`, on a
session and a thread of its own, so the leader's ticks and archive never wait for it), and the
per-token rate limits' counts that mean nothing any more forgotten."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.store import history_prune
from app.store.history_lock import ExportBusyError
from app.store.sql import token_limits

log = logging.getLogger("sundial.history.prune")


async def prune_history(
    engine: AsyncEngine, retention_days: int
) -> history_prune.PruneResult | None:
    """Drop the history partitions of ``engine``'s database past ``retention_days`` (exported
    ones only, once the pipeline exports), in a thread; None when an export or another prune
    holds the history's lock (the next cleanup tries again)."""
    try:
        return await asyncio.to_thread(
            history_prune.prune_database, engine.url, retention_days, export="if_exporting"
        )
    except ExportBusyError:
        log.info("history prune skipped: an export or another prune is running")
        return None


async def forget_idle_token_rates(conn: AsyncConnection) -> int:
    """Delete the per-token rate counts whose allowance is whole again; how many went."""
    result = await conn.execute(token_limits.TOKEN_RATES_FORGET_IDLE)
    await conn.commit()
    return result.rowcount
