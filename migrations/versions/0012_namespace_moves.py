"""Moving a namespace between pools: the namespace's state in each pool, the catalogue's journal
of moves, and the source pool's log of changed messages.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27

A namespace moves from pool A to pool B while it keeps serving (docs/adr/0015,
docs/scaling.md): B receives a snapshot copy, then the messages that changed since, logged on A
by a trigger; A is frozen for the last few changes, and the catalogue's map flips to B.

- ``namespaces.state``: ``active`` (served), ``incoming`` (a copy being filled: never served),
  ``frozen`` (the last pass of a move: nothing may change it), ``moved`` (the copy left
  behind, being deleted). Lookups serve only ``active`` namespaces; the scheduler leaves the
  others' messages alone.
- ``namespace_moves`` (read in the catalogue): one row per move under way, with its phase, so a
  mover that died is resumed or aborted by running it again.
- ``namespace_moves_out`` and ``namespace_move_changes`` (on the source pool): the namespaces
  being moved out, and the (queue, message) keys that statements changed since the move began.
  ``sundial_move_log`` is the function of the statement-level triggers a move installs on
  ``messages`` (and drops when it is done): it appends the keys a statement changed in the
  namespaces being moved out, in the statement's transaction, and refuses (SQLSTATE SD001, as
  the catalogue guard does) a change to such a namespace once it is no longer active.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add namespaces.state; create namespace_moves, namespace_moves_out,
    namespace_move_changes and sundial_move_log()."""
    op.execute(
        """
        ALTER TABLE namespaces ADD COLUMN state text NOT NULL DEFAULT 'active'
            CONSTRAINT namespaces_state_check
            CHECK (state IN ('active', 'incoming', 'frozen', 'moved'));

        CREATE TABLE namespace_moves (
            namespace  text PRIMARY KEY,
            source     text NOT NULL,
            target     text NOT NULL,
            phase      text NOT NULL CONSTRAINT namespace_moves_phase_check
                       CHECK (phase IN ('copying', 'frozen', 'flipped')),
            started_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );

        CREATE TABLE namespace_moves_out (
            namespace text PRIMARY KEY
        );

        CREATE TABLE namespace_move_changes (
            n        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            queue_id bigint NOT NULL,
            id       text NOT NULL
        );

        -- The triggers a move installs name the statement's rows "changed" (the new rows of an
        -- INSERT or UPDATE, the old rows of a DELETE).
        CREATE FUNCTION sundial_move_log() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO namespace_move_changes (queue_id, id)
            SELECT DISTINCT c.queue_id, c.id
            FROM changed c
            JOIN queues q ON q.id = c.queue_id
            JOIN namespace_moves_out o ON o.namespace = q.namespace;
            IF FOUND AND EXISTS (
                   SELECT 1
                   FROM changed c
                   JOIN queues q ON q.id = c.queue_id
                   JOIN namespaces n ON n.name = q.namespace
                   JOIN namespace_moves_out o ON o.namespace = n.name
                   WHERE n.state <> 'active') THEN
                RAISE EXCEPTION 'the namespace is moving to another pool'
                    USING ERRCODE = 'SD001';
            END IF;
            RETURN NULL;
        END
        $$;
        """
    )


def downgrade() -> None:
    """Drop what upgrade made."""
    op.execute(
        """
        DROP FUNCTION sundial_move_log();
        DROP TABLE namespace_move_changes;
        DROP TABLE namespace_moves_out;
        DROP TABLE namespace_moves;
        ALTER TABLE namespaces DROP COLUMN state;
        """
    )
