"""Signing in to the dashboard, sessions, CSRF and redirects, over plain HTTP (no browser):
the session cookie is HttpOnly and SameSite=Strict, forms without the CSRF token are refused,
signing out works, and the REST API is not affected by any of it."""

from __future__ import annotations

from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.server import create_app
from app.core.service import QueueService
from app.dashboard.security import CSRF_COOKIE, SESSION_COOKIE
from tests.api.conftest import make_settings, serve
from tests.conftest import ADMIN_TOKEN
from tests.dashboard.conftest import Browser, csrf_of
from tests.helpers import make_queue

PAGES = [
    "/dashboard/",
    "/dashboard/dead-letters",
    "/dashboard/queues/ns/q",
    "/dashboard/queues/ns/q/messages?state=pending",
    "/dashboard/queues/ns/q/messages/m1",
    "/dashboard/queues/ns/q/dead-letters",
]


def set_cookies(response: httpx.Response) -> dict[str, SimpleCookie]:
    """The cookies a response sets, by name, with their attributes."""
    found: dict[str, SimpleCookie] = {}
    for header in response.headers.get_list("set-cookie"):
        cookie: SimpleCookie = SimpleCookie()
        cookie.load(header)
        for name in cookie:
            found[name] = cookie
    return found


async def test_pages_send_the_signed_out_to_sign_in(browser: Browser) -> None:
    for path in PAGES:
        response = await browser.get(path)
        assert response.status_code == 303, path
        target = urlsplit(response.headers["location"])
        assert target.path == "/dashboard/login"
        assert parse_qs(target.query)["next"][0] == path.rstrip("/")  # Litestar drops a final /


async def test_live_data_needs_a_session(browser: Browser) -> None:
    for path in ["/dashboard/api/overview", "/dashboard/api/queues/ns/q"]:
        response = await browser.get(path)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"


async def test_sign_in_page_sets_a_strict_httponly_csrf_cookie(browser: Browser) -> None:
    page = await browser.get("/dashboard/login")
    assert page.status_code == 200
    assert 'name="token"' in page.text
    csrf = set_cookies(page)[CSRF_COOKIE][CSRF_COOKIE]
    assert csrf["httponly"]
    assert csrf["samesite"].lower() == "strict"
    assert csrf["path"] == "/dashboard"


async def test_signing_in_starts_a_strict_httponly_session(browser: Browser) -> None:
    response = await browser.sign_in()
    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/"
    session = set_cookies(response)[SESSION_COOKIE][SESSION_COOKIE]
    assert session["httponly"]
    assert session["samesite"].lower() == "strict"
    assert session["path"] == "/dashboard"
    assert "admin" not in session.value  # encrypted, not readable
    overview = await browser.get("/dashboard/")
    assert overview.status_code == 200
    assert "Overview" in overview.text


@pytest.mark.parametrize(
    ("token", "message"),
    [("wrong-token", "That is not the admin token."), ("", "Enter the admin token.")],
)
async def test_a_wrong_token_is_refused(browser: Browser, token: str, message: str) -> None:
    response = await browser.sign_in(token)
    assert response.status_code == 401
    assert message in response.text
    assert SESSION_COOKIE not in set_cookies(response)
    assert (await browser.get("/dashboard/")).status_code == 303


async def test_a_namespace_token_cannot_sign_in(browser: Browser, service: QueueService) -> None:
    await service.create_namespace("ns")
    issued = await service.issue_token("ns")
    response = await browser.sign_in(issued.secret)
    assert response.status_code == 401
    assert (await browser.get("/dashboard/")).status_code == 303


async def test_sign_in_returns_to_the_page_asked_for(browser: Browser) -> None:
    page = await browser.get("/dashboard/login?next=/dashboard/dead-letters")
    response = await browser.post_form(
        "/dashboard/login",
        [
            ("token", ADMIN_TOKEN),
            ("next", "/dashboard/dead-letters"),
            ("_csrf_token", csrf_of(page)),
        ],
    )
    assert response.headers["location"] == "/dashboard/dead-letters"


OFF_SITE = [
    "https://evil.example/",
    "//evil.example/dashboard/",
    "/v1/namespaces",
    "/dashboard/login",
    "/\\evil",
]


