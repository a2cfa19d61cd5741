"""The read-only role: ``sundial db create-reader`` is idempotent, and the role reads the
reporting views and nothing else; every write it attempts is refused.

Roles are cluster-wide and the test cluster lives for the whole run, so these tests never assume
the role is new unless they made up its name.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from app.bootstrap.commands import main
from app.config import get_settings
from app.store import migrate
from app.store.reporting import READER_ROLE, create_reader
from tests.reporting.conftest import Generated

VIEWS = [
    "attempts_distribution",
    "dead_letters",
    "messages",
    "pool",
    "queue_depth",
    "run_time_hourly",
    "throughput_hourly",
    "wait_time_hourly",
]
TABLES = ["messages", "message_history", "queues", "namespaces", "tokens", "scheduler_nodes"]


def as_role(dsn: str, role: str) -> str:
    params = conninfo_to_dict(dsn)
    params["user"] = role
    return make_conninfo(**params)


def reporting_views(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [
            name
            for (name,) in conn.execute(
                "SELECT table_name FROM information_schema.views"
                " WHERE table_schema = 'reporting' ORDER BY table_name"
            )
        ]


def test_create_reader_twice_creates_once_and_grants_every_view(generated: Generated):
    role = f"reader_{uuid.uuid4().hex[:12]}"
    first = create_reader(generated.url, role, password="first secret")
    again = create_reader(generated.url, role)
    assert (first.created, again.created) == (True, False)
    assert first.views == again.views == reporting_views(generated.dsn)
    assert set(VIEWS) <= set(first.views)
    with psycopg.connect(generated.dsn) as conn:
        stored = conn.execute(
            "SELECT rolpassword, rolcanlogin, rolsuper, rolcreaterole, rolcreatedb"
            " FROM pg_authid WHERE rolname = %s",
            (role,),
        ).fetchone()
    assert stored is not None
    verifier, *flags = stored
    assert verifier.startswith("SCRAM-SHA-256$")  # hashed here, never sent in clear
    assert "first secret" not in verifier
    assert flags == [True, False, False, False]


def test_create_reader_refuses_a_role_name_that_would_need_quoting(generated: Generated):
    with pytest.raises(ValueError, match="role"):
        create_reader(generated.url, 'x"; DROP TABLE messages; --')


def test_reader_selects_every_view(reader):
    for view in reporting_views_of(reader):
        reader.execute(f"SELECT * FROM reporting.{view} LIMIT 1").fetchall()


def reporting_views_of(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute(
        "SELECT table_name FROM information_schema.views WHERE table_schema = 'reporting'"
    ).fetchall()
    assert {name for (name,) in rows} >= set(VIEWS)
    return [name for (name,) in rows]


@pytest.mark.parametrize("table", TABLES)
def test_reader_cannot_read_base_tables(reader, generated: Generated, table: str):
    with pytest.raises(errors.InsufficientPrivilege):
        reader.execute(f"SELECT * FROM public.{table} LIMIT 1")


def test_reader_cannot_read_a_history_partition(reader, generated: Generated):
    with psycopg.connect(generated.dsn) as conn:
        (partition,) = conn.execute(
            "SELECT min(c.relname) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'message_history'"
        ).fetchone()  # type: ignore[misc]
    with pytest.raises(errors.InsufficientPrivilege):
        reader.execute(f"SELECT * FROM public.{partition} LIMIT 1")


DENIED = errors.InsufficientPrivilege
# Writing into the views fails even before privileges are checked: they are not updatable.
NOT_UPDATABLE = errors.ObjectNotInPrerequisiteState
WRITES = [
    ("INSERT INTO public.namespaces (name) VALUES ('intruder')", DENIED),
    ("UPDATE public.messages SET priority = 0", DENIED),
    ("DELETE FROM public.message_history", DENIED),
    ("TRUNCATE public.messages", DENIED),
    ("DELETE FROM reporting.dead_letters", NOT_UPDATABLE),
    ("UPDATE reporting.messages SET state = 'pending'", NOT_UPDATABLE),
    ("CREATE TABLE public.loot (x int)", DENIED),
    ("CREATE VIEW reporting.loot AS SELECT 1", DENIED),
    ("DROP VIEW reporting.dead_letters", DENIED),
    ("ALTER VIEW reporting.messages RENAME TO gone", DENIED),
    ("GRANT SELECT ON public.tokens TO PUBLIC", DENIED),
    (f"ALTER ROLE {READER_ROLE} SUPERUSER", DENIED),
]


@pytest.mark.parametrize(("statement", "error"), WRITES)
def test_reader_writes_are_refused_by_privileges(reader, statement: str, error: type[Exception]):
    # Even in a transaction the role makes read-write on purpose, the write is refused.
    with reader.transaction(force_rollback=True):
        reader.execute("SET TRANSACTION READ WRITE")
        with pytest.raises(error):
            reader.execute(statement)


def test_reader_sessions_start_read_only_on_the_reporting_schema(reader):
    assert reader.execute("SHOW default_transaction_read_only").fetchone() == ("on",)
    assert reader.execute("SHOW search_path").fetchone() == ("reporting",)
    with pytest.raises(errors.ReadOnlySqlTransaction):
        reader.execute("INSERT INTO public.namespaces (name) VALUES ('intruder')")
    # The search path lets an analyst leave out the schema.
    assert reader.execute("SELECT count(*) FROM dead_letters").fetchone()[0] > 0


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    for name in list(os.environ):
        if name.startswith("SUNDIAL_"):
            monkeypatch.delenv(name)
    get_settings.cache_clear()
    try:
        yield CliRunner()
    finally:
        get_settings.cache_clear()


def test_cli_create_reader_generates_a_password_once_then_keeps_it(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch, database_url: str, postgres
):
    monkeypatch.setenv("SUNDIAL_DATABASE_URL", database_url)
    role = f"reader_{uuid.uuid4().hex[:12]}"
    first = cli.invoke(main, ["db", "create-reader", "--role", role])
    assert first.exit_code == 0, first.output
    assert f"Role {role} created" in first.output
    assert "shown only now" in first.output
    again = cli.invoke(main, ["db", "create-reader", "--role", role])
    assert again.exit_code == 0, again.output
    assert f"Role {role} updated" in again.output
    assert "shown only now" not in again.output
    piped = cli.invoke(main, ["db", "create-reader", "--role", role, "--password-stdin"],
                       input="from stdin\n")  # fmt: skip
    assert piped.exit_code == 0, piped.output
    assert "dead_letters" in piped.output
    both = cli.invoke(main, ["db", "create-reader", "--password-stdin", "--generate-password"])
    assert both.exit_code == 2
    assert "exclude each other" in both.output


def test_downgrade_and_upgrade_with_the_reader_in_place(postgres):
    name = postgres.create()
    url, dsn = postgres.url(name), postgres.dsn(name)
    try:
        create_reader(url)
        migrate.downgrade(url, "0002")
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT to_regnamespace('reporting')").fetchone() == (None,)
        migrate.upgrade(url)
        assert create_reader(url).views == reporting_views(dsn)
        with psycopg.connect(as_role(dsn, READER_ROLE), autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM reporting.messages").fetchone() == (0,)
    finally:
        postgres.drop(name)
