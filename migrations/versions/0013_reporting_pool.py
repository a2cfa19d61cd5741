"""The reporting views say which pool they are read on.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27

With pools (docs/scaling.md) every pool's database has the same ``reporting`` views, over the
namespaces it holds. ``reporting.pool`` is one row, the pool the database is registered as
(``pool_identity``, migration 0011; ``default`` with number 0 before any registration), so an
analyst combining several pools' answers can label each with its pool. The reader role reads it
like the other views (its grants cover every view of the schema).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create reporting.pool."""
    op.execute(
        """
        CREATE VIEW reporting.pool AS
        SELECT coalesce(i.name, 'default') AS name, coalesce(i.number, 0) AS number
        FROM (SELECT) AS one LEFT JOIN pool_identity i ON true;
        COMMENT ON VIEW reporting.pool IS
            'The pool this database is (docs/scaling.md): one row, its name and number.';
        """
    )


def downgrade() -> None:
    """Drop reporting.pool."""
    op.execute("DROP VIEW reporting.pool")
