"""Schema for periodic (cron) jobs.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27

``periodic_jobs``: a job of a namespace enqueues a message built from its template into a queue
of that namespace at every tick of its cron schedule (docs/concepts.md, "Periodic jobs"). The
target queue is named, not referenced: a job whose queue is missing (deleted, not made yet)
skips its ticks and says why in ``last_error``. The scheduler's leader finds due jobs through
``periodic_jobs_due_idx`` and advances ``next_run_at`` with a guarded UPDATE in the same
statement as the enqueue (``app/store/sql/periodic.py``).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the table."""
    op.execute(
        """
        CREATE TABLE periodic_jobs (
            namespace text NOT NULL REFERENCES namespaces (name) ON DELETE CASCADE,
            name text NOT NULL,
            queue text NOT NULL,
            schedule text NOT NULL,
            timezone text NOT NULL DEFAULT 'UTC',
            payload jsonb NOT NULL DEFAULT 'null'::jsonb,
            metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
            priority bigint,
            ttl_seconds integer,
            max_attempts integer,
            lease_seconds integer,
            paused boolean NOT NULL DEFAULT false,
            next_run_at timestamptz NOT NULL,
            last_run_at timestamptz,
            last_message_id text,
            last_error text,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT periodic_jobs_pkey PRIMARY KEY (namespace, name)
        );
        CREATE INDEX periodic_jobs_due_idx ON periodic_jobs (next_run_at) WHERE NOT paused;
        """
    )


def downgrade() -> None:
    """Drop the table."""
    op.execute("DROP TABLE periodic_jobs")
