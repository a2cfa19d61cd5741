"""Indexed metadata filter: a queue's ``filter_key`` and each message's ``filter_value``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25

A dequeue with a metadata filter walks the queue's ready messages in priority order and tests
each one, so a rare value costs a walk past every message ahead of its first match. A queue
created with ``filter_key`` copies that metadata key's value into ``messages.filter_value`` at
enqueue, and ``messages_filter_pending_idx`` hands a filter on that key its matches in priority
order directly. Only messages that have a filter value are in the index: queues without a
``filter_key`` pay nothing on their writes.

The index starts empty (no queue has a filter_key yet), but building it reads the messages
table once, and writes to it wait meanwhile: a few seconds per GB of hot table. It is built in
the migration's transaction, not CONCURRENTLY: servers starting together wait for the migration
lock inside a transaction, and CREATE INDEX CONCURRENTLY waits for every open transaction, so it
would deadlock with them (docs/operations.md, Upgrades).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the columns and the index."""
    op.execute("ALTER TABLE queues ADD COLUMN filter_key text")
    op.execute("ALTER TABLE messages ADD COLUMN filter_value text")
    op.execute(
        """
        CREATE INDEX messages_filter_pending_idx
        ON messages (queue_id, filter_value, priority, seq)
        WHERE state = 'pending' AND filter_value IS NOT NULL
        """
    )


def downgrade() -> None:
    """Drop the index and the columns."""
    op.execute("DROP INDEX IF EXISTS messages_filter_pending_idx")
    op.execute("ALTER TABLE messages DROP COLUMN filter_value")
    op.execute("ALTER TABLE queues DROP COLUMN filter_key")
