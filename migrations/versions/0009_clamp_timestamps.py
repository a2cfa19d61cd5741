"""Bring timestamps stored before the bounds of 0001-01-02 .. 9999-12-30 UTC within them.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26

Until this release a client could store a ``visible_at`` or ``expires_at`` (or a token's
``expires_at``) that PostgreSQL keeps but the server cannot read back (a year before 1 or after
9999 once its offset is applied): the message, any listing page holding it, and the namespace's
token list then failed. Validation now refuses such values (app/core/validation.py); this moves
the ones already stored to the nearest bound, which means the same to the queue (due at once, or
never expiring in practice), so that every row can be read again.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EARLIEST = "'0001-01-02 00:00:00+00'::timestamptz"
LATEST = "'9999-12-30 23:59:59.999999+00'::timestamptz"
COLUMNS = (("messages", "visible_at"), ("messages", "expires_at"), ("tokens", "expires_at"))


def upgrade() -> None:
    """Clamp out-of-range timestamps to the bounds."""
    for table, column in COLUMNS:
        op.execute(
            f"UPDATE {table} SET {column} = least(greatest({column}, {EARLIEST}), {LATEST})"
            f" WHERE {column} < {EARLIEST} OR {column} > {LATEST}"
        )


def downgrade() -> None:
    """Nothing to undo: the clamped values were unreadable."""
