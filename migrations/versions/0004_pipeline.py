"""Data pipeline: the history export's runs (its watermark) and the hourly report table.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

``pipeline_export_runs`` records each export of ``message_history`` to the Parquet lake as a
window ``[low, high)`` of ``archived_at``. A run is written before its files and committed after
them, so an interrupted run is found and redone with the same window and file names; the
watermark is the ``high`` of the last committed run. ``report_hourly`` is what the Spark report
job upserts (docs/pipeline.md). ``reporting.report_hourly`` shows it to the read-only role.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the pipeline's tables."""
    op.execute(
        """
        CREATE TABLE pipeline_export_runs (
            id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            low          timestamptz NOT NULL,
            high         timestamptz NOT NULL,
            started_at   timestamptz NOT NULL DEFAULT now(),
            committed_at timestamptz,
            rows         bigint,
            files        integer,
            CONSTRAINT pipeline_export_runs_window_check CHECK (low < high)
        );

        -- One row per namespace, queue and UTC hour. Durations are whole microseconds.
        CREATE TABLE report_hourly (
            namespace         text NOT NULL,
            queue             text NOT NULL,
            hour              timestamptz NOT NULL,
            enqueued          bigint NOT NULL,
            completed         bigint NOT NULL,
            errored           bigint NOT NULL,
            canceled          bigint NOT NULL,
            expired           bigint NOT NULL,
            wait_p50_us       bigint,
            wait_p95_us       bigint,
            wait_p99_us       bigint,
            run_p50_us        bigint,
            run_p95_us        bigint,
            run_p99_us        bigint,
            attempts          jsonb NOT NULL,
            lease_expired     bigint NOT NULL,
            lease_expiry_rate double precision,
            busiest_exclusive jsonb NOT NULL,
            computed_at       timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (namespace, queue, hour)
        );
        CREATE INDEX report_hourly_hour_idx ON report_hourly (hour);

        CREATE VIEW reporting.report_hourly AS SELECT * FROM report_hourly;
        COMMENT ON VIEW reporting.report_hourly IS
            'Hourly queue report computed by the Spark pipeline (docs/pipeline.md).';
        """
    )


def downgrade() -> None:
    """Drop the pipeline's tables."""
    op.execute(
        """
        DROP VIEW reporting.report_hourly;
        DROP TABLE report_hourly;
        DROP TABLE pipeline_export_runs;
        """
    )
