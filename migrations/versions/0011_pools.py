"""Pools: which database holds each namespace, and what each database is.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27

Namespaces may live on several databases, *pools* (docs/scaling.md, docs/adr/0015). Every pool
has this whole schema; the catalogue (the database of ``SUNDIAL_DATABASE_URL``, also the pool
``default``) reads two tables that the others leave empty:

- ``namespace_pools (namespace, pool)``: the pool that holds each namespace. Every namespace
  that exists before this revision is on ``default``.
- ``pools (name, number)``: the pools registered so far, each with the number that gives it a
  range of queue ids of its own (``number * 2^32`` up), so that a queue id names one queue
  across every pool. ``default`` is number 0: the ids queues already have.

and every pool, the catalogue included, says what it is in ``pool_identity`` (one row, written
when the pool is registered): a database registered as one pool refuses to serve as another, so
two pool names configured with one URL cannot both act on the same rows.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create namespace_pools (filled with today's namespaces, on default), pools and
    pool_identity."""
    op.execute(
        """
        CREATE TABLE namespace_pools (
            namespace  text PRIMARY KEY,
            pool       text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        INSERT INTO namespace_pools (namespace, pool) SELECT name, 'default' FROM namespaces;

        CREATE TABLE pools (
            name          text PRIMARY KEY,
            number        integer NOT NULL UNIQUE CHECK (number >= 0),
            registered_at timestamptz NOT NULL DEFAULT now()
        );

        -- One row at most: the primary key is a constant.
        CREATE TABLE pool_identity (
            one    boolean PRIMARY KEY DEFAULT true CHECK (one),
            name   text NOT NULL,
            number integer NOT NULL CHECK (number >= 0)
        );
        """
    )


def downgrade() -> None:
    """Drop pool_identity, pools and namespace_pools."""
    op.execute("DROP TABLE pool_identity; DROP TABLE pools; DROP TABLE namespace_pools")
