"""Dashboard sessions: signing out ends the session on the server.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26

The dashboard's session cookie is encrypted and signed, so it cannot be forged; but a copy of it
kept working after its owner signed out, until it expired. The cookie now carries a random
session id, and a session is live only while its row is here: signing out deletes the row, and
every server process of every server on the database refuses the cookie from the next request
on. Rows past ``expires_at`` are dead already; each sign-in deletes them.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create dashboard_sessions."""
    op.execute(
        """
        -- One row per signed-in dashboard session. id_hash is the SHA-256 of the session id
        -- the cookie carries: the table alone cannot be turned back into a session.
        CREATE TABLE dashboard_sessions (
            id_hash    bytea PRIMARY KEY,
            created_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL
        );
        CREATE INDEX dashboard_sessions_expires_idx ON dashboard_sessions (expires_at);
        """
    )


def downgrade() -> None:
    """Drop dashboard_sessions."""
    op.execute("DROP TABLE dashboard_sessions")
