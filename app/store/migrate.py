"""Schema migrations: the ``sundial db`` commands and the server's startup check wrap Alembic here.

The Alembic environment lives in ``alembic/`` and the revisions in ``migrations/versions``, both at
the top of the checkout.
"""

from __future__ import annotations

import itertools
import logging
import time
from pathlib import Path

import sqlalchemy as sa
import sqlalchemy.exc
import sqlalchemy.pool
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

PROJECT_ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger("sundial.migrate")


def alembic_config(url: str) -> Config:
    """An Alembic configuration for the database at ``url`` (a SQLAlchemy URL)."""
    config = Config()
    config.set_main_option("script_location", str(PROJECT_ROOT / "alembic"))
    config.set_main_option("version_locations", str(PROJECT_ROOT / "migrations" / "versions"))
    config.set_main_option("path_separator", "os")
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def wait_until_reachable(url: str, timeout_seconds: float) -> None:
    """Return once the database at ``url`` accepts connections; raise after ``timeout_seconds``.

    A server started beside its database (docker compose, a host booting) may try before the
    database is ready; waiting here lets it start instead of failing.
    """
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool, connect_args={"connect_timeout": 5})
    deadline = time.monotonic() + timeout_seconds
    try:
        for attempt in itertools.count():
            try:
                with engine.connect() as conn:
                    conn.execute(sa.text("SELECT 1"))
                return
            except sa.exc.OperationalError as error:
                if time.monotonic() >= deadline:
                    raise DatabaseUnreachable(
                        f"the database did not accept connections within {timeout_seconds:g} s:"
                        f" {str(error.orig).strip()}"
                    ) from error
                if attempt == 0:
                    log.warning("waiting for the database: %s", str(error.orig).strip())
                time.sleep(min(0.2 * 2**attempt, 2.0, max(deadline - time.monotonic(), 0)))
    finally:
        engine.dispose()


class DatabaseUnreachable(RuntimeError):
    """The database did not accept connections in time."""


def upgrade(url: str, revision: str = "head") -> None:
    """Apply revisions up to ``revision``."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Revert revisions down to ``revision`` (``base`` removes everything)."""
    command.downgrade(alembic_config(url), revision)


def current(url: str) -> None:
    """Print the database's current revision."""
    command.current(alembic_config(url), verbose=True)


def history() -> None:
    """Print the revision history."""
    command.history(alembic_config("postgresql+psycopg://unused"), verbose=True)


def check(url: str) -> None:
    """Fail when the models in app/store/tables.py and the migrations disagree."""
    command.check(alembic_config(url))


def head_revision() -> str | None:
    """The newest revision in the migrations directory."""
    return ScriptDirectory.from_config(
        alembic_config("postgresql+psycopg://unused")
    ).get_current_head()


def database_revision(connection: sa.Connection) -> str | None:
    """The revision the connected database is at (``None`` before the first upgrade)."""
    return MigrationContext.configure(connection).get_current_revision()
