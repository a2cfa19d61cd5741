"""The ``sundial`` admin CLI, run in-process with click's CliRunner against this test's database.

``SUNDIAL_DATABASE_URL`` points the CLI at the per-test database (the settings are cached, so the
cache is cleared around each test). The commands call ``asyncio.run`` themselves, so these tests
are plain functions, not coroutines; what the CLI did is checked with the queue service on a
short-lived engine of its own, and through the CLI's own listings.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
import pytest
from alembic.config import Config
from click.testing import CliRunner, Result

from app.bootstrap.commands import main
from app.bootstrap.database import create_engine
from app.config import get_settings
from app.core.models import Principal
from app.core.service import QueueService
from app.core.validation import Limits
from app.store import migrate
from app.store.postgres import PostgresStore
from tests.conftest import ADMIN_TOKEN

if TYPE_CHECKING:
    from tests.conftest import TestDatabase

T = TypeVar("T")
Invoke = Callable[..., Result]  # invoke(*args, input=None)


def _service_call(
    database_url: str,
    work: Callable[[QueueService], Coroutine[Any, Any, T]],
    admin_token: str = ADMIN_TOKEN,
    sealing_secret: str | None = None,
) -> T:
    """Run one queue-service call on a fresh engine (the CLI's own loop is gone by now)."""

    async def call() -> T:
        engine = create_engine(database_url, pool_size=1)
        try:
            service = QueueService(
                PostgresStore(engine),
                limits=Limits(),
                admin_token=admin_token,
                sealing_secret=sealing_secret,
            )
            return await work(service)
        finally:
            await engine.dispose()

    return asyncio.run(call())


def _authenticate(database_url: str, secret: str) -> Principal | None:
    return _service_call(database_url, lambda service: service.authenticate(secret))


@pytest.fixture
def alembic_to_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Alembic prints to the ``sys.stdout`` of the time it was imported; send it to the one of
    the time a command runs, so that CliRunner captures it."""
    original = migrate.alembic_config

    def config(url: str) -> Config:
        made = original(url)
        made.stdout = sys.stdout
        return made

    monkeypatch.setattr(migrate, "alembic_config", config)


@pytest.fixture
def cli_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], Invoke]]:
    """``cli_on(url)``: run ``sundial ARGS…`` against the database at ``url``."""
    for name in list(os.environ):
        if name.startswith("SUNDIAL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SUNDIAL_ADMIN_TOKEN", ADMIN_TOKEN)
    runner = CliRunner()

    def on(database_url: str) -> Invoke:
        monkeypatch.setenv("SUNDIAL_DATABASE_URL", database_url)
        get_settings.cache_clear()

        def invoke(*args: str, input: str | None = None) -> Result:
            return runner.invoke(main, list(args), input=input)

        return invoke

    try:
        yield on
    finally:
        get_settings.cache_clear()


@pytest.fixture
def cli(cli_on: Callable[[str], Invoke], database_url: str) -> Invoke:
    """Run ``sundial ARGS…`` against this test's database; returns click's Result."""
    return cli_on(database_url)


def ok(result: Result) -> Any:
    """The JSON a successful command printed."""
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout) if result.stdout.strip() else None


def failed(result: Result, exit_code: int = 1) -> str:
    """The error output of a command that failed cleanly (no traceback)."""
    assert result.exit_code == exit_code, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.stdout == "", result.stdout
    return result.stderr


# --- namespaces ----------------------------------------------------------------------------------


def test_namespace_create_list_delete(cli: Invoke, database_url: str) -> None:
    created = ok(cli("namespace", "create", "alpha", "--description", "first tenant"))
    assert created["name"] == "alpha"
    assert created["description"] == "first tenant"
    assert created["created_at"]
    ok(cli("namespace", "create", "beta"))

    listed = ok(cli("namespace", "list"))
    assert [(n["name"], n["description"]) for n in listed] == [
        ("alpha", "first tenant"),
        ("beta", ""),
    ]

    assert ok(cli("namespace", "delete", "alpha", "--yes")) is None
    assert [n["name"] for n in ok(cli("namespace", "list"))] == ["beta"]


def test_namespace_delete_asks_first(cli: Invoke) -> None:
    ok(cli("namespace", "create", "alpha"))
    refused = cli("namespace", "delete", "alpha", input="n\n")
    assert refused.exit_code == 1
    assert "Aborted" in refused.output
    assert [n["name"] for n in ok(cli("namespace", "list"))] == ["alpha"]

    confirmed = cli("namespace", "delete", "alpha", input="y\n")
    assert confirmed.exit_code == 0, confirmed.output
    assert ok(cli("namespace", "list")) == []


def test_namespace_delete_takes_its_queues_and_tokens(cli: Invoke, database_url: str) -> None:
    ok(cli("namespace", "create", "alpha"))
    secret = ok(cli("token", "issue", "alpha"))["token"]
    ok(cli("queue", "create", "alpha/jobs"))
    ok(cli("namespace", "delete", "alpha", "--yes"))
    assert _authenticate(database_url, secret) is None
    ok(cli("namespace", "create", "alpha"))
    assert ok(cli("queue", "list", "alpha")) == []


def test_creating_an_existing_namespace_is_a_conflict(cli: Invoke) -> None:
    ok(cli("namespace", "create", "alpha"))
    assert "Error: conflict: " in failed(cli("namespace", "create", "alpha"))


def test_an_invalid_namespace_name_is_a_validation_error(cli: Invoke) -> None:
    assert "Error: validation_error: " in failed(cli("namespace", "create", "no spaces"))
    assert ok(cli("namespace", "list")) == []


# --- tokens --------------------------------------------------------------------------------------


def test_token_issue_list_revoke(cli: Invoke, database_url: str) -> None:
    ok(cli("namespace", "create", "alpha"))
    issued = ok(cli("token", "issue", "alpha", "--label", "ci"))
    assert issued["namespace"] == "alpha"
    assert issued["label"] == "ci"
    secret, token_id = issued["token"], issued["id"]

    principal = _authenticate(database_url, secret)
    assert principal == Principal(is_admin=False, namespace="alpha", token_id=token_id)
    assert principal.may_access("alpha")
    assert not principal.may_access("beta")

    listed = ok(cli("token", "list", "alpha"))
    assert [(t["id"], t["label"]) for t in listed] == [(token_id, "ci")]
    assert secret not in json.dumps(listed)  # secrets are shown once, when issued

    assert ok(cli("token", "revoke", "alpha", token_id)) is None
    assert _authenticate(database_url, secret) is None
    assert ok(cli("token", "list", "alpha")) == []


def test_token_rate_limits_are_set_when_issued_and_changed(cli: Invoke, database_url: str) -> None:
    ok(cli("namespace", "create", "alpha"))
    issued = ok(cli("token", "issue", "alpha", "--read-rate", "50"))
    assert (issued["read_rate"], issued["write_rate"]) == (50.0, None)
    principal = _authenticate(database_url, issued["token"])
    assert principal is not None
    assert (principal.read_rate, principal.write_rate) == (50.0, None)

    # An option left out stays; `none` lifts a limit.
    changed = ok(cli("token", "limit", "alpha", issued["id"], "--write-rate", "2.5"))
    assert (changed["read_rate"], changed["write_rate"]) == (50.0, 2.5)
    changed = ok(cli("token", "limit", "alpha", issued["id"], "--read-rate", "none"))
    assert (changed["read_rate"], changed["write_rate"]) == (None, 2.5)
    (listed,) = ok(cli("token", "list", "alpha"))
    assert (listed["read_rate"], listed["write_rate"]) == (None, 2.5)

    refused = cli("token", "limit", "alpha", issued["id"], "--read-rate", "-1")
    assert refused.exit_code != 0
    assert "read_rate" in refused.output
    assert cli("token", "limit", "alpha", issued["id"], "--read-rate", "fast").exit_code != 0


def test_token_issue_sqs_prints_an_access_key(cli: Invoke, database_url: str) -> None:
    """``token issue --sqs`` prints an access key id and its secret access key, once; the
    database holds the secret only sealed, under the admin token when no sealing key is set (as
    the server reads it); ``token list`` shows the key without its secret; revoking ends it."""
    ok(cli("namespace", "create", "alpha"))
    issued = ok(cli("token", "issue", "alpha", "--sqs", "--label", "app"))
    key_id, secret, token_id = issued["access_key_id"], issued["secret_access_key"], issued["id"]
    assert re.fullmatch(r"SDLK[A-Z2-7]{16}", key_id)
    assert len(secret) == 40
    assert (issued["namespace"], issued["label"], issued.get("token")) == ("alpha", "app", None)
    assert issued["kind"] == "sqs"
    assert _authenticate(database_url, secret) is None  # not a bearer token

    opened = _service_call(database_url, lambda s: s.access_key_secret(key_id))
    assert opened == (Principal(is_admin=False, namespace="alpha", token_id=token_id), secret)
    stored = _service_call(database_url, lambda s: s.store.find_access_key(key_id))
    assert stored is not None
    assert secret.encode() not in stored.sealed_secret

    bearer = ok(cli("token", "issue", "alpha"))
    listed = ok(cli("token", "list", "alpha"))
    assert sorted((t["id"], t["kind"], t["access_key_id"]) for t in listed) == sorted(
        [(token_id, "sqs", key_id), (bearer["id"], "bearer", None)]
    )
    assert secret not in json.dumps(listed)

    ok(cli("token", "revoke", "alpha", token_id))
    assert _service_call(database_url, lambda s: s.access_key_secret(key_id)) is None
    assert [t["id"] for t in ok(cli("token", "list", "alpha"))] == [bearer["id"]]


def test_an_sqs_sealing_key_seals_access_keys_instead_of_the_admin_token(
    cli_on: Callable[[str], Invoke], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``SUNDIAL_SQS_SEALING_KEY`` set, access keys are sealed under it: a server with that
    key opens them whatever its admin token, and one with only the admin token cannot."""
    sealing_key = "a-sealing-key-of-the-tests-" + "x" * 16
    monkeypatch.setenv("SUNDIAL_SQS_SEALING_KEY", sealing_key)
    cli = cli_on(database_url)
    ok(cli("namespace", "create", "alpha"))
    issued = ok(cli("token", "issue", "alpha", "--sqs"))
    key_id, secret = issued["access_key_id"], issued["secret_access_key"]

    assert _service_call(database_url, lambda s: s.access_key_secret(key_id)) is None
    opened = _service_call(
        database_url,
        lambda s: s.access_key_secret(key_id),
        admin_token="another-admin-token-of-32-characters",
        sealing_secret=sealing_key,
    )
    assert opened is not None
    assert opened[1] == secret


def test_revoking_one_token_leaves_the_others(cli: Invoke, database_url: str) -> None:
    ok(cli("namespace", "create", "alpha"))
    first = ok(cli("token", "issue", "alpha"))
    second = ok(cli("token", "issue", "alpha"))
    assert first["token"] != second["token"]
    ok(cli("token", "revoke", "alpha", first["id"]))
    assert _authenticate(database_url, first["token"]) is None
    assert _authenticate(database_url, second["token"]) is not None


def test_revoking_an_unknown_token_is_not_found(cli: Invoke) -> None:
    ok(cli("namespace", "create", "alpha"))
    assert "Error: not_found: " in failed(cli("token", "revoke", "alpha", "no-such-token"))


# --- queues --------------------------------------------------------------------------------------


def test_queue_create_list_show(cli: Invoke) -> None:
    ok(cli("namespace", "create", "alpha"))
    created = ok(cli("queue", "create", "alpha/jobs", "--lease-seconds", "60"))
    assert created["created"] is True
    queue = created["queue"]
    assert (queue["namespace"], queue["name"]) == ("alpha", "jobs")
    assert queue["config"]["kind"] == "simple"
    assert queue["config"]["exclusive_key"] is None
    assert queue["config"]["lease_seconds"] == 60

    again = ok(cli("queue", "create", "alpha/jobs", "--lease-seconds", "60"))
    assert again["created"] is False  # same configuration: nothing changes
    assert again["queue"]["id"] == queue["id"]

    listed = ok(cli("queue", "list", "alpha"))
    assert [item["queue"]["name"] for item in listed] == ["jobs"]
    assert all(n == 0 for n in listed[0]["counts"].values())

    shown = ok(cli("queue", "show", "alpha/jobs"))
    assert shown["queue"]["id"] == queue["id"]
    assert shown["queue"]["config"]["lease_seconds"] == 60
    assert shown["stats"]["oldest_pending_age_seconds"] is None


def test_queue_create_exclusive(cli: Invoke) -> None:
    ok(cli("namespace", "create", "alpha"))
    created = ok(cli("queue", "create", "alpha/orders", "--exclusive-key", "customer"))
    assert created["queue"]["config"]["kind"] == "exclusive"
    assert created["queue"]["config"]["exclusive_key"] == "customer"

    shown = ok(cli("queue", "show", "alpha/orders"))
    assert shown["queue"]["config"]["exclusive_key"] == "customer"
    # The kind of a queue never changes.
    assert "Error: conflict: " in failed(cli("queue", "create", "alpha/orders"))
    assert ok(cli("queue", "show", "alpha/orders"))["queue"]["config"]["kind"] == "exclusive"


def test_queue_create_with_a_filter_key(cli: Invoke) -> None:
    ok(cli("namespace", "create", "alpha"))
    created = ok(cli("queue", "create", "alpha/per-tenant", "--filter-key", "tenant"))
    assert created["queue"]["config"]["filter_keys"] == ["tenant"]
    assert created["queue"]["config"]["kind"] == "simple"
    assert "Error: conflict: " in failed(cli("queue", "create", "alpha/per-tenant"))
    two = ("--filter-key", "tenant", "--filter-key", "region")
    created = ok(cli("queue", "create", "alpha/two", *two))
    assert created["queue"]["config"]["filter_keys"] == ["tenant", "region"]
    too_many = failed(cli("queue", "create", "alpha/three", *two, "--filter-key", "zone"))
    assert "filter_keys: may name at most 2 keys" in too_many


def test_queue_create_with_an_ordering(cli: Invoke) -> None:
    ok(cli("namespace", "create", "alpha"))
    created = ok(cli("queue", "create", "alpha/by-due", "--ordering", "due"))
    assert created["queue"]["config"]["ordering"] == "due"
    assert "Error: conflict: " in failed(cli("queue", "create", "alpha/by-due"))


def test_queue_pause_and_resume(cli: Invoke) -> None:
    ok(cli("namespace", "create", "alpha"))
    ok(cli("queue", "create", "alpha/jobs"))

    def switches(queue: dict[str, Any]) -> tuple[bool, bool]:
        return queue["config"]["enqueue_paused"], queue["config"]["dequeue_paused"]

    assert switches(ok(cli("queue", "pause", "alpha/jobs"))) == (True, True)
    assert switches(ok(cli("queue", "show", "alpha/jobs"))["queue"]) == (True, True)
    assert switches(ok(cli("queue", "resume", "alpha/jobs"))) == (False, False)
    assert switches(ok(cli("queue", "pause", "alpha/jobs", "--no-dequeue"))) == (True, False)
    ok(cli("queue", "resume", "alpha/jobs"))
    assert switches(ok(cli("queue", "pause", "alpha/jobs", "--no-enqueue"))) == (False, True)
    assert switches(ok(cli("queue", "show", "alpha/jobs"))["queue"]) == (False, True)


@pytest.mark.parametrize(
    "args",
    [
        ("queue", "create", "nope/jobs"),
        ("queue", "list", "nope"),
        ("queue", "show", "nope/jobs"),
        ("queue", "pause", "nope/jobs"),
        ("queue", "resume", "nope/jobs"),
        ("token", "issue", "nope"),
        ("token", "list", "nope"),
        ("token", "revoke", "nope", "some-id"),
        ("namespace", "delete", "nope", "--yes"),
    ],
    ids=" ".join,
)
def test_a_missing_namespace_is_not_found(cli: Invoke, args: tuple[str, ...]) -> None:
    error = failed(cli(*args))
    assert error.startswith("Error: not_found: "), error
    assert "nope" in error or "some-id" in error, error  # names what is missing


def test_a_missing_queue_is_not_found(cli: Invoke) -> None:
    ok(cli("namespace", "create", "alpha"))
    for command in ("show", "pause", "resume"):
        error = failed(cli("queue", command, "alpha/missing"))
        assert error.startswith("Error: not_found: "), error


@pytest.mark.parametrize("command", ["create", "show", "pause", "resume"])
@pytest.mark.parametrize("path", ["alpha", "alpha/", "/jobs", ""])
def test_a_queue_path_needs_namespace_and_queue(cli: Invoke, command: str, path: str) -> None:
    ok(cli("namespace", "create", "alpha"))
    error = failed(cli("queue", command, path), exit_code=2)  # a usage error
    assert "Invalid value for QUEUE: use NAMESPACE/QUEUE" in error
    assert ok(cli("queue", "list", "alpha")) == []


# --- database ------------------------------------------------------------------------------------


@pytest.fixture
def empty_database(postgres: TestDatabase) -> Iterator[str]:
    """SQLAlchemy URL of a brand-new database without any schema."""
    name = postgres.create(template=None)
    yield postgres.url(name)
    postgres.drop(name)


def test_db_current_history_check(cli: Invoke, alembic_to_runner: None) -> None:
    head = migrate.head_revision()
    assert head is not None
    current = cli("db", "current")
    assert current.exit_code == 0, current.output
    assert f"Rev: {head} (head)" in current.stdout

    history = cli("db", "history")
    assert history.exit_code == 0, history.output
    assert f"Rev: {head} (head)" in history.stdout

    check = cli("db", "check")
    assert check.exit_code == 0, check.output
    assert "No new upgrade operations detected" in check.stdout


def test_db_upgrade_of_an_empty_database(
    cli_on: Callable[[str], Invoke], empty_database: str, alembic_to_runner: None
) -> None:
    cli = cli_on(empty_database)
    before = cli("db", "current")
    assert before.exit_code == 0, before.output
    assert "Rev:" not in before.stdout  # no revision yet

    upgraded = cli("db", "upgrade")
    assert upgraded.exit_code == 0, upgraded.output
    assert f"Rev: {migrate.head_revision()} (head)" in cli("db", "current").stdout
    assert ok(cli("namespace", "list")) == []


def test_db_upgrade_migrates_and_registers_every_pool(
    cli_on: Callable[[str], Invoke],
    empty_database: str,
    postgres: TestDatabase,
    monkeypatch: pytest.MonkeyPatch,
    alembic_to_runner: None,
) -> None:
    pool_b = postgres.url(postgres.create(template=None))
    monkeypatch.setenv("SUNDIAL_POOLS", json.dumps({"b": pool_b}))
    cli = cli_on(empty_database)
    upgraded = cli("db", "upgrade")
    assert upgraded.exit_code == 0, upgraded.output
    current = cli("db", "current").stdout
    head = migrate.head_revision()
    assert current.count(f"Rev: {head} (head)") == 2
    assert "pool default:" in current
    assert "pool b:" in current
    made = ok(cli("namespace", "create", "far", "--pool", "b"))
    assert made["pool"] == "b"
    assert [n["pool"] for n in ok(cli("namespace", "list"))] == ["b"]
    # The same database under a second name is refused, saying why.
    monkeypatch.setenv("SUNDIAL_POOLS", json.dumps({"b": pool_b, "c": pool_b}))
    get_settings.cache_clear()
    refused = cli("db", "upgrade")
    assert refused.exit_code != 0
    assert "registered as pool 'b'" in refused.output


def test_pools_list_and_a_move_between_them(
    cli_on: Callable[[str], Invoke],
    database_url: str,
    postgres: TestDatabase,
    monkeypatch: pytest.MonkeyPatch,
    alembic_to_runner: None,
) -> None:
    pool_b = postgres.url(postgres.create())
    monkeypatch.setenv("SUNDIAL_POOLS", json.dumps({"b": pool_b}))
    cli = cli_on(database_url)
    assert cli("db", "upgrade").exit_code == 0
    ok(cli("namespace", "create", "far", "--pool", "b"))
    ok(cli("queue", "create", "far/q"))
    listed = {p["name"]: p for p in ok(cli("pools", "list"))}
    assert listed["default"] == {
        "name": "default",
        "number": 0,
        "available": True,
        "namespaces": 0,
        "waiting": 0,
    }
    assert (listed["b"]["number"], listed["b"]["namespaces"]) == (1, 1)

    moved = cli("pools", "move", "far", "--to", "default")
    report = ok(moved)
    assert (report["source"], report["target"]) == ("b", "default")
    for phase in ("copying", "frozen", "draining", "flipped"):
        assert phase in moved.stderr
    assert [n["pool"] for n in ok(cli("namespace", "list"))] == ["default"]
    assert ok(cli("pools", "moves")) == []
    assert "on pool default already" in cli("pools", "move", "far", "--to", "default").stderr
    assert "no move of namespace far" in failed(cli("pools", "abort", "far"))
    assert "unknown pool 'nowhere'" in failed(cli("pools", "move", "far", "--to", "nowhere"))


def test_db_check_fails_when_the_schema_drifted(
    cli: Invoke, postgres: TestDatabase, database_url: str, alembic_to_runner: None
) -> None:
    from sqlalchemy.engine import make_url

    name = make_url(database_url).database
    assert name is not None
    with psycopg.connect(postgres.dsn(name), autocommit=True) as conn:
        conn.execute("ALTER TABLE namespaces ADD COLUMN drift integer")
    drifted = cli("db", "check")
    assert drifted.exit_code == 1
    assert "Error:" in drifted.output
    assert "drift" in drifted.output
