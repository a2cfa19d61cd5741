
WITH candidate AS MATERIALIZED (
    SELECT * FROM (
        SELECT id, visible_at, priority, seq, exclusive_value FROM messages c
        WHERE queue_id = %(queue_id)s AND state = 'pending' AND filter_value_2 = ANY(CAST(%(filter_values)s AS text[]))
          AND (expires_at IS NULL OR expires_at > now())
          AND NOT EXISTS (
              SELECT 1 FROM messages r
              WHERE r.queue_id = %(queue_id)s AND r.state = 'running'
                AND r.exclusive_value = c.exclusive_value)
        ORDER BY visible_at, priority, seq
        LIMIT 400
    ) AS ready
    UNION ALL
    SELECT * FROM (
        SELECT id, visible_at, priority, seq, exclusive_value FROM messages c
        WHERE state = 'invisible' AND visible_at <= now() AND queue_id = %(queue_id)s AND filter_value_2 = ANY(CAST(%(filter_values)s AS text[]))
          AND (expires_at IS NULL OR expires_at > now())
          AND NOT EXISTS (
              SELECT 1 FROM messages r
              WHERE r.queue_id = %(queue_id)s AND r.state = 'running'
                AND r.exclusive_value = c.exclusive_value)
        ORDER BY visible_at, priority, seq
        LIMIT 400
    ) AS due
),
one_per_value AS (
    SELECT DISTINCT ON (exclusive_value) id, visible_at, priority, seq, exclusive_value FROM candidate
    ORDER BY exclusive_value, visible_at, priority, seq
),
-- MATERIALIZED keeps the locks below out of this sort: PostgreSQL would otherwise push the
-- advisory lock into it and try it on every value before sorting.
best_first AS MATERIALIZED (
    SELECT id, visible_at, priority, seq, exclusive_value FROM one_per_value ORDER BY visible_at, priority, seq
),
picked AS (
    -- A nested loop over best_first, in its order, that the LIMIT stops at `count` rows: each
    -- value's advisory lock is tried, then its message locked, only while more are wanted.
    SELECT best_first.id, (SELECT count(*) FROM candidate) AS scanned
    FROM best_first
    CROSS JOIN LATERAL (
        SELECT 1 FROM messages m
        WHERE m.queue_id = %(queue_id)s AND m.id = best_first.id
          AND (m.state = 'pending' OR (m.state = 'invisible' AND m.visible_at <= now()))
          AND (m.expires_at IS NULL OR m.expires_at > now())
        FOR UPDATE SKIP LOCKED
    ) AS still_ready
    WHERE pg_try_advisory_xact_lock(
        hashtextextended(CAST(%(queue_id)s AS text) || '/' || best_first.exclusive_value, 0))
    LIMIT 100
)

UPDATE messages m
SET state = 'running',
    attempts = m.attempts + 1,
    lease_id = gen_random_uuid(),
    lease_expires_at = now() + make_interval(
        secs => coalesce(CAST(%(lease_override)s AS integer), m.lease_seconds,
                         CAST(%(queue_lease)s AS integer))),
    leased_at = now(),
    first_leased_at = coalesce(m.first_leased_at, now()),
    updated_at = now()
FROM picked
WHERE m.queue_id = %(queue_id)s AND m.id = picked.id AND sundial_catalogue_is(CAST(%(catalogue_version)s AS bigint), CAST(%(valid_until)s AS timestamptz))
RETURNING m.id, m.lease_id::text AS lease_id, m.lease_expires_at, m.attempts, m.priority,
          m.seq, m.payload::text AS payload, m.metadata, m.enqueued_at, m.first_leased_at,
          picked.scanned, m.leased_at, m.visible_at, m.expires_at, m.max_attempts
