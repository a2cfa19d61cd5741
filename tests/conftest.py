"""Test fixtures: one real PostgreSQL for the whole run (testing.postgresql, root-safe), a
template database migrated once with Alembic, and a fresh database cloned from it per test, so
every test commits for real and sees no other test's rows.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import psycopg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.database import create_engine
from app.core.service import QueueService
from app.core.validation import Limits
from app.store import migrate
from app.store.postgres import PostgresStore
from tests.pg import RootSafePostgresql, start_test_postgres

TEMPLATE = "sundial_template"
ADMIN_TOKEN = "test-admin-token-32-characters-ok"
_counter = itertools.count()


@dataclass
class TestDatabase:
    """A PostgreSQL server for tests and a way to make fresh migrated databases on it."""

    server: RootSafePostgresql

    def admin_dsn(self) -> str:
        return self.server.dsn(dbname="postgres")

    def url(self, database: str) -> str:
        return str(make_url(self.server.url()).set(database=database))

    def dsn(self, database: str) -> str:
        return self.server.dsn(dbname=database)

    def create(self, template: str | None = TEMPLATE) -> str:
        """A new database (a clone of the migrated template by default); returns its name."""
        name = f"t_{os.getpid()}_{next(_counter)}"
        with psycopg.connect(self.admin_dsn(), autocommit=True) as conn:
            if template:
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
            else:
                conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def drop(self, name: str) -> None:
        with psycopg.connect(self.admin_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres() -> Iterator[TestDatabase]:
    """The run's PostgreSQL server, with the migrated template database."""
    server = start_test_postgres()
    db = TestDatabase(server)
    try:
        with psycopg.connect(db.admin_dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
        migrate.upgrade(db.url(TEMPLATE))
        yield db
    finally:
        server.stop()


@pytest.fixture
def database_url(postgres: TestDatabase) -> Iterator[str]:
    """SQLAlchemy URL of a fresh, migrated database for this test only."""
    name = postgres.create()
    yield postgres.url(name)
    postgres.drop(name)


@pytest.fixture
def pool_b_url(postgres: TestDatabase) -> Iterator[str]:
    """SQLAlchemy URL of a second fresh, migrated database for this test: pool ``b`` of the
    tests with pools (docs/scaling.md), the test's own database being the catalogue."""
    name = postgres.create()
    yield postgres.url(name)
    postgres.drop(name)


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An async engine on this test's database."""
    engine = create_engine(database_url, pool_size=20)
    yield engine
    await engine.dispose()


@pytest.fixture
def service(engine: AsyncEngine) -> QueueService:
    """The queue service on this test's database (admin token: ``ADMIN_TOKEN``)."""
    return QueueService(
        PostgresStore(engine), limits=Limits(max_payload_bytes=4096), admin_token=ADMIN_TOKEN
    )
