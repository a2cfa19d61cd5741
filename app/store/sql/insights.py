"""The dashboard's reads (:mod:`app.store.insights`): bounded, index-backed series over
``messages`` and ``message_history``, and the dashboard's guarded delete.

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

from typing import Final

from sqlalchemy import TextClause, text

from app.core.states import TERMINAL_STATES

# The terminal states as SQL literals, so the planner can match the partial index
# messages_finished_idx (a bound parameter would hide the predicate from it).
_TERMINAL_SQL = ", ".join(f"'{state}'" for state in sorted(TERMINAL_STATES))

_START = "(date_trunc('minute', now()) - make_interval(mins => :minutes - 1))"
# The window's first minute. Inline (not a CTE) so the planner sees a stable value: index range
# conditions and partition pruning of message_history both need it.


def _minute(column: str) -> str:
    """The minute of the window (0 = first) that ``column`` falls in."""
    return f"floor(extract(epoch FROM {column} - {_START}) / 60)::int"


MESSAGES_THROUGHPUT_PER_MINUTE: Final[TextClause] = text(
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

MESSAGES_WAIT_TIMES_PER_MINUTE: Final[TextClause] = text(
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

MESSAGES_RUNNING_EXCLUSIVE_WITH_BLOCKED: Final[TextClause] = text(
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
"""The running messages of exclusive values (longest running first, at most ``:limit``), each
with how many of the first ``:scan_limit`` pending messages wait for its value (``blocked``) and,
on every row, how many pending messages were looked at (``scanned``)."""

MESSAGES_OLDEST_PENDING_AGE_PER_QUEUE: Final[TextClause] = text(
    """
    SELECT q.id AS queue_id,
           (SELECT extract(epoch FROM now() - min(m.visible_at))::float8
            FROM messages m WHERE m.queue_id = q.id AND m.state = 'pending') AS age
    FROM unnest(CAST(:queue_ids AS bigint[])) AS q (id)
    """
)
"""Seconds the longest-waiting pending message of each queue in ``:queue_ids`` has been visible
(NULL for a queue with no pending message)."""

NAMESPACES_LIST: Final[TextClause] = text(
    "SELECT name, description, created_at FROM namespaces ORDER BY name"
)
"""Every namespace this database holds, by name (the overview reads each pool's on its own)."""
