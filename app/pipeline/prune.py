"""Pruning of exported history: the daily partitions of ``message_history`` past
``SUNDIAL_PIPELINE_HISTORY_RETENTION_DAYS`` whose every row is behind the export watermark are
dropped, without ever making the scheduler wait.

The steps are the history prune's by SQL alone (:mod:`app.store.history_prune`, handed out by
:mod:`app.bootstrap.database`; its docstring tells how a partition leaves without blocking the
archive), under the rule ``required``: only what the lake has taken, and nothing before the
first export. The scheduler's own retention (``SUNDIAL_HISTORY_RETENTION_DAYS``) uses the same
steps; once the pipeline has exported anything it too drops only exported partitions
(docs/pipeline.md, "Pruning").

Plain psycopg (no Spark, no pyarrow).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from app.bootstrap.database import history_prune
from app.core.models import DEFAULT_POOL
from app.pipeline.database import APPLICATION_NAME

LOCK_TIMEOUT_SECONDS: Final = history_prune.LOCK_TIMEOUT_SECONDS
"""How long one step of a prune waits for a lock before the prune stops (``pending``)."""

Hook = history_prune.Hook
PruneResult = history_prune.PruneResult
PoolsPrune = history_prune.PoolsPrune


def prune_history(
    database_url: str,
    retention_days: int,
    *,
    pool: str = DEFAULT_POOL,
    lock_timeout_seconds: float = LOCK_TIMEOUT_SECONDS,
    hook: Hook | None = None,
) -> PruneResult:
    """Drop the history partitions of days older than ``retention_days`` of one database, the
    pool ``pool``'s, whose every row is behind its export watermark, without blocking the
    scheduler. Nothing is dropped before the first export."""
    pruned = prune_pools(
        {pool: database_url},
        retention_days,
        lock_timeout_seconds=lock_timeout_seconds,
        hook=hook,
    )
    return pruned.pools[pool]


def prune_pools(
    pools: Mapping[str, str],
    retention_days: int,
    *,
    lock_timeout_seconds: float = LOCK_TIMEOUT_SECONDS,
    hook: Hook | None = None,
) -> PoolsPrune:
    """:func:`prune_history` on every pool (``pools``: database URL by name), each against its
    own watermark, once every pool's lock is held.

    Raises:
        app.pipeline.lock.ExportBusyError: another export or prune runs on one of the pools
            (nothing is pruned).
        app.pipeline.lock.PoolMismatchError: a pool's database is registered as another pool.
    """
    return history_prune.prune_pools(
        pools,
        retention_days,
        export="required",
        lock_timeout_seconds=lock_timeout_seconds,
        application_name=APPLICATION_NAME,
        hook=hook,
    )
