"""Every SQL statement of the pipeline's export, report and bulk enqueue (psycopg placeholders:
``%(name)s``). The advisory lock and the prune keep theirs in :mod:`app.pipeline.lock` and
:mod:`app.pipeline.prune`, which import neither pyarrow nor Spark.

Timestamps leave the database as whole microseconds since the epoch (``extract(epoch ...)`` is
an exact ``numeric`` since PostgreSQL 14), never as doubles, and the pipeline's sessions run in
UTC.
"""

from __future__ import annotations

from typing import Final

from app.pipeline.lake import HISTORY_COLUMNS, TIMESTAMP_COLUMNS


def _micros(column: str) -> str:
    return f"(extract(epoch FROM {column}) * 1000000)::bigint"


def _history_select() -> str:
    columns = []
    for field in HISTORY_COLUMNS:
        if field.name == "pool":  # not a column of message_history: the pool being exported
            columns.append("%(pool)s::text")
        elif field.name in TIMESTAMP_COLUMNS:
            columns.append(_micros(field.name))
        elif field.name == "state":
            columns.append("state::text")
        elif field.name in ("payload", "metadata"):
            columns.append(f"{field.name}::text")
        else:
            columns.append(field.name)
    return ", ".join(columns)


# --- export ---------------------------------------------------------------------------------

EXPORT_OPEN_RUN: Final = """
    SELECT id, low, high FROM pipeline_export_runs
    WHERE committed_at IS NULL ORDER BY id LIMIT 1
"""

# The next window: from the watermark (the last committed run's high) to a horizon that no
# uncommitted archive can fall behind. An archive stamps archived_at with its transaction's
# start (now()), so while a transaction that began at T is open, rows with archived_at >= T may
# still appear; the horizon is therefore the start of the oldest open transaction of this
# database, and at most now() - lag (a margin for transactions this role cannot see).
EXPORT_NEW_RUN: Final = """
    WITH bounds AS (
        SELECT coalesce((SELECT max(high) FROM pipeline_export_runs
                         WHERE committed_at IS NOT NULL), '1970-01-01T00:00:00Z') AS low,
               least(now() - make_interval(secs => %(lag)s),
                     (SELECT min(xact_start) FROM pg_stat_activity
                      WHERE datname = current_database() AND pid <> pg_backend_pid()
                        AND backend_type = 'client backend')) AS high
    )
    INSERT INTO pipeline_export_runs (low, high)
    SELECT low, high FROM bounds WHERE low < high
    RETURNING id, low, high
"""

EXPORT_COMMIT_RUN: Final = """
    UPDATE pipeline_export_runs SET committed_at = now(), rows = %(rows)s, files = %(files)s
    WHERE id = %(id)s AND committed_at IS NULL
"""

# One run's rows, grouped by lake partition (namespace, queue, UTC day of finished_at) so the
# writer holds one file open at a time. ORDER BY makes the files of a redone run identical.
# Every row carries %(pool)s, the name of the pool whose database this is.
EXPORT_COPY: Final = f"""
    COPY (
        SELECT namespace, queue, to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
               {_history_select()}
        FROM message_history
        WHERE archived_at >= %(low)s AND archived_at < %(high)s
        ORDER BY namespace, queue, day, finished_at, queue_id, id
    ) TO STDOUT (FORMAT csv)
"""

# --- report ---------------------------------------------------------------------------------

REPORT_STAGE: Final = """
    CREATE TEMPORARY TABLE report_stage (LIKE report_hourly INCLUDING DEFAULTS) ON COMMIT DROP
"""

REPORT_COPY: Final = """
    COPY report_stage (namespace, queue, hour, enqueued, completed, errored, canceled, expired,
                       wait_p50_us, wait_p95_us, wait_p99_us, run_p50_us, run_p95_us,
                       run_p99_us, attempts, lease_expired, lease_expiry_rate,
                       busiest_exclusive)
    FROM STDIN
"""

# A rerun of a window replaces it: rows of the window are upserted, and rows of the window that
# the new result no longer has are deleted, in one transaction.
REPORT_UPSERT: Final = """
    INSERT INTO report_hourly SELECT * FROM report_stage
    ON CONFLICT (namespace, queue, hour) DO UPDATE SET
        enqueued = EXCLUDED.enqueued, completed = EXCLUDED.completed,
        errored = EXCLUDED.errored, canceled = EXCLUDED.canceled, expired = EXCLUDED.expired,
        wait_p50_us = EXCLUDED.wait_p50_us, wait_p95_us = EXCLUDED.wait_p95_us,
        wait_p99_us = EXCLUDED.wait_p99_us, run_p50_us = EXCLUDED.run_p50_us,
        run_p95_us = EXCLUDED.run_p95_us, run_p99_us = EXCLUDED.run_p99_us,
        attempts = EXCLUDED.attempts, lease_expired = EXCLUDED.lease_expired,
        lease_expiry_rate = EXCLUDED.lease_expiry_rate,
        busiest_exclusive = EXCLUDED.busiest_exclusive, computed_at = now()
"""

