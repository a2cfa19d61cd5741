"""The scheduler's leadership: one session-level advisory lock, held by the active scheduler's
connection, and the heartbeats of the server processes that contend for it
(``scheduler_nodes``). The lock dies with the connection, so a crashed leader is replaced at the
next poll."""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text

LEADER_TRY_LOCK: Final[TextClause] = text("SELECT pg_try_advisory_lock(:key) AS acquired")
LEADER_UNLOCK: Final[TextClause] = text("SELECT pg_advisory_unlock(:key)")

# Fence a leader that has stopped working. Its session still holds the leader lock (its process
# is frozen, or it is cut off from the database and the server side of its connection stays
# open, which TCP alone may not notice for hours), but a working leader runs a statement every
# tick, so a session idle for longer than :stale_seconds is not leading anything. Terminating it
# releases the lock. A bigint advisory key shows in pg_locks as classid (high 32 bits), objid
# (low 32 bits) and objsubid 1. A session in the middle of a statement ('active') is left
# alone, however long the statement runs. pg_terminate_backend waits up to :wait_ms for the
# session to end, so the caller can take the lock at once.
LEADER_FENCE: Final[TextClause] = text(
    """
    SELECT activity.pid, pg_terminate_backend(activity.pid, :wait_ms) AS terminated
    FROM pg_locks AS lock
    JOIN pg_stat_activity AS activity ON activity.pid = lock.pid
    WHERE lock.locktype = 'advisory' AND lock.granted
      AND lock.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND lock.classid = :key_high AND lock.objid = :key_low AND lock.objsubid = 1
      AND activity.pid <> pg_backend_pid()
      AND activity.state IN ('idle', 'idle in transaction', 'idle in transaction (aborted)')
      AND activity.state_change < now() - make_interval(secs => :stale_seconds)
    """
)

SCHEDULER_NODE_HEARTBEAT: Final[TextClause] = text(
    """
    INSERT INTO scheduler_nodes (node_id, is_leader, heartbeat_at, last_tick_at)
    VALUES (:node_id, :is_leader, now(), CASE WHEN :is_leader THEN now() END)
    ON CONFLICT (node_id) DO UPDATE
    SET is_leader = EXCLUDED.is_leader, heartbeat_at = now(),
        last_tick_at = coalesce(EXCLUDED.last_tick_at, scheduler_nodes.last_tick_at)
    """
)
