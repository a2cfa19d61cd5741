"""Failed authentication is throttled per client address: after ``auth_failure_limit`` wrong
guessable secrets (API) or refused sign-ins (dashboard) within the window, every guessable secret
from that address is answered 429 ``rate_limited`` with ``Retry-After``, unread; other addresses
are not affected; the window frees the address again. Namespace tokens, which cannot be guessed,
are never throttled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.server import create_app
from app.config import Settings
from app.core.models import Principal
from app.dashboard.security import SESSION_COOKIE
from app.web.throttle import UNKNOWN_ADDRESS, client_address
from tests.api.conftest import assert_error, make_settings, serve
from tests.conftest import ADMIN_TOKEN
from tests.dashboard.conftest import Browser, csrf_of

ATTACKER = ("203.0.113.7", 40000)
NEIGHBOUR = ("198.51.100.20", 40001)
WRONG = {"Authorization": "Bearer sdl_not-a-token-this-server-issued"}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@dataclass
class Server:
    """The app with its lifespan running, and clients that call it from chosen addresses."""

    app: Litestar
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    def client_at(self, address: tuple[str, int]) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app, client=address)
        client = httpx.AsyncClient(transport=transport, base_url="http://sundial.test")
        self.clients.append(client)
        return client


@asynccontextmanager
async def running(settings: Settings, engine: AsyncEngine) -> AsyncIterator[Server]:
    server = Server(create_app(settings, engine=engine))
    async with serve(server.app):
        try:
            yield server
        finally:
            for client in server.clients:
                await client.aclose()


def throttled(database_url: str, limit: int, window: int = 60) -> Settings:
    return make_settings(database_url, auth_failure_limit=limit, auth_failure_window_seconds=window)


async def test_an_address_that_fails_too_often_is_refused_before_its_token_is_read(
    database_url: str, engine: AsyncEngine
) -> None:
    async with running(throttled(database_url, limit=3), engine) as server:
        attacker, neighbour = server.client_at(ATTACKER), server.client_at(NEIGHBOUR)
        for _ in range(3):
            assert_error(await attacker.get("/v1/namespaces", headers=WRONG), 401, "unauthorized")
        refused = await attacker.get("/v1/namespaces", headers=WRONG)
        error = assert_error(refused, 429, "rate_limited")
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert error["details"]["retry_after_seconds"] == int(refused.headers["retry-after"])
        # The right token does not help: the address is refused before any token is read.
        assert_error(await attacker.get("/v1/namespaces", headers=ADMIN), 429, "rate_limited")
        # Another address is not affected, either way.
        assert (await neighbour.get("/v1/namespaces", headers=ADMIN)).status_code == 200
        assert_error(await neighbour.get("/v1/namespaces", headers=WRONG), 401, "unauthorized")


async def test_no_token_is_looked_up_while_an_address_is_refused(
    database_url: str, engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(throttled(database_url, limit=1), engine) as server:
        attacker = server.client_at(ATTACKER)
        service = server.app.state.runtime.service
        looked_up: list[str] = []
        authenticate: Callable[[str, str | None], Awaitable[Principal | None]] = (
            service.authenticate
        )

        async def counting(token: str, namespace: str | None = None) -> Principal | None:
            looked_up.append(token)
            return await authenticate(token, namespace)

        monkeypatch.setattr(service, "authenticate", counting)
        assert (await attacker.get("/v1/namespaces", headers=WRONG)).status_code == 401
        assert len(looked_up) == 1
        for headers in (WRONG, ADMIN):
            assert (await attacker.get("/v1/namespaces", headers=headers)).status_code == 429
        assert len(looked_up) == 1


async def test_only_unknown_tokens_count(database_url: str, engine: AsyncEngine) -> None:
    async with running(throttled(database_url, limit=2), engine) as server:
        client = server.client_at(ATTACKER)
        for _ in range(10):
            assert (await client.get("/v1/namespaces", headers=ADMIN)).status_code == 200
            assert (await client.get("/v1/namespaces")).status_code == 401  # no token at all
            assert (await client.get("/healthz")).status_code == 200
        for _ in range(2):
            assert (await client.get("/v1/namespaces", headers=WRONG)).status_code == 401
        assert (await client.get("/v1/namespaces", headers=ADMIN)).status_code == 429


async def test_the_window_frees_the_address(database_url: str, engine: AsyncEngine) -> None:
    async with running(throttled(database_url, limit=1, window=1), engine) as server:
        client = server.client_at(ATTACKER)
        assert (await client.get("/v1/namespaces", headers=WRONG)).status_code == 401
        refused = await client.get("/v1/namespaces", headers=ADMIN)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
        await asyncio.sleep(1.1)  # what Retry-After said, and a margin: the failure has aged out
        assert (await client.get("/v1/namespaces", headers=ADMIN)).status_code == 200


async def test_a_limit_of_zero_turns_the_throttle_off(
    database_url: str, engine: AsyncEngine
) -> None:
    async with running(throttled(database_url, limit=0), engine) as server:
        client = server.client_at(ATTACKER)
        for _ in range(30):
            assert (await client.get("/v1/namespaces", headers=WRONG)).status_code == 401
        assert (await client.get("/v1/namespaces", headers=ADMIN)).status_code == 200


async def test_the_default_throttle_is_on(database_url: str, engine: AsyncEngine) -> None:
    defaults = Settings.model_fields
    limit = defaults["auth_failure_limit"].default
    window = defaults["auth_failure_window_seconds"].default
    assert (limit, window) == (20, 60)  # as docs/operations.md and docs/security.md say
    async with running(throttled(database_url, limit, window), engine) as server:
        client = server.client_at(ATTACKER)
        for _ in range(20):
            assert (await client.get("/v1/namespaces", headers=WRONG)).status_code == 401
        assert (await client.get("/v1/namespaces", headers=WRONG)).status_code == 429


async def test_dashboard_sign_ins_are_throttled_with_the_api(
    database_url: str, engine: AsyncEngine
) -> None:
    async with running(throttled(database_url, limit=2), engine) as server:
        browser = Browser(server.client_at(ATTACKER))
        assert (await browser.sign_in("not-the-admin-token")).status_code == 401
        assert (await browser.client.get("/v1/namespaces", headers=WRONG)).status_code == 401
        # Two failures, one of each kind: the address is refused on both sides now.
        assert (await browser.client.get("/v1/namespaces", headers=ADMIN)).status_code == 429
        page = await browser.get("/dashboard/login")
        refused = await browser.post_form(
            "/dashboard/login", [("token", ADMIN_TOKEN), ("_csrf_token", csrf_of(page))]
        )
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert "too many failed authentications" in refused.text
        assert SESSION_COOKIE not in refused.cookies
        # The neighbour signs in.
        neighbour = Browser(server.client_at(NEIGHBOUR))
        assert (await neighbour.sign_in()).status_code == 303


async def test_an_empty_sign_in_form_does_not_count(database_url: str, engine: AsyncEngine) -> None:
    async with running(throttled(database_url, limit=1), engine) as server:
        browser = Browser(server.client_at(ATTACKER))
        for _ in range(3):
            assert (await browser.sign_in("")).status_code == 401
        assert (await browser.sign_in()).status_code == 303


@pytest.mark.parametrize(
    ("client", "key"),
    [
        (("192.0.2.1", 1), "192.0.2.1"),
        (("2001:db8:1:2:3:4:5:6", 1), "2001:db8:1:2::/64"),
        (("2001:db8:1:2:ffff::1", 1), "2001:db8:1:2::/64"),  # the same /64: one count
        (("::ffff:192.0.2.1", 1), "192.0.2.1"),
        (("fe80::1%eth0", 1), "fe80::/64"),
        (("testclient", 1), "testclient"),
        (None, UNKNOWN_ADDRESS),
    ],
)
def test_the_address_a_failure_counts_against(client: Any, key: str) -> None:
    connection: Any = SimpleNamespace(scope={"client": client})
    assert client_address(connection) == key


async def test_namespace_tokens_are_never_throttled(database_url: str, engine: AsyncEngine) -> None:
    """A program that keeps a revoked namespace token gets 401s, and neither it nor its
    neighbours behind the same address are refused for it."""
    async with running(throttled(database_url, limit=3), engine) as server:
        client = server.client_at(ATTACKER)
        assert (await client.post("/v1/namespaces", json={"name": "ns"}, headers=ADMIN)).is_success
        issued = await client.post("/v1/namespaces/ns/tokens", json={}, headers=ADMIN)
        token, token_id = issued.json()["token"], issued.json()["id"]
        revoke = await client.delete(f"/v1/namespaces/ns/tokens/{token_id}", headers=ADMIN)
        assert revoke.status_code == 204
        revoked = {"Authorization": f"Bearer {token}"}
        for _ in range(10):
            assert_error(
                await client.get("/v1/namespaces/ns/queues", headers=revoked), 401, "unauthorized"
            )
        fresh = await client.post("/v1/namespaces/ns/tokens", json={}, headers=ADMIN)
        assert fresh.status_code == 201  # the admin token still works from this address
        own = {"Authorization": f"Bearer {fresh.json()['token']}"}
        assert (await client.get("/v1/namespaces/ns/queues", headers=own)).status_code == 200
