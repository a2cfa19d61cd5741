"""Per-token read and write rate limits (docs/security.md, "Per-token rate limits").

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27

- ``tokens.read_rate`` and ``tokens.write_rate``: requests per second the token may make of each
  kind (reads: dequeue, get, list, query; writes: everything else), NULL for no limit. Changed at
  runtime by the admin; the catalogue version's triggers on ``tokens`` (migration 0006) make a
  change apply to the next request in every server process.
- ``token_rate_limits``: one row per limited token and kind, the generic cell rate algorithm's
  *theoretical arrival time* ``tat`` (app/store/sql/token_limits.py), counted by one
  ``INSERT … ON CONFLICT DO UPDATE`` per request of a limited token, so the limit holds across
  every server process on the database. UNLOGGED: a crash forgets the counts, which only
  lets a burst through; rows whose ``tat`` has passed mean nothing and the scheduler deletes
  them.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the columns and the counters' table."""
    op.execute(
        """
        ALTER TABLE tokens ADD COLUMN read_rate double precision;
        ALTER TABLE tokens ADD COLUMN write_rate double precision;
        ALTER TABLE tokens ADD CONSTRAINT tokens_read_rate_check CHECK (read_rate > 0);
        ALTER TABLE tokens ADD CONSTRAINT tokens_write_rate_check CHECK (write_rate > 0);
        CREATE UNLOGGED TABLE token_rate_limits (
            token_id uuid NOT NULL,
            kind text NOT NULL,
            tat timestamptz NOT NULL,
            step interval NOT NULL,
            allowed boolean NOT NULL,
            PRIMARY KEY (token_id, kind)
        );
        """
    )


def downgrade() -> None:
    """Drop them."""
    op.execute(
        """
        DROP TABLE token_rate_limits;
        ALTER TABLE tokens DROP COLUMN write_rate;
        ALTER TABLE tokens DROP COLUMN read_rate;
        """
    )
