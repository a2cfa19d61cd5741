"""The catalogue's version: every change to a namespace, token or queue counts it up.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26

Server processes keep the tokens and queues they read in memory, so that a request does not
read them again (app/store/lookups.py). For a change made elsewhere (another worker, another
server, the CLI) to apply to every request sent after its answer, each request's statement
carries the catalogue version its lookups were read at, and ``sundial_catalogue_is`` refuses
to run it (SQLSTATE SD001, nothing applied) when the version has moved on since; the server then
reads the caller's token and the queue again and runs the request again (docs/adr/0011).

Row triggers on UPDATE and DELETE of namespaces, tokens and queues count the version up; an
INSERT needs none, since what is unknown is never kept. A namespace deleted with its queues and
tokens counts it up once per row, all in the one transaction: such changes are rare.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CATALOGUE_TABLES = ("namespaces", "tokens", "queues")


def upgrade() -> None:
    """Create the version row, its triggers and the guard function."""
    op.execute(
        """
        -- Exactly one row: the version of namespaces, tokens and queues taken together.
        CREATE TABLE catalogue_version (
            one     boolean PRIMARY KEY DEFAULT true CHECK (one),
            version bigint NOT NULL
        );
        INSERT INTO catalogue_version (one, version) VALUES (true, 1);

        CREATE FUNCTION sundial_catalogue_changed() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE catalogue_version SET version = version + 1;
            RETURN NULL;
        END
        $$;

        -- The guard of every statement a request runs on what it looked up: true when the
        -- catalogue is still at ``expected`` and the caller's token (valid until
        -- ``valid_until``) has not expired by the database's clock; otherwise an error, so that
        -- the statement applies nothing. NULL arguments skip their check.
        CREATE FUNCTION sundial_catalogue_is(expected bigint, valid_until timestamptz)
        RETURNS boolean
        LANGUAGE plpgsql STABLE AS $$
        BEGIN
            IF expected IS NOT NULL
               AND expected IS DISTINCT FROM (SELECT version FROM catalogue_version) THEN
                RAISE EXCEPTION 'the catalogue changed since this request read it'
                    USING ERRCODE = 'SD001';
            END IF;
            IF valid_until IS NOT NULL AND now() >= valid_until THEN
                RAISE EXCEPTION 'the token of this request has expired'
                    USING ERRCODE = 'SD001';
            END IF;
            RETURN true;
        END
        $$;
        """
    )
    for table in CATALOGUE_TABLES:
        op.execute(
            f"""
            CREATE TRIGGER {table}_catalogue_changed
            AFTER UPDATE OR DELETE ON {table}
            FOR EACH ROW EXECUTE FUNCTION sundial_catalogue_changed();
            CREATE TRIGGER {table}_catalogue_truncated
            AFTER TRUNCATE ON {table}
            FOR EACH STATEMENT EXECUTE FUNCTION sundial_catalogue_changed();
            """
        )


def downgrade() -> None:
    """Drop the triggers, the functions and the version row."""
    for table in CATALOGUE_TABLES:
        op.execute(f"DROP TRIGGER {table}_catalogue_changed ON {table}")
        op.execute(f"DROP TRIGGER {table}_catalogue_truncated ON {table}")
    op.execute("DROP FUNCTION sundial_catalogue_is(bigint, timestamptz)")
    op.execute("DROP FUNCTION sundial_catalogue_changed()")
    op.execute("DROP TABLE catalogue_version")
