-- Raw SQL limit of Sundial's worker cycle in one transaction: the batch acknowledgement
-- (MESSAGES_COMPLETE_IF_LEASED) of the message the previous transaction claimed, bound as the
-- JSON document the server binds, then the claim (messages_claim(count=@BATCH@), a simple
-- queue, no metadata filter), as `POST …/ack` with `dequeue` runs them on the server. pgbench
-- keeps each client's :items from one transaction to the next (the first completes nothing:
-- the harness defines items as '[]'). Run in prepared mode against a prefilled
-- bench_raw_messages; the harness writes the batch size where @BATCH@ stands.
BEGIN;
WITH changed AS (
    UPDATE bench_raw_messages m
    SET state = 'completed', finished_at = now(), lease_expires_at = NULL, updated_at = now()
    FROM json_to_recordset(CAST(:items AS json)) AS a(id text, lease_id uuid)
    WHERE m.queue_id = 1 AND m.id = a.id
      AND m.state = ANY(CAST('{running}' AS message_state[]))
      AND m.lease_id = a.lease_id AND m.lease_expires_at > now()
    RETURNING m.id, m.lease_id::text AS lease_id, m.state::text AS state
),
wake AS (
    SELECT pg_notify('bench_raw_ready', '1')
    WHERE EXISTS (SELECT 1 FROM changed WHERE changed.state = 'pending' OR false)
)
SELECT changed.* FROM changed CROSS JOIN (SELECT count(*) FROM wake) AS woken;
WITH candidate AS MATERIALIZED (
    SELECT * FROM (
        SELECT id, priority, seq FROM bench_raw_messages
        WHERE queue_id = 1 AND state = 'pending'
          AND (expires_at IS NULL OR expires_at > now())
        ORDER BY priority, seq
        LIMIT @BATCH@
        FOR UPDATE SKIP LOCKED
    ) AS ready
    UNION ALL
    SELECT * FROM (
        SELECT id, priority, seq FROM bench_raw_messages
        WHERE state = 'invisible' AND visible_at <= now() AND queue_id = 1
          AND (expires_at IS NULL OR expires_at > now())
        ORDER BY priority, seq
        LIMIT @BATCH@
        FOR UPDATE SKIP LOCKED
    ) AS due
),
picked AS (
    SELECT id FROM candidate ORDER BY priority, seq LIMIT @BATCH@
),
granted AS (
    UPDATE bench_raw_messages m
    SET state = 'running',
        attempts = m.attempts + 1,
        lease_id = gen_random_uuid(),
        lease_expires_at = now() + make_interval(
            secs => coalesce(CAST(NULL AS integer), m.lease_seconds, CAST(30 AS integer))),
        leased_at = now(),
        first_leased_at = coalesce(m.first_leased_at, now()),
        updated_at = now()
    FROM picked
    WHERE m.queue_id = 1 AND m.id = picked.id
    RETURNING m.id, m.lease_id::text AS lease_id, m.lease_expires_at, m.attempts, m.priority,
              m.seq, m.payload::text AS payload, m.metadata, m.enqueued_at
)
SELECT coalesce(json_agg(json_build_object('id', id, 'lease_id', lease_id)), '[]')::text
           AS items,
       count(*) AS claimed
FROM granted
\gset
COMMIT;
