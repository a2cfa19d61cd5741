"""Messages as they are read: one message, the states of some, why a guard refused, a queue's
counts (kept by triggers, never counted row by row) and its oldest pending message, and the
completions already archived into history."""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text

# Columns returned wherever a full message is read. max_attempts and lease_seconds resolve a
# per-message override against the queue's current setting (:queue_max_attempts, :queue_lease).
MESSAGE_COLUMNS_SQL = """
    m.id, m.state::text AS state, m.priority, m.payload::text AS payload, m.metadata,
    m.exclusive_value, m.attempts,
    coalesce(m.max_attempts, CAST(:queue_max_attempts AS integer)) AS max_attempts,
    coalesce(m.lease_seconds, CAST(:queue_lease AS integer)) AS lease_seconds,
    m.lease_id::text AS lease_id, m.lease_expires_at, m.visible_at, m.expires_at,
    m.enqueued_at, m.updated_at, m.finished_at, m.last_error, m.leased_at
"""

MESSAGE_GET: Final[TextClause] = text(
    f"SELECT {MESSAGE_COLUMNS_SQL} FROM messages m WHERE m.queue_id = :queue_id AND m.id = :id"
)

# The current states of some ids (what an enqueue found taken after its snapshot).
MESSAGES_STATES: Final[TextClause] = text(
    "SELECT id, state::text AS state, seq FROM messages "
    "WHERE queue_id = :queue_id AND id = ANY(CAST(:ids AS text[]))"
)

# Why a guarded statement changed nothing: the caller reads the row's state and lease.
MESSAGE_GUARD_STATES: Final[TextClause] = text(
    """
    SELECT id, state::text AS state, lease_id::text AS lease_id,
           lease_expires_at > now() AS live
    FROM messages WHERE queue_id = :queue_id AND id = ANY(CAST(:ids AS text[]))
    """
)

# A repeated complete that the live table refused, because the scheduler has moved the message
# into history: the completed messages of these ids there whose lease is one of :lease_ids (the
# caller keeps the exact (id, lease) pairs it asked about), as complete answered them (updated_at
# is finished_at: nothing changes a completed message). One probe of message_history_message_idx
# per partition; run on the refusal path only, never by a complete that succeeds.
MESSAGES_ARCHIVED_COMPLETED: Final[TextClause] = text(
    """
    SELECT h.id, h.state::text AS state, h.priority, h.payload::text AS payload, h.metadata,
           h.exclusive_value, h.attempts, h.max_attempts, h.lease_seconds,
           h.lease_id::text AS lease_id, NULL::timestamptz AS lease_expires_at, h.visible_at,
           h.expires_at, h.enqueued_at, h.finished_at AS updated_at, h.finished_at, h.last_error
    FROM message_history h
    WHERE h.queue_id = :queue_id AND h.id = ANY(CAST(:ids AS text[]))
      AND h.state = 'completed' AND h.lease_id = ANY(CAST(:lease_ids AS uuid[]))
    """
)

# The messages of each queue and state, as one set of (queue_id, state, n) rows to add up: the
# counts as of the scheduler's last fold and the deltas appended since by the triggers on
# messages (migration 0010). Read in one statement, both come from one snapshot, so the sums are
# exact at that snapshot: a fold that commits meanwhile moves deltas into the counts all at once,
# and a change to messages commits together with its deltas. A filter on queue_id outside it is
# pushed into both branches (the primary key of queue_state_counts, the few hundred deltas not
# folded yet); never a message is read.
KEPT_COUNTS_SQL = """
    SELECT queue_id, state, n FROM queue_state_counts
    UNION ALL
    SELECT queue_id, state, delta FROM queue_state_count_deltas
"""

# Counts per state for the queues of a namespace (or one queue), from the kept counts.
MESSAGES_COUNT_BY_STATE: Final[TextClause] = text(
    f"""
    SELECT queue_id, state::text AS state, sum(n)::bigint AS n
    FROM ({KEPT_COUNTS_SQL}) AS counted
    WHERE queue_id = ANY(CAST(:queue_ids AS bigint[]))
    GROUP BY queue_id, state
    HAVING sum(n) <> 0
    """
)

# The first entry of the queue's range in messages_pending_visible_idx (queue_id, visible_at),
# whatever the backlog.
MESSAGES_OLDEST_PENDING_AGE: Final[TextClause] = text(
    """
    SELECT extract(epoch FROM now() - min(visible_at)) AS age
    FROM messages WHERE queue_id = :queue_id AND state = 'pending'
    """
)
