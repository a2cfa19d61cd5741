"""Fixtures of the service tests: every QueueService operation and every refusal, against a
real, migrated PostgreSQL.

Speed: cloning the template database costs ~0.3 s, which for ~80 tests is most of their
budget. This package therefore clones one database for all its modules and overrides
``database_url`` to empty it (TRUNCATE … RESTART IDENTITY) before each test: every test still
starts from the state of a freshly migrated database, with the same fixtures (``engine``,
``service``) on top.
"""

from __future__ import annotations

import psycopg
import pytest

from app.core.service import QueueService
from tests.helpers import make_queue
from tests.service.helpers import NS, Q


@pytest.fixture(scope="package")
def package_database(postgres):
    """The name of one migrated database (a clone of the template) for this package."""
    name = postgres.create()
    yield name
    postgres.drop(name)


@pytest.fixture
def database_url(package_database, postgres):
    """Override of tests/conftest.py's: the package's database, emptied as if freshly migrated.

    Every table the migrations made (whatever they are) is truncated, identities restart, but
    for the one-row tables they fill (the catalogue's version).
    """
    with psycopg.connect(postgres.dsn(package_database), autocommit=True) as conn:
        conn.execute("SET lock_timeout = '10s'")
        (tables,) = conn.execute(
            "SELECT string_agg(format('%I', tablename), ', ') FROM pg_tables "
            "WHERE schemaname = 'public'"
            " AND tablename NOT IN ('alembic_version', 'catalogue_version')"
        ).fetchone()
        conn.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
    return postgres.url(package_database)


@pytest.fixture
async def queue(service: QueueService):
    """A simple queue ``ns/q`` with default settings."""
    return await make_queue(service, NS, Q)
