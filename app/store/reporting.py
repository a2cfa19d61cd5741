"""The read-only reporting role: it may read the views of the ``reporting`` schema (migration
0003, docs/reporting.md) and nothing else.

The views run with their owner's rights, so the role needs no privilege on any table: it gets
``USAGE`` on the schema and ``SELECT`` on its views, plus ``SELECT`` by default on the views later
migrations add there. Its sessions also start read-only and with ``reporting`` on the search
path. Everything here is idempotent: running it again re-applies the same grants, and changes
the password only when one is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from app.database_url import psycopg_dsn

READER_ROLE = "sundial_reader"
REPORTING_SCHEMA = "reporting"
ROLE_PATTERN = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""Role names accepted: lower-case identifiers, so they never need quoting to be typed."""

# What the role may never do, stated on every run (an earlier ALTER ROLE may have changed it).
_ATTRIBUTES = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"


@dataclass(frozen=True, slots=True)
class ReaderRole:
    """What :func:`create_reader` did."""

    role: str
    database: str
    created: bool
    """False when the role existed already (its grants were applied again)."""
    password_set: bool
    views: list[str]
    """The views the role can read now."""


def _password_hash(conn: psycopg.Connection[Any], role: str, password: str) -> str:
    """The SCRAM verifier of ``password``, computed here so the server never sees (or logs)
    the password itself."""
    verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
    return verifier.decode()


def create_reader(url: str, role: str = READER_ROLE, password: str | None = None) -> ReaderRole:
    """Create the read-only reporting role in the database at ``url``, or bring it up to date.

    Args:
        url: SQLAlchemy URL of the database; the connecting user must be allowed to create roles
            and must own the ``reporting`` schema's views (the user that runs the migrations).
        role: the role's name (cluster-wide, as every PostgreSQL role is).
        password: its new password; None leaves the password as it is.

    Raises:
        ValueError: ``role`` is not a plain lower-case identifier.
    """
    if not ROLE_PATTERN.fullmatch(role):
        raise ValueError(f"role {role!r}: use lower-case letters, digits and _ (at most 63)")
    name = sql.Identifier(role)
    with psycopg.connect(psycopg_dsn(url)) as conn:
        database = conn.info.dbname
        created = _ensure_role(conn, role)
        conn.execute(sql.SQL(f"ALTER ROLE {{}} {_ATTRIBUTES}").format(name))
        if password is not None:
            verifier = _password_hash(conn, role, password)
            conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(name, sql.Literal(verifier)))
        db = sql.Identifier(database)
        schema = sql.Identifier(REPORTING_SCHEMA)
        for statement in (
            "ALTER ROLE {role} IN DATABASE {db} SET default_transaction_read_only = on",
            "ALTER ROLE {role} IN DATABASE {db} SET search_path = {schema}",
            "GRANT CONNECT ON DATABASE {db} TO {role}",
            # Nothing in public: take back anything an earlier hand-made grant gave.
            "REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}",
            "REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {role}",
            "REVOKE ALL ON SCHEMA {schema} FROM {role}",
            "GRANT USAGE ON SCHEMA {schema} TO {role}",
            "GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}",
            "ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT SELECT ON TABLES TO {role}",
        ):
            conn.execute(sql.SQL(statement).format(role=name, db=db, schema=schema))
        views = [
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.role_table_grants"
                " WHERE grantee = %s AND table_schema = %s AND privilege_type = 'SELECT'"
                " ORDER BY table_name",
                (role, REPORTING_SCHEMA),
            )
        ]
    return ReaderRole(role, database, created, password is not None, views)


def _ensure_role(conn: psycopg.Connection[Any], role: str) -> bool:
    """Create ``role`` (NOLOGIN until its attributes are set) unless it exists; whether it
    was created now. Safe against a concurrent run creating it at the same moment."""
    if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
        return False
    try:
        with conn.transaction():
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
    except (pg_errors.DuplicateObject, pg_errors.UniqueViolation):
        return False
    return True