REPORT_DELETE_STALE: Final = """
    DELETE FROM report_hourly r
    WHERE r.hour >= %(since)s AND r.hour < %(until)s
      AND NOT EXISTS (SELECT 1 FROM report_stage s
                      WHERE (s.namespace, s.queue, s.hour) = (r.namespace, r.queue, r.hour))
"""

# --- bulk enqueue ---------------------------------------------------------------------------

# The catalogue's map (migration 0011): the pool that holds a namespace.
NAMESPACE_POOL: Final = "SELECT pool FROM namespace_pools WHERE namespace = %(namespace)s"

QUEUE_GET: Final = """
    SELECT q.*, n.state AS namespace_state,
           array_remove(ARRAY[q.filter_key, q.filter_key_2], NULL) AS filter_keys
    FROM queues q JOIN namespaces n ON n.name = q.namespace
    WHERE q.namespace = %(namespace)s AND q.name = %(name)s
"""

# Read under FOR SHARE: a pause (an UPDATE of the row) waits for the batch, and the batch sees
# a pause committed before it. A namespace that a move has taken (no longer active here) takes
# no batch: its messages are moving to another pool (docs/scaling.md).
QUEUE_LOCK: Final = """
    SELECT q.enqueue_paused, q.delay_seconds, n.state AS namespace_state
    FROM queues q JOIN namespaces n ON n.name = q.namespace
    WHERE q.id = %(queue_id)s
    FOR SHARE OF q
"""

ENQUEUE_STAGE: Final = """
    CREATE TEMPORARY TABLE IF NOT EXISTS enqueue_stage (
        ord bigint, seq bigint, id text, priority bigint, payload text, metadata text,
        exclusive_value text
    ) ON COMMIT DELETE ROWS
"""

ENQUEUE_COPY: Final = """
    COPY enqueue_stage (ord, seq, id, priority, payload, metadata, exclusive_value)
    FROM STDIN (FORMAT csv)
"""

# The identity sequence of messages.seq, whose values the driver hands out in input order.
ENQUEUE_SEQUENCE: Final = "SELECT pg_get_serial_sequence('messages', 'seq')"

# %(count)s new values of that sequence, one per line. Each nextval is atomic, so the values are
# the load's own whatever enqueues run meanwhile. The driver gives them to a batch's rows in
# input order before spreading the rows over the loading connections, so seq follows the input
# order however the connections' commits interleave (a row found present already leaves a gap,
# as the identity value of an insert that conflicts does).
ENQUEUE_RESERVE_SEQ: Final = """
    COPY (SELECT nextval(%(sequence)s::regclass) FROM generate_series(1, %(count)s)) TO STDOUT
"""

# The semantics of app/store/sql/enqueue.py MESSAGES_ENQUEUE_IF_NEW for a batch without per-message
# overrides: priority defaults to now() in milliseconds, the queue's delay_seconds makes the
# message invisible until visible_at, max_attempts and lease_seconds stay NULL (the queue's
# current setting), and an id that exists already is left alone (ON CONFLICT DO NOTHING).
# seq is the value reserved for the row (ENQUEUE_RESERVE_SEQ), hence OVERRIDING SYSTEM VALUE;
# rows go in input order (ORDER BY ord), so of an id repeated in a batch the first one is
# inserted. filter_value (filter_value_2) is the metadata's value of the queue's filter_key
# (filter_key_2), read from the (locked) queue row. Returns how many messages were created.
ENQUEUE_INSERT: Final = """
    WITH inserted AS (
        INSERT INTO messages (queue_id, id, seq, priority, state, payload, metadata,
                              exclusive_value, filter_value, filter_value_2, visible_at)
        OVERRIDING SYSTEM VALUE
        SELECT %(queue_id)s, s.id, s.seq,
               coalesce(s.priority, (extract(epoch FROM now()) * 1000)::bigint),
               CASE WHEN %(delay)s > 0 THEN 'invisible' ELSE 'pending' END::message_state,
               s.payload::jsonb, s.metadata::jsonb, s.exclusive_value,
               s.metadata::jsonb ->> (SELECT filter_key FROM queues WHERE id = %(queue_id)s),
               s.metadata::jsonb ->> (SELECT filter_key_2 FROM queues WHERE id = %(queue_id)s),
               now() + make_interval(secs => %(delay)s)
        FROM enqueue_stage s ORDER BY s.ord
        ON CONFLICT (queue_id, id) DO NOTHING
        RETURNING state
    )
    SELECT count(*) AS created, count(*) FILTER (WHERE state = 'pending') AS ready FROM inserted
"""

# Wakes the queue's long-polling consumers at commit, as the API's enqueue does, and only when
# a server has consumers waiting on it (see ADR 0007).
ENQUEUE_WAKE: Final = """
    SELECT pg_notify(%(channel)s, CAST(%(queue_id)s AS text))
    WHERE EXISTS (SELECT 1 FROM queue_listeners WHERE queue_id = %(queue_id)s)
"""
