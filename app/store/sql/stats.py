"""The metrics' statements (:mod:`app.store.stats`): one that reads everything a scrape shows
about the database, and the ids of the queues that exist.

Every part of :data:`DATABASE_STATS` is an index probe or reads the live set only: counts per
queue use the partial indexes of the live states, the lags read the first entry of the
scheduler's partial indexes, and dead tuples come from ``pg_stat_user_tables``. Finished
messages (kept until their retention passes) and ``message_history`` are never counted here.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text

# One round trip, one statement. Each scalar subquery names the partial index it probes.
DATABASE_STATS: Final[TextClause] = text(
    """
    SELECT
        -- Live messages per queue and state: messages_pending_idx, messages_invisible_idx,
        -- messages_lease_idx (the partial indexes of the three live states).
        (SELECT coalesce(json_agg(json_build_object(
                    'id', q.id, 'namespace', q.namespace, 'queue', q.name,
                    'invisible', coalesce(i.n, 0), 'pending', coalesce(p.n, 0),
                    'running', coalesce(r.n, 0),
                    'oldest_pending_age', extract(epoch FROM now() - p.oldest))
                ORDER BY q.namespace, q.name), '[]'::json)
         FROM queues q
         LEFT JOIN (SELECT queue_id, count(*) AS n, min(visible_at) AS oldest FROM messages
                    WHERE state = 'pending' GROUP BY queue_id) p ON p.queue_id = q.id
         LEFT JOIN (SELECT queue_id, count(*) AS n FROM messages
                    WHERE state = 'invisible' GROUP BY queue_id) i ON i.queue_id = q.id
         LEFT JOIN (SELECT queue_id, count(*) AS n FROM messages
                    WHERE state = 'running' GROUP BY queue_id) r ON r.queue_id = q.id
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
