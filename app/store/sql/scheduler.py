"""The scheduler's statements: the time-driven transitions (promotion of due messages, release
of expired leases, expiry), the fold of the count deltas into the counts, the move of finished
messages into ``message_history`` with the partitions it needs, and the hot table's statistics.
Each transition is batched (``:batch``) and uses ``SKIP LOCKED``, so that two schedulers at once
would waste work, never break a rule."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Final

from sqlalchemy import TextClause, text

from app.store.sql.listeners import NOTIFY_CHANNEL
from app.store.sql.retry import LEASE_EXPIRY, retry_or_dead_letter

# The queues of namespaces this database holds but does not serve (a move's copy coming in, or
# the one left behind: migration 0012). Every pass below leaves their messages alone: the pool
# that serves the namespace does that work, and the copy follows it. PostgreSQL runs the
# subquery once per statement (a hashed subplan over the few namespaces that are not active).
RESTING_QUEUES = """(
    SELECT q.id FROM queues q JOIN namespaces n ON n.name = q.namespace
    WHERE n.state <> 'active')"""

# invisible -> pending for messages whose visible_at has passed (messages_invisible_idx), and a
# NOTIFY per queue so long-polling consumers wake.
MESSAGES_PROMOTE_IF_DUE: Final[TextClause] = text(
    f"""
    WITH due AS (
        SELECT queue_id, id FROM messages
        WHERE state = 'invisible' AND visible_at <= now()
          AND queue_id NOT IN {RESTING_QUEUES}
        ORDER BY visible_at
        LIMIT :batch
        FOR UPDATE SKIP LOCKED
    ),
    promoted AS (
        UPDATE messages m SET state = 'pending', updated_at = now()
        FROM due
        WHERE m.queue_id = due.queue_id AND m.id = due.id
          AND m.state = ANY(CAST(:from_states AS message_state[]))
        RETURNING m.queue_id
    )
    SELECT queue_id, count(*) AS n, pg_notify('sundial_ready', CAST(queue_id AS text))
    FROM promoted GROUP BY queue_id
    """
)

# running -> pending/invisible/errored for leases past lease_expires_at (messages_lease_idx),
# with the same retry rule as MESSAGE_FAIL_IF_LEASED, from each queue's configuration.
MESSAGES_RELEASE_IF_LEASE_EXPIRED: Final[TextClause] = text(
    f"""
    WITH expired AS (
        SELECT queue_id, id FROM messages
        WHERE state = 'running' AND lease_expires_at <= now()
          AND queue_id NOT IN {RESTING_QUEUES}
        ORDER BY lease_expires_at
        LIMIT :batch
        FOR UPDATE SKIP LOCKED
    ),
    released AS (
        UPDATE messages m {retry_or_dead_letter(**LEASE_EXPIRY, error="'lease expired'")}
        FROM expired, queues q
        WHERE m.queue_id = expired.queue_id AND m.id = expired.id AND q.id = m.queue_id
          AND m.state = ANY(CAST(:from_states AS message_state[]))
          AND m.lease_expires_at <= now()
        RETURNING m.queue_id, m.state
    )
    SELECT queue_id, count(*) AS n, pg_notify('sundial_ready', CAST(queue_id AS text))
    FROM released GROUP BY queue_id
    """
)

# live -> canceled for messages whose expires_at has passed (messages_expires_idx). A running
# message of an exclusive queue (one with an exclusive value) frees its value as it expires:
# like every other path that frees one, that wakes the queue's long-polling consumers, and only
# if some server listens for the queue (ADR 0007). ``doomed`` reads the state under the row
# lock, so it is the state the UPDATE changes.
MESSAGES_CANCEL_IF_EXPIRED: Final[TextClause] = text(
    f"""
    WITH doomed AS (
        SELECT queue_id, id, state = 'running' AND exclusive_value IS NOT NULL AS frees_value
        FROM messages
        WHERE expires_at <= now() AND state IN ('invisible', 'pending', 'running')
          AND queue_id NOT IN {RESTING_QUEUES}
        ORDER BY expires_at
        LIMIT :batch
        FOR UPDATE SKIP LOCKED
    ),
    expired AS (
        UPDATE messages m
        SET state = 'canceled', finished_at = now(), lease_expires_at = NULL,
            last_error = 'expired', updated_at = now()
        FROM doomed
        WHERE m.queue_id = doomed.queue_id AND m.id = doomed.id
          AND m.state = ANY(CAST(:from_states AS message_state[]))
        RETURNING m.queue_id, doomed.frees_value
    )
    SELECT queue_id, count(*) AS n,
           CASE WHEN bool_or(frees_value)
                     AND EXISTS (SELECT 1 FROM queue_listeners l
                                 WHERE l.queue_id = expired.queue_id)
                THEN pg_notify('{NOTIFY_CHANNEL}', CAST(queue_id AS text)) END AS woken
    FROM expired GROUP BY queue_id
    """
)

# errored -> canceled (``last_error = 'dead-lettered to <queue>'``) here, and a copy pending in
# the queue's dead_letter_queue (a queue of the same namespace), in one statement: the dead letter
# is live in exactly one queue at every moment. The one left behind is finished, so it leaves for
# history with the queue's retention, and until then its id stays taken in its queue: a producer
# that sends it again (an SQS deduplication id) finds it, as it would have found the errored one.
# The copy keeps the id, priority, payload, metadata, enqueue time and expiry; attempts start
# again under the target's settings, and its exclusive and filter values are read with the
# target's keys. ``dead`` takes at most one message per (target, id), and only what the INSERT
# placed is finished here: a dead letter whose id the target holds already stays errored in its
# queue (its id is taken there); it is left out of the batch, where enough of them would hold back
# every dead letter behind them. So does one without a value for an exclusive target's key
# (enqueue would refuse it there). A queue whose dead_letter_queue names no queue keeps its dead
# letters; a target paused for enqueue still receives them (the pause stops producers, not the
# scheduler). They arrive in the order they died (their new seq follows finished_at), so a group
# of an exclusive target keeps its order. The LATERAL probe walks messages_finished_idx per source
# queue.
MESSAGES_REDRIVE_DEAD_LETTERS: Final[TextClause] = text(
    f"""
    WITH routes AS (
        SELECT s.id AS source_id, t.id AS target_id, t.name AS target_name, t.exclusive_key,
               t.filter_key, t.filter_key_2
        FROM queues s
        JOIN queues t ON t.namespace = s.namespace AND t.name = s.dead_letter_queue
        WHERE s.dead_letter_queue IS NOT NULL AND s.id NOT IN {RESTING_QUEUES}
    ),
    dead AS (
        SELECT DISTINCT ON (r.target_id, d.id)
               d.queue_id, d.id, r.target_id, r.target_name, r.exclusive_key, r.filter_key,
               r.filter_key_2
        FROM routes r
        CROSS JOIN LATERAL (
            SELECT m.queue_id, m.id FROM messages m
            WHERE m.queue_id = r.source_id AND m.state = 'errored'
              AND NOT EXISTS (SELECT 1 FROM messages x
                              WHERE x.queue_id = r.target_id AND x.id = m.id)
              AND (r.exclusive_key IS NULL
                   OR coalesce(m.metadata ->> r.exclusive_key, '') <> '')
            ORDER BY m.finished_at
            LIMIT :batch
            FOR UPDATE SKIP LOCKED
        ) d
        ORDER BY r.target_id, d.id
    ),
    arrived AS (
        INSERT INTO messages (queue_id, id, priority, state, payload, metadata, exclusive_value,
                              filter_value, filter_value_2, attempts, lease_seconds, visible_at,
                              expires_at, enqueued_at, updated_at, last_error)
        SELECT dead.target_id, m.id, m.priority, 'pending', m.payload, m.metadata,
               m.metadata ->> dead.exclusive_key, m.metadata ->> dead.filter_key,
               m.metadata ->> dead.filter_key_2, 0,
               m.lease_seconds, now(), m.expires_at, m.enqueued_at, now(), m.last_error
        FROM dead JOIN messages m ON m.queue_id = dead.queue_id AND m.id = dead.id
        WHERE m.state = ANY(CAST(:from_states AS message_state[]))
        ORDER BY m.finished_at, m.seq
        ON CONFLICT (queue_id, id) DO NOTHING
        RETURNING queue_id, id
    ),
    departed AS (
        UPDATE messages m
        SET state = 'canceled', finished_at = now(), updated_at = now(),
            last_error = 'dead-lettered to ' || dead.target_name
        FROM dead, arrived
        WHERE m.queue_id = dead.queue_id AND m.id = dead.id
          AND arrived.queue_id = dead.target_id AND arrived.id = dead.id
          AND m.state = ANY(CAST(:from_states AS message_state[]))
        RETURNING m.queue_id
    )
    SELECT queue_id, count(*) AS n, pg_notify('{NOTIFY_CHANNEL}', CAST(queue_id AS text))
    FROM arrived GROUP BY queue_id
    """
)

# The count deltas that the triggers on messages appended (migration 0010) move into
# queue_state_counts, in one statement, so a read (which adds both tables up at one snapshot)
# sees them in one place or the other, never both or neither. Deltas committed after this
# statement's snapshot stay for the next fold. A count the deltas bring to zero is deleted
# instead of updated (``emptied``), so a deleted queue's counts, which its messages' deletion
# brought to zero, leave no row behind. Two folds at once stay exact: a delta row goes to the
# one that deletes it, and the row lock on a count makes the other re-read it.
QUEUE_STATE_COUNTS_FOLD: Final[TextClause] = text(
    """
    WITH moved AS (
        DELETE FROM queue_state_count_deltas RETURNING queue_id, state, delta
    ),
    net AS (
        SELECT queue_id, state, sum(delta) AS n FROM moved
        GROUP BY queue_id, state HAVING sum(delta) <> 0
    ),
    emptied AS (
        DELETE FROM queue_state_counts c USING net
        WHERE c.queue_id = net.queue_id AND c.state = net.state AND c.n + net.n = 0
        RETURNING c.queue_id, c.state
    ),
    kept AS (
        INSERT INTO queue_state_counts AS c (queue_id, state, n)
        SELECT queue_id, state, n FROM net
        WHERE NOT EXISTS (SELECT 1 FROM emptied e
                          WHERE e.queue_id = net.queue_id AND e.state = net.state)
        ON CONFLICT (queue_id, state) DO UPDATE SET n = c.n + excluded.n
    )
    SELECT count(*) AS folded FROM moved
    """
)

# Finished messages past their queue's retention leave the hot table for message_history, in one
# statement (the DELETE and the INSERT commit together, so nothing is lost or kept twice).
# The LATERAL probe walks messages_finished_idx per queue.
MESSAGES_ARCHIVE_PAST_RETENTION: Final[TextClause] = text(
    f"""
    WITH doomed AS (
        SELECT d.queue_id, d.id
        FROM queues q
        CROSS JOIN LATERAL (
            SELECT m.queue_id, m.id FROM messages m
            WHERE m.queue_id = q.id AND m.state IN ('completed', 'canceled', 'errored')
              AND m.finished_at < now() - make_interval(secs => q.retention_seconds)
            ORDER BY m.finished_at
            LIMIT :batch
            FOR UPDATE SKIP LOCKED
        ) AS d
        WHERE q.id NOT IN {RESTING_QUEUES}
        LIMIT :batch
    ),
    moved AS (
        DELETE FROM messages m USING doomed
        WHERE m.queue_id = doomed.queue_id AND m.id = doomed.id
          AND m.state IN ('completed', 'canceled', 'errored')
        RETURNING m.*
    )
    INSERT INTO message_history (namespace, queue, queue_id, id, seq, priority, state, payload,
                                 metadata, exclusive_value, attempts, max_attempts, enqueued_at,
                                 first_leased_at, leased_at, finished_at, last_error,
                                 lease_id, lease_seconds, visible_at, expires_at)
    SELECT q.namespace, q.name, moved.queue_id, moved.id, moved.seq, moved.priority, moved.state,
           moved.payload, moved.metadata, moved.exclusive_value, moved.attempts,
           coalesce(moved.max_attempts, q.max_attempts), moved.enqueued_at,
           moved.first_leased_at, moved.leased_at, moved.finished_at, moved.last_error,
           moved.lease_id, coalesce(moved.lease_seconds, q.lease_seconds), moved.visible_at,
           moved.expires_at
    FROM moved JOIN queues q ON q.id = moved.queue_id
    """
)

# The days of finished_at that the next archive batch may touch, so their partitions exist.
MESSAGES_ARCHIVE_DAYS: Final[TextClause] = text(
    f"""
    SELECT DISTINCT date_trunc('day', m.finished_at AT TIME ZONE 'UTC')::date AS day
    FROM queues q
    CROSS JOIN LATERAL (
        SELECT m.finished_at FROM messages m
        WHERE m.queue_id = q.id AND m.state IN ('completed', 'canceled', 'errored')
          AND m.finished_at < now() - make_interval(secs => q.retention_seconds)
        ORDER BY m.finished_at
        LIMIT :batch
    ) AS m
    WHERE q.id NOT IN {RESTING_QUEUES}
    """
)

# The history partitions that take rows: not one that a prune is detaching (its name stays
# taken until the prune drops it or attaches it back).
HISTORY_PARTITIONS: Final[TextClause] = text(
    """
    SELECT c.relname
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    JOIN pg_class p ON p.oid = i.inhparent
    WHERE p.relname = 'message_history' AND NOT i.inhdetachpending
    """
)


# A history partition is made as a table of its own, then attached (app/store/maintenance.py,
# ensure_history_partitions says why). These are DDL, so the name and the bounds are written
# into the text: callers pass a name made from a date, never input.
def history_partition_lock_timeout(milliseconds: int) -> TextClause:
    """How long the rest of the transaction may wait for a lock."""
    return text(f"SET LOCAL lock_timeout = '{milliseconds}ms'")


def history_partition_create(name: str) -> TextClause:
    """A table shaped like ``message_history``, to be attached as its partition ``name``."""
    return text(f"CREATE TABLE {name} (LIKE message_history INCLUDING DEFAULTS)")


def history_partition_attach(name: str, day: date) -> TextClause:
    """Attach the table ``name`` to ``message_history`` as the partition of ``day`` (UTC)."""
    return text(
        f"ALTER TABLE message_history ATTACH PARTITION {name} "
        f"FOR VALUES FROM ('{day.isoformat()}T00:00:00Z') "
        f"TO ('{(day + timedelta(days=1)).isoformat()}T00:00:00Z')"
    )


DATABASE_TODAY: Final[TextClause] = text("SELECT (now() AT TIME ZONE 'UTC')::date AS today")

# The hot table's statistics are stale when more rows changed since its last ANALYZE than 1,000
# plus a tenth of its live rows (autovacuum's own rule with a smaller scale factor).
MESSAGES_STATISTICS_STALE: Final[TextClause] = text(
    """
    SELECT n_mod_since_analyze > 1000 + 0.1 * n_live_tup
    FROM pg_stat_user_tables WHERE relid = 'messages'::regclass
    """
)
MESSAGES_ANALYZE: Final[TextClause] = text("ANALYZE (SKIP_LOCKED) messages")
