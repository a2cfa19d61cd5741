-- Raw SQL limit of Sundial's enqueue (app/store/sql/enqueue.py MESSAGES_ENQUEUE_IF_NEW), run by pgbench in
-- prepared mode. The statement is Sundial's own, bound to the same kind of JSON document the
-- server sends (the harness passes it as :rows: N rows of the load generator's small payload,
-- with a 36-character id each); since pgbench sends the same document every time, fresh random
-- ids replace the document's, after it has been read. Into bench_raw_messages, a table of the
-- same shape, indexes and storage options as messages. One statement per transaction, as the
-- server commits it.
WITH rows AS (
    SELECT gen_random_uuid()::text AS id, priority, CAST(payload AS jsonb) AS payload, metadata,
           exclusive_value, max_attempts, lease_seconds, delay_seconds,
           visible_at AS visible_at_given, ttl_seconds, expires_at, ord
    FROM ROWS FROM (
             json_to_recordset(CAST(:rows AS json))
             AS (id text, priority bigint, payload text, metadata jsonb, exclusive_value text,
                 max_attempts integer, lease_seconds integer, delay_seconds integer,
                 visible_at timestamptz, ttl_seconds integer, expires_at timestamptz))
         WITH ORDINALITY
         AS m(id, priority, payload, metadata, exclusive_value, max_attempts, lease_seconds,
              delay_seconds, visible_at, ttl_seconds, expires_at, ord)
),
input AS (
    SELECT m.*, coalesce(m.visible_at_given, now() + make_interval(secs => m.delay_seconds))
                AS visible_at
    FROM rows m
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
