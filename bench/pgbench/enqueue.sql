-- Raw SQL limit of Sundial's enqueue (app/store/queries.py MESSAGES_ENQUEUE), run by pgbench in
-- prepared mode with -D batch=N. The statement is Sundial's own; the column arrays that the
-- server binds are generated here (fresh random ids, a small JSON payload, everything else at
-- its default), into bench_raw_messages, a table of the same shape, indexes and storage options
-- as messages. One statement per transaction, as the server commits it.
WITH input AS (
    SELECT m.*, coalesce(m.visible_at_given, now() + make_interval(secs => m.delay_seconds))
                AS visible_at
    FROM unnest(ARRAY(SELECT gen_random_uuid()::text
                      FROM generate_series(1, CAST(:batch AS integer))),
                array_fill(NULL::bigint, ARRAY[CAST(:batch AS integer)]),
                array_fill('{"c": 1, "i": 1}'::jsonb, ARRAY[CAST(:batch AS integer)]),
                array_fill(NULL::jsonb, ARRAY[CAST(:batch AS integer)]),
                array_fill(NULL::text, ARRAY[CAST(:batch AS integer)]),
                array_fill(NULL::integer, ARRAY[CAST(:batch AS integer)]),
                array_fill(NULL::integer, ARRAY[CAST(:batch AS integer)]),
                array_fill(0, ARRAY[CAST(:batch AS integer)]),
                array_fill(NULL::timestamptz, ARRAY[CAST(:batch AS integer)]),
                array_fill(NULL::integer, ARRAY[CAST(:batch AS integer)]),
                array_fill(NULL::timestamptz, ARRAY[CAST(:batch AS integer)]))
         WITH ORDINALITY
         AS m(id, priority, payload, metadata, exclusive_value, max_attempts, lease_seconds,
              delay_seconds, visible_at_given, ttl_seconds, expires_at, ord)
),
inserted AS (
    INSERT INTO bench_raw_messages (queue_id, id, priority, state, payload, metadata,
                                    exclusive_value, max_attempts, lease_seconds, visible_at,
                                    expires_at)
    SELECT 1, id,
           coalesce(priority, (extract(epoch FROM now()) * 1000)::bigint),
           CASE WHEN visible_at > now() THEN 'invisible' ELSE 'pending' END::message_state,
           coalesce(payload, 'null'::jsonb), coalesce(metadata, '{}'::jsonb),
           exclusive_value, max_attempts, lease_seconds, visible_at,
           coalesce(expires_at, now() + make_interval(secs => ttl_seconds))
    FROM input ORDER BY ord
    ON CONFLICT (queue_id, id) DO NOTHING
    RETURNING id, state
),
wake AS (
    SELECT pg_notify('bench_raw_ready', '1')
    WHERE EXISTS (SELECT 1 FROM inserted WHERE state = 'pending')
)
SELECT id, state::text AS state FROM inserted
UNION ALL
SELECT NULL, NULL FROM wake;
