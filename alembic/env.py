"""Alembic environment: runs the revisions in ``migrations/versions`` against the database that
``sundial db …`` (app/store/migrate.py) or ``alembic -x url=…`` names."""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import create_engine, pool, text

from app.store.tables import metadata

config = context.config


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise RuntimeError("no database URL: use `sundial db …` or `alembic -x url=…`")
    return url


def _include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    # History partitions (message_history_YYYYMMDD) are created by the scheduler, not migrations.
    return not (type_ == "table" and name is not None and name.startswith("message_history_"))


def run_migrations_offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=metadata,
        literal_binds=True,
        include_name=_include_name,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


# Servers sharing a database may all start at once, each upgrading it: the first to take this
# lock migrates, the others wait for it and then find the schema at head.
MIGRATION_LOCK_KEY = 0x53756E6469616D  # "Sundiam"


def _run(connection: Any) -> None:
    connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
    connection.commit()  # the lock belongs to the session and outlives the transaction
    try:
        context.configure(
            connection=connection,
            target_metadata=metadata,
            include_name=_include_name,
            compare_type=True,
            transaction_per_migration=True,
        )
        with context.begin_transaction():
            context.run_migrations()
    finally:
        connection.rollback()
        connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})
        connection.commit()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
