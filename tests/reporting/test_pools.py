"""The read-only role on every pool (docs/scaling.md): each pool is a database with its own
reporting views, so ``sundial db create-reader`` grants them on each, one line per pool."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import errors

from app.bootstrap.commands import main
from app.config import get_settings
from app.database_url import psycopg_dsn
from tests.reporting.test_reader import as_role

if TYPE_CHECKING:
    pass


@pytest.fixture
def cli(database_url: str, pool_b_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    """The ``sundial`` command with the test's database as the catalogue and pool ``b``."""
    for name in list(os.environ):
        if name.startswith("SUNDIAL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SUNDIAL_DATABASE_URL", database_url)
    monkeypatch.setenv("SUNDIAL_POOLS", json.dumps({"b": pool_b_url}))
    get_settings.cache_clear()
    try:
        yield CliRunner()
    finally:
        get_settings.cache_clear()


def _reads_the_views(dsn: str) -> str | None:
    """The pool a session on ``dsn`` reads (``reporting.pool``), if it starts on the reporting
    schema and may read its views; else None."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SHOW search_path").fetchone() == ("reporting",)
        try:
            conn.execute("SELECT count(*) FROM messages").fetchone()
            row = conn.execute("SELECT name FROM pool").fetchone()
        except errors.InsufficientPrivilege:
            return None
    return row[0] if row else None


def test_create_reader_grants_on_every_pool_with_one_line_each(
    cli: CliRunner, database_url: str, pool_b_url: str
):
    role = f"reader_{uuid.uuid4().hex[:12]}"
    done = cli.invoke(main, ["db", "create-reader", "--role", role, "--generate-password"])

    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    pools = [line.split("(pool ")[1].split(")")[0] for line in lines if line.startswith("Role")]
    assert pools == ["default", "b"]
    assert "messages" in lines[0]
    assert "messages" in lines[-1]
    # The role is cluster-wide (both pools are on the test server): one password, shown once.
    assert sum("shown only now" in line for line in lines) == 1
    for url, pool in ((database_url, "default"), (pool_b_url, "b")):
        assert _reads_the_views(as_role(psycopg_dsn(url), role)) == pool
