"""Every answer under /dashboard carries the security headers, whatever made it: pages, the
sign-in form, redirects, live data, static files, and every error (400, 401, 403, 404, 405,
413, 429, 500), including the router's own 404 and 405 for paths no route matches."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.server import create_app
from app.config import Settings
from app.core.service import QueueService
from app.dashboard.security import CONTENT_SECURITY_POLICY
from tests.api.conftest import BODY_LIMIT, make_settings, serve
from tests.dashboard.conftest import Browser, csrf_of
from tests.helpers import make_queue

NO_STORE = "no-store"


def assert_protected(response: httpx.Response, cache_control: str = NO_STORE) -> None:
    """The response has each security header exactly once, with the dashboard's values."""
    headers = response.headers
    where = f"{response.request.method} {response.request.url.path} -> {response.status_code}"
    expected = {
        "content-security-policy": CONTENT_SECURITY_POLICY,
        "x-frame-options": "DENY",
        "x-content-type-options": "nosniff",
        "referrer-policy": "same-origin",
        "cache-control": cache_control,
    }
    for name, value in expected.items():
        assert headers.get_list(name) == [value], (where, name, headers.get_list(name))
    assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY


async def test_pages_forms_redirects_and_live_data(
    signed_in: Browser, service: QueueService
) -> None:
    await make_queue(service, "ns", "q")
    for path in [
        "/dashboard/",
        "/dashboard/dead-letters",
        "/dashboard/queues/ns/q",
        "/dashboard/queues/ns/q/messages",
        "/dashboard/queues/ns/q/dead-letters",
        "/dashboard/api/overview",
        "/dashboard/api/queues/ns/q",
        "/dashboard/login",  # signed in: a redirect onwards
    ]:
        response = await signed_in.get(path)
        assert response.status_code in (200, 303), (path, response.status_code)
        assert_protected(response)
    switched = await signed_in.submit(
        "/dashboard/queues/ns/q",
        "/dashboard/queues/ns/q/switches",
        {"switch": "enqueue_paused", "paused": "true"},
    )
    assert switched.status_code == 303
    assert_protected(switched)
    signed_out = await signed_in.submit("/dashboard/", "/dashboard/logout", {})
    assert signed_out.status_code == 303
    assert_protected(signed_out)


async def test_answers_to_the_signed_out(browser: Browser) -> None:
    login = await browser.get("/dashboard/login")
    assert login.status_code == 200
    assert_protected(login)
    for path, status in [
        ("/dashboard", 303),
        ("/dashboard/", 303),
        ("/dashboard/queues/ns/q", 303),
        ("/dashboard/api/overview", 401),
    ]:
        response = await browser.get(path)
        assert response.status_code == status, path
        assert_protected(response)
    refused = await browser.sign_in("not-the-admin-token")
    assert refused.status_code == 401
    assert_protected(refused)


async def test_static_files_keep_their_caching(browser: Browser) -> None:
    for path in ["/dashboard/static/dashboard.css", "/dashboard/static/dashboard.js"]:
        response = await browser.get(path)
        assert response.status_code == 200
        assert_protected(response, cache_control="max-age=3600")
    missing = await browser.get("/dashboard/static/no-such-file.js")
    assert missing.status_code == 404
    assert_protected(missing)


async def test_client_errors(signed_in: Browser, service: QueueService) -> None:
    await make_queue(service, "ns", "q")
    csrf = csrf_of(await signed_in.get("/dashboard/queues/ns/q"))
    too_large = {
        "content": b"switch=" + b"x" * BODY_LIMIT,
        "headers": {"X-CSRFToken": csrf, "Content-Type": "application/x-www-form-urlencoded"},
    }
    cases: list[tuple[str, str, int, dict[str, Any]]] = [
        ("GET", "/dashboard/no-such-page", 404, {}),
        ("GET", "/dashboard/queues/ns", 404, {}),
        ("GET", "/dashboard/queues/ns/missing", 404, {}),  # a route, no such queue
        ("GET", "/dashboard/api/queues/ns/missing", 404, {}),
        ("GET", "/dashboard/queues/ns/q/messages?limit=7", 400, {}),
        ("POST", "/dashboard/", 405, {}),
        ("GET", "/dashboard/logout", 405, {}),
        ("POST", "/dashboard/logout", 403, {}),  # no CSRF token
        ("POST", "/dashboard/queues/ns/q/switches", 413, too_large),
    ]
    for method, path, status, extra in cases:
        response = await signed_in.client.request(method, path, **extra)
        assert response.status_code == status, (method, path, response.status_code)
        assert_protected(response)
        if path.startswith("/dashboard/api/") or status == 413:
            continue
        assert response.headers["content-type"].startswith("text/html"), (path, response)


async def test_unexpected_errors(
    signed_in: Browser, app: Litestar, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(app.state.dashboard_insights, "overview", broken)
    for path in ["/dashboard/", "/dashboard/api/overview"]:
        response = await signed_in.get(path)
        assert response.status_code == 500, path
        assert "a bug" not in response.text
        assert_protected(response)


@pytest.fixture
def throttled_settings(database_url: str) -> Settings:
    return make_settings(database_url, auth_failure_limit=1)


async def test_a_throttled_sign_in(throttled_settings: Settings, engine: AsyncEngine) -> None:
    async with serve(create_app(throttled_settings, engine=engine)) as client:
        browser = Browser(client)
        assert (await browser.sign_in("not-the-admin-token")).status_code == 401
        page = await browser.get("/dashboard/login")
        throttled = await browser.post_form(
            "/dashboard/login", [("token", "not-it-either"), ("_csrf_token", csrf_of(page))]
        )
        assert throttled.status_code == 429
        assert_protected(throttled)
