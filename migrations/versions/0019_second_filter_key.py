"""A queue's second indexed filter key (docs/concepts.md, "Filtered dequeue").

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27

A queue may index the values of two metadata keys (``filter_keys``): the first in
``filter_key`` and ``messages.filter_value`` (migration 0005), the second in ``filter_key_2`` and
``messages.filter_value_2``. A dequeue filtering on the second key walks
``messages_filter_2_pending_idx`` as one on the first walks ``messages_filter_pending_idx``:
that value's ready messages in priority order, whatever the backlog of other values.

The new column has no default, so adding it rewrites nothing. Only messages that have a second
filter value are in the index: other queues' writes never touch it. Building it (empty) reads
the messages table once and blocks writes meanwhile, in the migration's transaction like
migration 0005 (docs/operations.md, Upgrades).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the columns and the index."""
    op.execute(
        """
        ALTER TABLE queues ADD COLUMN filter_key_2 text
            CONSTRAINT queues_filter_key_2_check
            CHECK (filter_key_2 IS NULL OR (filter_key IS NOT NULL AND filter_key_2 <> filter_key));
        ALTER TABLE messages ADD COLUMN filter_value_2 text;
        CREATE INDEX messages_filter_2_pending_idx
            ON messages (queue_id, filter_value_2, priority, seq)
            WHERE state = 'pending' AND filter_value_2 IS NOT NULL;
        """
    )


def downgrade() -> None:
    """Drop the index and the columns."""
    op.execute(
        """
        DROP INDEX IF EXISTS messages_filter_2_pending_idx;
        ALTER TABLE messages DROP COLUMN filter_value_2;
        ALTER TABLE queues DROP COLUMN filter_key_2;
        """
    )