async def test_sign_in_never_sends_anyone_off_the_dashboard(browser: Browser) -> None:
    for target in OFF_SITE:
        browser.client.cookies.clear()  # signed out again
        page = await browser.get("/dashboard/login")
        response = await browser.post_form(
            "/dashboard/login",
            [("token", ADMIN_TOKEN), ("next", target), ("_csrf_token", csrf_of(page))],
        )
        assert response.status_code == 303, target
        assert response.headers["location"] == "/dashboard/", target


async def test_a_form_without_the_csrf_token_is_refused(browser: Browser) -> None:
    await browser.get("/dashboard/login")  # has the CSRF cookie, but posts no token
    response = await browser.post_form("/dashboard/login", [("token", ADMIN_TOKEN)])
    assert response.status_code == 403
    assert "security token" in response.text
    assert SESSION_COOKIE not in set_cookies(response)


async def test_a_csrf_token_of_another_visitor_is_refused(
    signed_in: Browser, client: httpx.AsyncClient, app: Litestar, service: QueueService
) -> None:
    await make_queue(service, "ns", "q")
    async with serve(app) as other_client:
        other = Browser(other_client)
        foreign = csrf_of(await other.get("/dashboard/login"))
    response = await signed_in.post_form(
        "/dashboard/queues/ns/q/switches",
        [("switch", "dequeue_paused"), ("paused", "true"), ("_csrf_token", foreign)],
    )
    assert response.status_code == 403
    assert not (await service.get_queue_or_404("ns", "q")).config.dequeue_paused


async def test_signed_in_forms_without_the_token_change_nothing(
    signed_in: Browser, service: QueueService
) -> None:
    await make_queue(service, "ns", "q")
    response = await signed_in.post_form(
        "/dashboard/queues/ns/q/switches", [("switch", "enqueue_paused"), ("paused", "true")]
    )
    assert response.status_code == 403
    assert not (await service.get_queue_or_404("ns", "q")).config.enqueue_paused
    assert (await signed_in.post_form("/dashboard/logout", [])).status_code == 403
    assert (await signed_in.get("/dashboard/")).status_code == 200  # still signed in


async def test_signing_out_ends_the_session(signed_in: Browser) -> None:
    response = await signed_in.submit("/dashboard/", "/dashboard/logout", {})
    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/login?signed_out=1"
    assert "You are signed out." in (await signed_in.get(response.headers["location"])).text
    assert (await signed_in.get("/dashboard/")).status_code == 303
    assert (await signed_in.get("/dashboard/api/overview")).status_code == 401


async def test_a_session_is_void_once_the_admin_token_changes(
    signed_in: Browser, database_url: str, engine: AsyncEngine
) -> None:
    cookie = signed_in.client.cookies.get(SESSION_COOKIE)
    assert cookie
    rotated = create_app(
        make_settings(database_url, admin_token="a-new-admin-token-32-characters-ok"), engine=engine
    )
    async with serve(rotated) as client:
        client.cookies.set(SESSION_COOKIE, cookie, path="/dashboard")
        assert (await client.get("/dashboard/")).status_code == 303


async def test_the_rest_api_needs_no_csrf_and_ignores_the_session(
    signed_in: Browser, admin_headers: dict[str, str]
) -> None:
    client = signed_in.client
    # A bearer token, no CSRF token: the API works as before.
    created = await client.post("/v1/namespaces", json={"name": "ns"}, headers=admin_headers)
    assert created.status_code == 201, created.text
    # A dashboard session is no credential for the API.
    assert (await client.get("/v1/namespaces")).status_code == 401


async def test_the_dashboard_is_not_in_the_openapi_schema(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/schema/openapi.json")).json()
    assert schema["paths"]
    assert not [path for path in schema["paths"] if path.startswith("/dashboard")]


async def test_pages_are_not_cached_framed_or_open_to_foreign_scripts(signed_in: Browser) -> None:
    response = await signed_in.get("/dashboard/")
    assert response.headers["cache-control"] == "no-store"
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert response.headers["x-content-type-options"] == "nosniff"


async def test_static_files_are_served_without_a_session(browser: Browser) -> None:
    for path in [
        "/dashboard/static/dashboard.css",
        "/dashboard/static/dashboard.js",
        "/dashboard/static/vendor/uplot-1.6.32.min.js",
    ]:
        response = await browser.get(path)
        assert response.status_code == 200, path
        assert len(response.content) > 1000
