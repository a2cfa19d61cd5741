
WITH candidate AS MATERIALIZED (
    SELECT * FROM (
        SELECT id, priority, seq FROM messages
        WHERE queue_id = %(queue_id)s AND state = 'pending' AND filter_value_2 = CAST(%(filter_value)s AS text)
          AND (expires_at IS NULL OR expires_at > now())
        ORDER BY priority, seq
        LIMIT 100
        FOR UPDATE SKIP LOCKED
    ) AS ready
    UNION ALL
    SELECT * FROM (
        SELECT id, priority, seq FROM messages
        WHERE state = 'invisible' AND visible_at <= now() AND queue_id = %(queue_id)s AND filter_value_2 = CAST(%(filter_value)s AS text)
          AND (expires_at IS NULL OR expires_at > now())
        ORDER BY priority, seq
        LIMIT 100
        FOR UPDATE SKIP LOCKED
    ) AS due
),
picked AS (
    SELECT id, 0 AS scanned FROM candidate ORDER BY priority, seq LIMIT 100
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
