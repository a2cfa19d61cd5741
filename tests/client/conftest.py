"""Client fixtures: one real server over a real socket for the whole run
(:mod:`tests.client.server`, on a database of its own), and for each test a fresh namespace with
a token, clients holding it, the name of a queue in it, and ``sundial`` run with that token."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
from click.testing import CliRunner, Result

from app.bootstrap.commands import main
from app.client import AsyncClient, Client, RetryPolicy
from tests.client.server import running_server
from tests.conftest import ADMIN_TOKEN, TestDatabase

FAST_RETRY = RetryPolicy(attempts=3, max_seconds=5, initial_wait=0.05, max_wait=0.5)
_names = itertools.count(1)


@pytest.fixture(scope="session")
def server(postgres: TestDatabase) -> Iterator[str]:
    database = postgres.create()
    try:
        with running_server(postgres.url(database)) as url:
            yield url
    finally:
        postgres.drop(database)


@pytest.fixture
def admin(server: str) -> Iterator[Client]:
    with Client(server, ADMIN_TOKEN, retry=FAST_RETRY) as client:
        yield client


@pytest.fixture
def namespace(admin: Client) -> str:
    """A namespace of this test's own."""
    name = f"shop-{next(_names)}"
    admin.create_namespace(name)
    return name


@pytest.fixture
def token(admin: Client, namespace: str) -> str:
    """A token of :func:`namespace`."""
    return admin.issue_token(namespace, "tests").token


@pytest.fixture
def q(namespace: str) -> str:
    """A queue name (``namespace/jobs``) in this test's namespace; not created."""
    return f"{namespace}/jobs"


@pytest.fixture
def client(server: str, token: str) -> Iterator[Client]:
    with Client(server, token, retry=FAST_RETRY) as client:
        yield client


@pytest.fixture
async def aclient(server: str, token: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(server, token, retry=FAST_RETRY) as client:
        yield client


Sundial = Callable[..., Result]
"""``sundial(*args, code=0, stdin=None)``: the result of ``sundial ARGS…``."""


@pytest.fixture
def sundial(server: str, token: str) -> Sundial:
    """Run ``sundial ARGS…`` in-process with SUNDIAL_URL/SUNDIAL_TOKEN set; its result (its exit
    status asserted to be ``code``)."""
    runner = CliRunner()

    def run(*args: str, code: int = 0, stdin: str | None = None) -> Result:
        env = {"SUNDIAL_URL": server, "SUNDIAL_TOKEN": token}
        result = runner.invoke(main, list(args), env=env, input=stdin, catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result

    return run
