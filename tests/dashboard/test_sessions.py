"""Dashboard sessions live on the server (``dashboard_sessions``): signing out ends the session
for every copy of the cookie, in this app and in another app on the same database (another
worker process, another server); an expired session is refused; use renews a session; sign-ins
prune the expired rows."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import sqlalchemy as sa
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.server import create_app
from app.config import Settings
from app.dashboard.security import SESSION_COOKIE, SESSION_IDLE_SECONDS
from tests.api.conftest import serve
from tests.conftest import ADMIN_TOKEN
from tests.dashboard.conftest import Browser, csrf_of
from tests.helpers import execute


@pytest.fixture
async def other_server(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A second app on the same database, with its own engine and memory: what another worker
    process or another server sees."""
    other: Litestar = create_app(settings)
    async with serve(other) as client:
        yield client


def copy_of(signed_in: Browser) -> str:
    """The signed-in browser's session cookie, as an attacker who copied it holds it."""
    cookie = signed_in.client.cookies.get(SESSION_COOKIE)
    assert cookie
    return cookie


async def answers_with(client: httpx.AsyncClient, cookie: str) -> tuple[int, int]:
    """The statuses of a page and of the live data, for a request carrying only ``cookie``."""
    headers = {"Cookie": f"{SESSION_COOKIE}={cookie}"}
    client.cookies.clear()
    page = await client.get("/dashboard/", headers=headers)
    live = await client.get("/dashboard/api/overview", headers=headers)
    return page.status_code, live.status_code


async def session_rows(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return (await conn.execute(sa.text("SELECT count(*) FROM dashboard_sessions"))).scalar_one()


async def test_a_copied_cookie_stops_working_at_sign_out_in_every_app(
    signed_in: Browser, client: httpx.AsyncClient, app: Litestar, other_server: httpx.AsyncClient
) -> None:
    stolen = copy_of(signed_in)
    async with serve(app) as thief:  # another client of the same app: no shared cookie jar
        assert await answers_with(thief, stolen) == (200, 200)
        assert await answers_with(other_server, stolen) == (200, 200)

        response = await signed_in.submit("/dashboard/", "/dashboard/logout", {})
        assert response.status_code == 303

        page, live = await answers_with(thief, stolen)
        assert (page, live) == (303, 401)
        page, live = await answers_with(other_server, stolen)
        assert (page, live) == (303, 401)
    redirect = await other_server.get(
        "/dashboard/", headers={"Cookie": f"{SESSION_COOKIE}={stolen}"}
    )
    assert redirect.headers["location"].startswith("/dashboard/login")
    # The answer that refused the dead cookie also deletes it from the browser.
    deleted = [
        header
        for header in redirect.headers.get_list("set-cookie")
        if header.startswith(f"{SESSION_COOKIE}=null;") and "expires=" in header.lower()
    ]
    assert deleted, redirect.headers.get_list("set-cookie")


async def test_signing_out_in_another_app_ends_the_session_here(
    signed_in: Browser, other_server: httpx.AsyncClient
) -> None:
    stolen = copy_of(signed_in)
    other = Browser(other_server)
    other_server.cookies.set(SESSION_COOKIE, stolen, domain="sundial.test", path="/dashboard")
    response = await other.submit("/dashboard/", "/dashboard/logout", {})
    assert response.status_code == 303
    assert (await signed_in.get("/dashboard/")).status_code == 303
    assert (await signed_in.get("/dashboard/api/overview")).status_code == 401


async def test_a_sign_in_after_signing_out_is_a_new_session(
    signed_in: Browser, app: Litestar
) -> None:
    first = copy_of(signed_in)
    await signed_in.submit("/dashboard/", "/dashboard/logout", {})
    assert (await signed_in.sign_in()).status_code == 303
    assert (await signed_in.get("/dashboard/")).status_code == 200
    async with serve(app) as thief:
        assert await answers_with(thief, first) == (303, 401)


async def test_an_expired_session_is_refused(signed_in: Browser, engine: AsyncEngine) -> None:
    assert (await signed_in.get("/dashboard/")).status_code == 200
    await execute(engine, "UPDATE dashboard_sessions SET expires_at = now() - interval '1 second'")
    assert (await signed_in.get("/dashboard/")).status_code == 303


async def test_using_a_session_renews_it(signed_in: Browser, engine: AsyncEngine) -> None:
    await execute(engine, "UPDATE dashboard_sessions SET expires_at = now() + interval '5 minutes'")
    assert (await signed_in.get("/dashboard/")).status_code == 200
    async with engine.connect() as conn:
        left = (
            await conn.execute(
                sa.text("SELECT extract(epoch FROM expires_at - now()) FROM dashboard_sessions")
            )
        ).scalar_one()
    assert SESSION_IDLE_SECONDS - 60 < left <= SESSION_IDLE_SECONDS


async def test_a_fresh_session_is_not_written_on_every_request(
    signed_in: Browser, engine: AsyncEngine
) -> None:
    async with engine.connect() as conn:
        before = (
            await conn.execute(sa.text("SELECT xmin::text, expires_at FROM dashboard_sessions"))
        ).one()
    for _ in range(3):
        assert (await signed_in.get("/dashboard/api/overview")).status_code == 200
    async with engine.connect() as conn:
        after = (
            await conn.execute(sa.text("SELECT xmin::text, expires_at FROM dashboard_sessions"))
        ).one()
    assert after == before


async def test_signing_in_prunes_expired_sessions(browser: Browser, engine: AsyncEngine) -> None:
    await execute(
        engine,
        "INSERT INTO dashboard_sessions (id_hash, expires_at)"
        " SELECT sha256(i::text::bytea), now() - interval '1 minute'"
        " FROM generate_series(1, 50) AS i",
    )
    await execute(
        engine,
        "INSERT INTO dashboard_sessions (id_hash, expires_at)"
        " VALUES (sha256('live'::bytea), now() + interval '1 hour')",
    )
    assert await session_rows(engine) == 51
    assert (await browser.sign_in()).status_code == 303
    assert await session_rows(engine) == 2  # the live one and the new one


async def test_the_database_keeps_no_session_id(signed_in: Browser, engine: AsyncEngine) -> None:
    # What the cookie carries cannot be read from the table (it holds a SHA-256 of the id).
    async with engine.connect() as conn:
        stored = (await conn.execute(sa.text("SELECT id_hash FROM dashboard_sessions"))).all()
    assert len(stored) == 1
    assert len(stored[0][0]) == 32


async def test_signing_in_again_ends_the_previous_session(
    signed_in: Browser, app: Litestar, engine: AsyncEngine
) -> None:
    first = copy_of(signed_in)
    csrf = csrf_of(await signed_in.get("/dashboard/"))
    again = await signed_in.post_form(
        "/dashboard/login", [("token", ADMIN_TOKEN), ("_csrf_token", csrf)]
    )
    assert again.status_code == 303
    assert copy_of(signed_in) != first
    assert await session_rows(engine) == 1
    async with serve(app) as thief:
        assert await answers_with(thief, first) == (303, 401)
