"""The metrics' statements (:mod:`app.store.stats`): one that reads everything a scrape shows
about the database, and the ids of the queues that exist.

Every part of :data:`DATABASE_STATS` is an index probe or reads a small table, never a scan
that grows with the backlog: counts per queue come from ``queue_state_counts`` and the deltas
not folded yet (kept by triggers, migration 0010), the oldest pending message of each queue is
the first entry of its range in ``messages_pending_visible_idx``, the lags read the first entry
of the scheduler's partial indexes, and dead tuples come from ``pg_stat_user_tables``. Finished
messages (kept until their retention passes) and ``message_history`` are never read here.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text

from app.store.sql.reads import KEPT_COUNTS_SQL

# One round trip, one statement. Each scalar subquery names the partial index it probes.
DATABASE_STATS: Final[TextClause] = text(
    f"""
    SELECT
        -- Live messages per queue and state, and its dead letters (errored, kept until its
        -- retention moves them to history): the kept counts plus the deltas not folded yet,
        -- read at this statement's snapshot (app/store/sql/reads.py, KEPT_COUNTS_SQL);
        -- the oldest pending message of each queue: one probe of messages_pending_visible_idx.
        (SELECT coalesce(json_agg(json_build_object(
                    'id', q.id, 'namespace', q.namespace, 'queue', q.name,
                    'invisible', coalesce(c.invisible, 0), 'pending', coalesce(c.pending, 0),
                    'running', coalesce(c.running, 0), 'errored', coalesce(c.errored, 0),
                    'oldest_pending_age', extract(epoch FROM now() - p.oldest))
                ORDER BY q.namespace, q.name), '[]'::json)
         FROM queues q
         LEFT JOIN (SELECT queue_id,
                           sum(n) FILTER (WHERE state = 'invisible') AS invisible,
                           sum(n) FILTER (WHERE state = 'pending') AS pending,
                           sum(n) FILTER (WHERE state = 'running') AS running,
                           sum(n) FILTER (WHERE state = 'errored') AS errored
                    FROM ({KEPT_COUNTS_SQL}) AS counted
                    GROUP BY queue_id) c ON c.queue_id = q.id
         LEFT JOIN LATERAL (SELECT min(m.visible_at) AS oldest FROM messages m
                            WHERE m.queue_id = q.id AND m.state = 'pending') p ON true
        ) AS queues,
        -- How overdue the scheduler's most overdue work is (0 when nothing is due):
        -- promotion (messages_invisible_idx), lease release (messages_lease_idx), expiry
        -- (messages_expires_idx). Each is the first entry of its index.
        (SELECT coalesce(extract(epoch FROM now() - min(visible_at)), 0) FROM messages
         WHERE state = 'invisible' AND visible_at <= now()) AS promotion_lag,
        (SELECT coalesce(extract(epoch FROM now() - min(lease_expires_at)), 0) FROM messages
         WHERE state = 'running' AND lease_expires_at <= now()) AS lease_release_lag,
        (SELECT coalesce(extract(epoch FROM now() - min(expires_at)), 0) FROM messages
         WHERE expires_at IS NOT NULL AND state IN ('invisible', 'pending', 'running')
           AND expires_at <= now()) AS expiry_lag,
        (SELECT count(*) FROM scheduler_nodes
         WHERE is_leader AND heartbeat_at > now() - make_interval(secs => :fresh_seconds)
        ) AS leaders,
        -- Dead and live tuples per table; the daily history partitions are summed as one.
        (SELECT coalesce(json_agg(json_build_object(
                    'table', t.name, 'dead', t.dead, 'live', t.live) ORDER BY t.name), '[]'::json)
         FROM (SELECT CASE WHEN relname LIKE 'message\\_history\\_%' THEN 'message_history'
                           ELSE relname END AS name,
                      sum(n_dead_tup) AS dead, sum(n_live_tup) AS live
               FROM pg_stat_user_tables WHERE schemaname = 'public'
               GROUP BY 1) t
        ) AS tables
    """
)

QUEUES_LIST_IDS: Final[TextClause] = text("SELECT id FROM queues")
"""The ids of the queues that exist now (an index-only scan of the primary key): what a scrape
checks every per-queue series against, so a deleted queue's series are gone at once."""
