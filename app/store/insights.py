"""The SQL behind :mod:`app.core.insights`: bounded, index-backed reads for the dashboard.

Every series is limited to a window of the last ``:minutes`` minutes that ends with the
current minute of the database clock, and reaches its rows through an index:

- finished messages: ``messages_finished_idx (queue_id, finished_at)`` in the hot table, and
  ``message_history_queue_idx (namespace, queue, finished_at)`` with partition pruning;
- enqueued messages: the queue's newest rows through ``messages_queue_seq_idx (queue_id, seq)``,
  walked backwards from the newest one down to the first row enqueued before the window
  (``seq`` follows enqueue order), plus the ones already moved to history;
- running messages: the partial indexes over ``state = 'running'``;
- blocked exclusive values: the first ``:scan_limit`` pending messages in dequeue order.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Final

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.insights import OUTCOMES, MinuteCount, MinuteWait, Outcome, RunningValue
from app.core.models import Queue
from app.core.states import TERMINAL_STATES, State
from app.store.connections import available

# The terminal states as SQL literals, so the planner can match the partial index
# messages_finished_idx (a bound parameter would hide the predicate from it).
_TERMINAL_SQL = ", ".join(f"'{state}'" for state in sorted(TERMINAL_STATES))

_START = "(date_trunc('minute', now()) - make_interval(mins => :minutes - 1))"
# The window's first minute. Inline (not a CTE) so the planner sees a stable value: index range
# conditions and partition pruning of message_history both need it.


def _minute(column: str) -> str:
    """The minute of the window (0 = first) that ``column`` falls in."""
    return f"floor(extract(epoch FROM {column} - {_START}) / 60)::int"


THROUGHPUT: Final[TextClause] = text(
    f"""
    WITH q AS (
        SELECT * FROM unnest(CAST(:queue_ids AS bigint[]), CAST(:namespaces AS text[]),
                             CAST(:names AS text[])) AS q (id, namespace, name)
    ),
    events AS (
        -- enqueued, still in the hot table: the queue's rows after the newest one enqueued
        -- before the window (both walks use messages_queue_seq_idx)
        SELECT 'enqueued' AS outcome, e.at
        FROM q
        CROSS JOIN LATERAL (
            SELECT m.enqueued_at AS at FROM messages m
            WHERE m.queue_id = q.id AND m.enqueued_at >= {_START}
              AND m.seq > coalesce((
                SELECT o.seq FROM messages o
                WHERE o.queue_id = q.id AND o.enqueued_at < {_START}
                ORDER BY o.seq DESC LIMIT 1
              ), 0)
            OFFSET 0  -- one index range scan per queue, not a join over the whole table
        ) AS e
        UNION ALL
        -- finished, still in the hot table (messages_finished_idx)
        SELECT m.state::text, m.finished_at
        FROM messages m
        WHERE m.queue_id = ANY(CAST(:queue_ids AS bigint[]))
          AND m.state IN ({_TERMINAL_SQL}) AND m.finished_at >= {_START}
        UNION ALL
        -- finished and already moved to history (message_history_queue_idx, today's
        -- partitions): each counts as finished, and as enqueued when that was in the window
        SELECT x.outcome, x.at
        FROM q
        CROSS JOIN LATERAL (
            SELECT h.state, h.enqueued_at, h.finished_at FROM message_history h
            WHERE h.namespace = q.namespace AND h.queue = q.name AND h.queue_id = q.id
              AND h.finished_at >= {_START}
            OFFSET 0
        ) AS h
        CROSS JOIN LATERAL (
            VALUES (h.state::text, h.finished_at), ('enqueued', h.enqueued_at)
        ) AS x (outcome, at)
        WHERE x.at >= {_START}
    )
    SELECT outcome, {_minute("at")} AS minute, count(*) AS n, NULL::timestamptz AS start
    FROM events
    GROUP BY 1, 2
    UNION ALL
    SELECT 'start', NULL, NULL, {_START}
    """
)
"""Rows (outcome, minute, n, NULL), and one row ('start', NULL, NULL, start) that carries the
window's first minute."""

WAIT_TIMES: Final[TextClause] = text(
    f"""
    WITH leased AS (
        SELECT m.enqueued_at, m.first_leased_at FROM messages m
        WHERE m.queue_id = :queue_id AND m.state = 'running'
          AND m.first_leased_at >= {_START}
        UNION ALL
        SELECT m.enqueued_at, m.first_leased_at FROM messages m
        WHERE m.queue_id = :queue_id AND m.state IN ({_TERMINAL_SQL})
          AND m.finished_at >= {_START} AND m.first_leased_at >= {_START}
        UNION ALL
        SELECT h.enqueued_at, h.first_leased_at FROM message_history h
        WHERE h.namespace = :namespace AND h.queue = :queue AND h.queue_id = :queue_id
          AND h.finished_at >= {_START} AND h.first_leased_at >= {_START}
    ),
    per_minute AS (
        SELECT {_minute("first_leased_at")} AS minute, count(*) AS n,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY wait) AS p50,
               percentile_cont(0.95) WITHIN GROUP (ORDER BY wait) AS p95,
               max(wait) AS max
        FROM leased
        CROSS JOIN LATERAL (
            SELECT extract(epoch FROM first_leased_at - enqueued_at)::float8 AS wait
        ) AS w
        GROUP BY 1
    )
    SELECT {_START} AS start, p.minute, p.n, p.p50, p.p95, p.max
    FROM (SELECT 1) AS one LEFT JOIN per_minute p ON true
    """
)
"""Wait (enqueue to first lease) percentiles per minute of first lease, over the messages first
leased in the window that are running or finished (a message retried and waiting again is not
counted until it runs again). Always at least one row, which carries the window's start."""

