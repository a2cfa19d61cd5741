"""Schema for the queue ordering mode and OR filters.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27

A queue's ``ordering`` (docs/concepts.md, "Ordering"): ``priority`` (the default, as before:
priority, then enqueue order) or ``due`` (the time a message became visible first, priority
breaking ties among messages due at the same instant, then enqueue order). Fixed at creation,
like ``filter_key``.

The claim of a due-ordered queue walks its ready messages in ``(visible_at, priority, seq)``
order: ``messages_pending_visible_idx`` (migration 0010, ``(queue_id, visible_at) WHERE state =
'pending'``, read for a queue's oldest pending message) is rebuilt with ``priority, seq`` after
``visible_at``, so one index serves both and every pending message still has exactly one entry
more than before, none more (the oldest pending message is still the first entry of the queue's
range). Rebuilding it reads the messages table once and blocks writes to it meanwhile, in the
migration's transaction like migrations 0005 and 0010 (docs/operations.md, Upgrades).

OR filters (a list of values in a dequeue's metadata filter) need no schema: they walk the
indexes that exist.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add queues.ordering; widen messages_pending_visible_idx to the due order."""
    op.execute(
        """
        ALTER TABLE queues ADD COLUMN ordering text NOT NULL DEFAULT 'priority'
            CONSTRAINT queues_ordering_check CHECK (ordering IN ('priority', 'due'));
        DROP INDEX messages_pending_visible_idx;
        CREATE INDEX messages_pending_visible_idx
            ON messages (queue_id, visible_at, priority, seq) WHERE state = 'pending';
        """
    )


def downgrade() -> None:
    """Back to the (queue_id, visible_at) index; drop the column."""
    op.execute(
        """
        DROP INDEX messages_pending_visible_idx;
        CREATE INDEX messages_pending_visible_idx
            ON messages (queue_id, visible_at) WHERE state = 'pending';
        ALTER TABLE queues DROP COLUMN ordering;
        """
    )
