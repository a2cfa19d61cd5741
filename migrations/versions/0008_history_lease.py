"""History keeps a finished message's lease, and is found by message id.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26

A consumer that lost the answer to its complete sends it again with the same lease, and gets
the completed message back (an idempotent 200). Once the scheduler has moved the message into
``message_history`` that retry found nothing and answered 404. History now records what the
answer needs: the lease that finished the message (``lease_id``), its resolved
``lease_seconds``, and its ``visible_at`` and ``expires_at``; rows archived before this
migration have them NULL (their repeats still answer 404). ``message_history_message_idx
(queue_id, id)`` finds a message there without reading the whole history: a refused complete
probes it (one index probe per daily partition), never a successful one.

Building the index reads every history partition once, and the archive's inserts wait meanwhile
(a running scheduler leader with them): a few seconds per GB of history. Like migration 0005,
it runs in the migration's transaction, not CONCURRENTLY (docs/operations.md, Upgrades).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the columns and the index."""
    op.execute(
        """
        ALTER TABLE message_history
            ADD COLUMN lease_id uuid,
            ADD COLUMN lease_seconds integer,
            ADD COLUMN visible_at timestamptz,
            ADD COLUMN expires_at timestamptz
        """
    )
    op.execute("CREATE INDEX message_history_message_idx ON message_history (queue_id, id)")


def downgrade() -> None:
    """Drop the index and the columns."""
    op.execute("DROP INDEX IF EXISTS message_history_message_idx")
    op.execute(
        """
        ALTER TABLE message_history
            DROP COLUMN expires_at,
            DROP COLUMN visible_at,
            DROP COLUMN lease_seconds,
            DROP COLUMN lease_id
        """
    )
