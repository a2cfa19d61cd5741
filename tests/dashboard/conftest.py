"""Dashboard fixtures: the app on this test's database over HTTP (ASGI, as in tests/api), a
browser-like client that keeps cookies, and helpers to sign in and post forms with the CSRF
token a page carries."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.server import create_app
from app.config import Settings
from tests.api.conftest import make_settings, serve
from tests.conftest import ADMIN_TOKEN

CSRF_FIELD = re.compile(r'name="_csrf_token" value="([^"]+)"')


def csrf_of(page: httpx.Response) -> str:
    """The CSRF token of the first form on a page."""
    match = CSRF_FIELD.search(page.text)
    assert match, f"no CSRF field on {page.url}"
    return match.group(1)


class Browser:
    """An HTTP client that behaves like a browser on the dashboard: cookies, forms with the
    page's CSRF token, and no automatic redirects (tests look at them)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.client.get(path, **kwargs)

    async def submit(
        self, page_path: str, action: str, data: dict[str, Any] | list[tuple[str, str]]
    ) -> httpx.Response:
        """Load ``page_path``, then post ``data`` to ``action`` with that page's CSRF token."""
        page = await self.get(page_path)
        assert page.status_code == 200, page.text
        fields = list(data.items()) if isinstance(data, dict) else list(data)
        fields.append(("_csrf_token", csrf_of(page)))
        return await self.post_form(action, fields)

    async def post_form(self, action: str, fields: list[tuple[str, str]]) -> httpx.Response:
        """Post an URL-encoded form (repeated fields allowed), as a browser does."""
        return await self.client.post(
            action,
            content=urlencode(fields),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )

    async def sign_in(self, token: str = ADMIN_TOKEN) -> httpx.Response:
        return await self.submit("/dashboard/login", "/dashboard/login", {"token": token})


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


@pytest.fixture
def app(settings: Settings, engine: AsyncEngine) -> Litestar:
    return create_app(settings, engine=engine)


@pytest.fixture
async def client(app: Litestar) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(app) as client:
        yield client


@pytest.fixture
def browser(client: httpx.AsyncClient) -> Browser:
    """A visitor who has not signed in."""
    return Browser(client)


@pytest.fixture
async def signed_in(browser: Browser) -> Browser:
    """A visitor signed in with the admin token."""
    response = await browser.sign_in()
    assert response.status_code == 303, response.text
    return browser


@pytest.fixture
def admin_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}
