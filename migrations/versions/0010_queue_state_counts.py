"""Counts of messages per queue and state, kept by triggers; the oldest pending message by index.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26

A queue's counts (``GET …/queues/{queue}``, ``GET …/queues``, the dashboard) and the metrics'
queue gauges counted the rows of ``messages``, and read every pending message for the oldest
one's age: with 10 million pending in one queue each of those reads took seconds. Now
(docs/adr/0014-counts-kept-by-triggers.md):

- ``queue_state_counts (queue_id, state, n)`` holds the counts as of the last fold, and
  ``queue_state_count_deltas (queue_id, state, delta)`` the changes since, appended by
  statement-level triggers on ``messages``: one row per queue and state whose count a statement
  changed (its net change, read from the statement's transition tables), none for a statement
  that changes no state (a lease extension, a PATCH of the payload). Appending, never updating,
  keeps concurrent writers off any shared row. The scheduler's leader folds the deltas into the
  counts on every tick (``QUEUE_STATE_COUNTS_FOLD``), and a read adds the deltas to the counts in
  one statement, so what it reads is exact at its snapshot. Deleting a queue deletes its
  messages, whose deltas bring its counts to zero, and a count of zero is no row. ``TRUNCATE
  messages`` empties both tables.
- ``messages_pending_visible_idx (queue_id, visible_at) WHERE state = 'pending'`` answers the
  oldest pending message's ``visible_at`` with the first entry of the queue's range, instead of
  reading them all.

The counts are taken from the existing rows after the table is locked against writes (``SHARE
ROW EXCLUSIVE``, which ``CREATE TRIGGER`` takes anyway), so no change can fall between the count
and the first trigger. Counting and building the index read the messages table, and writes to it
wait meanwhile: a few seconds per GB of hot table. Like migration 0005, it runs in the
migration's transaction, not CONCURRENTLY (docs/operations.md, Upgrades).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the tables, the triggers that keep them, the counts so far, and the index."""
    op.execute(
        """
        -- Writes wait from here to the commit: the counts below and the triggers start together.
        LOCK TABLE messages IN SHARE ROW EXCLUSIVE MODE;

        -- The counts as of the last fold; no row where the count is 0. No foreign key: deleting
        -- a queue deletes its messages, whose deltas bring its counts to 0, and the fold then
        -- deletes them; meanwhile nothing reads the counts of a queue that does not exist.
        CREATE TABLE queue_state_counts (
            queue_id bigint NOT NULL,
            state    message_state NOT NULL,
            n        bigint NOT NULL,
            PRIMARY KEY (queue_id, state)
        );

        -- What changed since: appended by the triggers, emptied by each fold. No key, no index
        -- and no foreign key, so an append costs a heap insert and nothing else (a foreign key
        -- would also refuse the deltas of a queue being deleted). It holds what changed in a
        -- tick (0.1 s) between folds, and is vacuumed after every 1,000 dead rows.
        CREATE TABLE queue_state_count_deltas (
            queue_id bigint NOT NULL,
            state    message_state NOT NULL,
            delta    bigint NOT NULL
        ) WITH (
            autovacuum_vacuum_scale_factor = 0,
            autovacuum_vacuum_threshold = 1000,
            autovacuum_vacuum_cost_delay = 0
        );

        -- One delta row per (queue, state) a statement changed, with the net change. The
        -- transition tables hold the statement's rows as they were and as they are.
        CREATE FUNCTION sundial_counts_inserted() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO queue_state_count_deltas (queue_id, state, delta)
            SELECT queue_id, state, count(*) FROM new_rows GROUP BY queue_id, state;
            RETURN NULL;
        END
        $$;

        CREATE FUNCTION sundial_counts_deleted() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO queue_state_count_deltas (queue_id, state, delta)
            SELECT queue_id, state, -count(*) FROM old_rows GROUP BY queue_id, state;
            RETURN NULL;
        END
        $$;

        -- An update that leaves every state as it was (a lease extension) nets to zero
        -- everywhere and appends nothing.
        CREATE FUNCTION sundial_counts_updated() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO queue_state_count_deltas (queue_id, state, delta)
            SELECT queue_id, state, sum(delta)
            FROM (SELECT queue_id, state, 1 AS delta FROM new_rows
                  UNION ALL
                  SELECT queue_id, state, -1 FROM old_rows) AS changed
            GROUP BY queue_id, state
            HAVING sum(delta) <> 0;
            RETURN NULL;
        END
        $$;

        -- No message left, no count left. The lock makes a fold that is running wait to commit
        -- first, so none of its counts survives the deletes.
        CREATE FUNCTION sundial_counts_truncated() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            LOCK TABLE queue_state_counts, queue_state_count_deltas IN SHARE ROW EXCLUSIVE MODE;
            DELETE FROM queue_state_count_deltas;
            DELETE FROM queue_state_counts;
            RETURN NULL;
        END
        $$;

        CREATE TRIGGER messages_counts_inserted AFTER INSERT ON messages
            REFERENCING NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION sundial_counts_inserted();
        CREATE TRIGGER messages_counts_deleted AFTER DELETE ON messages
            REFERENCING OLD TABLE AS old_rows
            FOR EACH STATEMENT EXECUTE FUNCTION sundial_counts_deleted();
        CREATE TRIGGER messages_counts_updated AFTER UPDATE ON messages
            REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION sundial_counts_updated();
        CREATE TRIGGER messages_counts_truncated AFTER TRUNCATE ON messages
            FOR EACH STATEMENT EXECUTE FUNCTION sundial_counts_truncated();

        INSERT INTO queue_state_counts (queue_id, state, n)
        SELECT queue_id, state, count(*) FROM messages GROUP BY queue_id, state;

        -- The oldest pending message of a queue: the first entry of its range.
        CREATE INDEX messages_pending_visible_idx ON messages (queue_id, visible_at)
            WHERE state = 'pending';
        """
    )


def downgrade() -> None:
    """Drop the index, the triggers, their functions and the tables."""
    op.execute(
        """
        DROP INDEX messages_pending_visible_idx;
        DROP TRIGGER messages_counts_truncated ON messages;
        DROP TRIGGER messages_counts_updated ON messages;
        DROP TRIGGER messages_counts_deleted ON messages;
        DROP TRIGGER messages_counts_inserted ON messages;
        DROP FUNCTION sundial_counts_truncated();
        DROP FUNCTION sundial_counts_updated();
        DROP FUNCTION sundial_counts_deleted();
        DROP FUNCTION sundial_counts_inserted();
        DROP TABLE queue_state_count_deltas;
        DROP TABLE queue_state_counts;
        """
    )
