"""Schema migrations: the ``sundial db`` commands and the server's startup check wrap Alembic here.

The Alembic environment lives in ``alembic/`` and the revisions in ``migrations/versions``, both at
the top of the checkout.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def alembic_config(url: str) -> Config:
    """An Alembic configuration for the database at ``url`` (a SQLAlchemy URL)."""
    config = Config()
    config.set_main_option("script_location", str(PROJECT_ROOT / "alembic"))
    config.set_main_option("version_locations", str(PROJECT_ROOT / "migrations" / "versions"))
    config.set_main_option("path_separator", "os")
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


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