RUNNING_EXCLUSIVE: Final[TextClause] = text(
    """
    WITH running AS (
        SELECT exclusive_value, id, attempts,
               extract(epoch FROM now() - leased_at)::float8 AS running_seconds,
               extract(epoch FROM lease_expires_at - now())::float8 AS lease_left_seconds
        FROM messages
        WHERE queue_id = :queue_id AND state = 'running' AND exclusive_value IS NOT NULL
    ),
    head AS MATERIALIZED (
        SELECT exclusive_value FROM messages
        WHERE queue_id = :queue_id AND state = 'pending'
        ORDER BY priority, seq
        LIMIT :scan_limit
    ),
    blocked AS (
        SELECT exclusive_value, count(*) AS n FROM head GROUP BY exclusive_value
    )
    SELECT r.exclusive_value, r.id, r.attempts, r.running_seconds, r.lease_left_seconds,
           coalesce(b.n, 0) AS blocked, (SELECT count(*) FROM head) AS scanned
    FROM running r LEFT JOIN blocked b USING (exclusive_value)
    ORDER BY r.running_seconds DESC, r.exclusive_value
    LIMIT :limit
    """
)

OLDEST_PENDING_AGES: Final[TextClause] = text(
    """
    SELECT q.id AS queue_id,
           (SELECT extract(epoch FROM now() - min(m.visible_at))::float8
            FROM messages m WHERE m.queue_id = q.id AND m.state = 'pending') AS age
    FROM unnest(CAST(:queue_ids AS bigint[])) AS q (id)
    """
)

DELETE_MESSAGES: Final[TextClause] = text(
    """
    DELETE FROM messages
    WHERE queue_id = :queue_id AND id = ANY(CAST(:ids AS text[]))
      AND state = ANY(CAST(:states AS message_state[]))
    RETURNING id
    """
)
"""Delete listed messages, guarded by state: only those still in ``:states``."""


class PostgresInsights:
    """Implements :class:`app.core.insights.InsightsStore` on PostgreSQL."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")

    def _connect(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection in autocommit; a lost or overloaded database is UnavailableError."""
        return available(self._engine)

    async def throughput(
        self, queues: Sequence[Queue], minutes: int
    ) -> tuple[datetime, list[MinuteCount]]:
        """Messages per minute by outcome over the window, for these queues together."""
        params = {
            "minutes": minutes,
            "queue_ids": [q.id for q in queues],
            "namespaces": [q.namespace for q in queues],
            "names": [q.name for q in queues],
        }
        async with self._connect() as conn:
            rows = (await conn.execute(THROUGHPUT, params)).all()
        start: datetime | None = None
        counts: list[MinuteCount] = []
        outcomes: dict[str, Outcome] = {outcome: outcome for outcome in OUTCOMES}
        for outcome, minute, n, window_start in rows:
            if outcome == "start":
                start = window_start
            elif outcome in outcomes:
                counts.append(MinuteCount(minute, outcomes[outcome], n))
        assert start is not None
        return start, counts

    async def wait_times(self, queue: Queue, minutes: int) -> tuple[datetime, list[MinuteWait]]:
        """Wait percentiles per minute of first lease over the window."""
        params = {
            "minutes": minutes,
            "queue_id": queue.id,
            "namespace": queue.namespace,
            "queue": queue.name,
        }
        async with self._connect() as conn:
            rows = (await conn.execute(WAIT_TIMES, params)).all()
        start: datetime = rows[0].start
        waits = [
            MinuteWait(row.minute, row.n, row.p50, row.p95, row.max)
            for row in rows
            if row.minute is not None
        ]
        return start, waits

    async def running_exclusive(
        self, queue: Queue, scan_limit: int, limit: int
    ) -> tuple[list[RunningValue], int]:
        """Running exclusive values with the head-of-queue messages blocked behind each."""
        params = {"queue_id": queue.id, "scan_limit": scan_limit, "limit": limit}
        async with self._connect() as conn:
            rows = (await conn.execute(RUNNING_EXCLUSIVE, params)).all()
        running = [
            RunningValue(
                value=row.exclusive_value,
                message_id=row.id,
                running_seconds=row.running_seconds or 0.0,
                lease_left_seconds=row.lease_left_seconds or 0.0,
                attempts=row.attempts,
                blocked=row.blocked,
            )
            for row in rows
        ]
        return running, rows[0].scanned if rows else 0

    async def oldest_pending_ages(self, queue_ids: Sequence[int]) -> dict[int, float]:
        """Seconds the longest-waiting pending message of each queue has been visible
        (queues without pending messages are absent)."""
        if not queue_ids:
            return {}
        async with self._connect() as conn:
            rows = await conn.execute(OLDEST_PENDING_AGES, {"queue_ids": list(queue_ids)})
            return {row.queue_id: row.age for row in rows if row.age is not None}

    async def delete_messages(
        self, queue: Queue, ids: Sequence[str], states: Sequence[State]
    ) -> list[str]:
        """Delete the listed messages that are in ``states``; returns the deleted ids."""
        params = {"queue_id": queue.id, "ids": list(ids), "states": [str(s) for s in states]}
        async with self._connect() as conn:
            return list((await conn.execute(DELETE_MESSAGES, params)).scalars())
