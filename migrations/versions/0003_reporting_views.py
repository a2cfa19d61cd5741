"""Reporting views: the documented, read-only contract for analysts (docs/reporting.md).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

The views live in their own schema, ``reporting``, so the read-only role (``sundial db
create-reader``) is granted that schema and nothing else. Each view reads the hot table
(``messages``) and the partitioned history (``message_history``) together, through
``reporting.messages``. Views run with their owner's rights, so the reader needs no grant on the
base tables. Payloads are left out on purpose: they may hold personal data, and no report needs
them. Percentiles are ``percentile_disc`` (an observed value), as in the data pipeline's hourly
report (app/pipeline/transforms.py).

Views are not in the SQLAlchemy metadata; ``alembic check`` compares tables only, and
``alembic/env.py`` does not include other schemas.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the reporting schema and its views."""
    op.execute(
        """
        CREATE SCHEMA reporting;
        COMMENT ON SCHEMA reporting IS
            'Read-only reporting views over live messages and history (docs/reporting.md).';

        -- Every message, live or archived, one row each, without payload. "outcome" is the
        -- terminal state, with 'expired' told apart from other cancellations; NULL while live.
        CREATE VIEW reporting.messages AS
        SELECT q.namespace, q.name AS queue, m.id, m.state::text AS state,
               CASE WHEN m.state = 'canceled' AND m.last_error = 'expired' THEN 'expired'
                    WHEN m.state IN ('completed', 'canceled', 'errored') THEN m.state::text
               END AS outcome,
               m.priority, m.metadata, m.exclusive_value, m.attempts,
               coalesce(m.max_attempts, q.max_attempts) AS max_attempts,
               m.enqueued_at, m.first_leased_at, m.leased_at, m.finished_at, m.last_error,
               false AS archived
        FROM messages m
        JOIN queues q ON q.id = m.queue_id
        UNION ALL
        SELECT h.namespace, h.queue, h.id, h.state::text,
               CASE WHEN h.state = 'canceled' AND h.last_error = 'expired' THEN 'expired'
                    ELSE h.state::text
               END,
               h.priority, h.metadata, h.exclusive_value, h.attempts, h.max_attempts,
               h.enqueued_at, h.first_leased_at, h.leased_at, h.finished_at, h.last_error,
               true
        FROM message_history h;
        COMMENT ON VIEW reporting.messages IS
            'Every message, live (archived = false) or in history (archived = true); no payload.';

        -- Messages per queue and state. Live states count the hot table; terminal states count
        -- both the hot table and history, so "completed" is every completion ever recorded.
        -- Every (queue, state) pair appears, with 0 where there are none.
        CREATE VIEW reporting.queue_depth AS
        SELECT q.namespace, q.name AS queue, s.state::text AS state,
               coalesce(c.messages, 0) AS messages,
               coalesce(c.live, 0) AS live,
               c.oldest_enqueued_at
        FROM queues q
        CROSS JOIN unnest(enum_range(NULL::message_state)) AS s (state)
        LEFT JOIN (
            SELECT namespace, queue, state, count(*) AS messages,
                   count(*) FILTER (WHERE NOT archived) AS live,
                   min(enqueued_at) AS oldest_enqueued_at
            FROM reporting.messages
            GROUP BY namespace, queue, state
        ) c ON c.namespace = q.namespace AND c.queue = q.name AND c.state = s.state::text;
        COMMENT ON VIEW reporting.queue_depth IS
            'Messages per queue and state (terminal states include history).';

        -- Finished messages per queue, hour of finish (UTC) and outcome.
        CREATE VIEW reporting.throughput_hourly AS
        SELECT namespace, queue,
               date_trunc('hour', finished_at, 'UTC') AS hour,
               outcome, count(*) AS messages
        FROM reporting.messages
        WHERE outcome IS NOT NULL
        GROUP BY namespace, queue, hour, outcome;
        COMMENT ON VIEW reporting.throughput_hourly IS
            'Finished messages per queue, UTC hour of finish and outcome.';

        -- Wait time: enqueue to first lease (a delayed message waits its delay too), by UTC hour
        -- of the first lease.
        CREATE VIEW reporting.wait_time_hourly AS
        SELECT namespace, queue,
               date_trunc('hour', first_leased_at, 'UTC') AS hour,
               count(*) AS messages,
               percentile_disc(0.5) WITHIN GROUP (ORDER BY wait) AS p50_seconds,
               percentile_disc(0.95) WITHIN GROUP (ORDER BY wait) AS p95_seconds,
               percentile_disc(0.99) WITHIN GROUP (ORDER BY wait) AS p99_seconds,
               max(wait) AS max_seconds
        FROM (
            SELECT namespace, queue, first_leased_at,
                   extract(epoch FROM first_leased_at - enqueued_at)::double precision AS wait
            FROM reporting.messages
            WHERE first_leased_at IS NOT NULL
        ) w
        GROUP BY namespace, queue, hour;
        COMMENT ON VIEW reporting.wait_time_hourly IS
            'Percentiles of enqueue-to-first-lease seconds per queue and UTC hour of first lease.';

        -- Run time: last lease to finish, per outcome, by UTC hour of finish. Only finished
        -- messages that were leased; for a lease that expired, the run ends when the scheduler
        -- released it.
        CREATE VIEW reporting.run_time_hourly AS
        SELECT namespace, queue,
               date_trunc('hour', finished_at, 'UTC') AS hour,
               outcome, count(*) AS messages,
               percentile_disc(0.5) WITHIN GROUP (ORDER BY run) AS p50_seconds,
               percentile_disc(0.95) WITHIN GROUP (ORDER BY run) AS p95_seconds,
               percentile_disc(0.99) WITHIN GROUP (ORDER BY run) AS p99_seconds,
               max(run) AS max_seconds
        FROM (
            SELECT namespace, queue, outcome, finished_at,
                   extract(epoch FROM finished_at - leased_at)::double precision AS run
            FROM reporting.messages
            WHERE outcome IS NOT NULL AND leased_at IS NOT NULL
        ) r
        GROUP BY namespace, queue, hour, outcome;
        COMMENT ON VIEW reporting.run_time_hourly IS
            'Percentiles of last-lease-to-finish seconds per queue, UTC hour of finish, outcome.';

        -- How many leases finished messages took.
        CREATE VIEW reporting.attempts_distribution AS
        SELECT namespace, queue, outcome, attempts, count(*) AS messages
        FROM reporting.messages
        WHERE outcome IS NOT NULL
        GROUP BY namespace, queue, outcome, attempts;
        COMMENT ON VIEW reporting.attempts_distribution IS
            'Finished messages per queue, outcome and number of attempts.';

        -- Dead letters: errored and canceled messages, live (requeueable) or archived.
        CREATE VIEW reporting.dead_letters AS
        SELECT namespace, queue, id, state, outcome, priority, metadata, attempts, max_attempts,
               enqueued_at, first_leased_at, finished_at, last_error, archived
        FROM reporting.messages
        WHERE state IN ('errored', 'canceled');
        COMMENT ON VIEW reporting.dead_letters IS
            'Errored and canceled messages, live (archived = false, requeueable) or archived.';
        """
    )


def downgrade() -> None:
    """Drop the reporting schema and its views."""
    op.execute(
        """
        DROP VIEW reporting.dead_letters;
        DROP VIEW reporting.attempts_distribution;
        DROP VIEW reporting.run_time_hourly;
        DROP VIEW reporting.wait_time_hourly;
        DROP VIEW reporting.throughput_hourly;
        DROP VIEW reporting.queue_depth;
        DROP VIEW reporting.messages;
        DROP SCHEMA reporting;
        """
    )
