"""The browsable API documentation at /schema is Swagger UI served from the package: every script,
style sheet and icon its pages reference is on the server itself (no CDN, so it works on an
air-gapped host) and answers 200 with its content type; in a real Chromium that may reach
nothing but the server, the page renders the API."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from app.api.openapi import SWAGGER_UI
from tests.api.conftest import Caller
from tests.client.server import running_server

PAGES = ["/schema", "/schema/", "/schema/swagger", "/schema/oauth2-redirect.html"]
CONTENT_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}
CHROMIUM = Path(os.environ.get("SUNDIAL_TEST_CHROMIUM", "/usr/bin/chromium"))
URL_IN_TEXT = re.compile(r"""(?:https?:)?//[^\s"'<>)]+""")


class References(HTMLParser):
    """Every URL an HTML page makes the browser load or link to (src, href, action)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [v for k, v in attrs if k in ("src", "href", "action") and v is not None]


def references(html: str) -> list[str]:
    parser = References()
    parser.feed(html)
    return parser.urls


def same_origin(url: str) -> bool:
    parts = urlsplit(url)
    return not parts.scheme and not parts.netloc and url.startswith("/")


async def test_pages_reference_only_files_of_the_server(anonymous: Caller) -> None:
    assets: set[str] = set()
    for path in PAGES:
        page = await anonymous.get(path)
        assert page.status_code == 200, path
        assert page.headers["content-type"].startswith("text/html")
        found = references(page.text)
        assert all(same_origin(url) for url in found), (path, found)
        # Nor any absolute URL anywhere else in the page (inline scripts, styles).
        assert not [u for u in URL_IN_TEXT.findall(page.text) if not u.startswith("//#")], path
        assets.update(found)
    assert {urlsplit(url).path.rsplit(".", 1)[-1] for url in assets} >= {"js", "css", "png"}
    for url in sorted(assets):
        response = await anonymous.get(url)
        assert response.status_code == 200, url
        suffix = "." + urlsplit(url).path.rsplit(".", 1)[-1]
        assert response.headers["content-type"].startswith(CONTENT_TYPES[suffix]), url
        assert len(response.content) > 500, url


async def test_the_ui_files_are_the_packaged_ones(anonymous: Caller) -> None:
    for name in ("swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "swagger-ui.css"):
        served = await anonymous.get(f"/schema/static/{name}")
        assert served.content == (SWAGGER_UI / name).read_bytes()
    for license_file in ("LICENSE", "NOTICE"):
        assert (SWAGGER_UI / license_file).is_file()
    assert (await anonymous.get("/schema/static/no-such-file.js")).status_code == 404


async def test_the_document_is_still_served(anonymous: Caller) -> None:
    document = await anonymous.get("/schema/openapi.json")
    assert document.status_code == 200
    assert document.json()["info"]["title"] == "Sundial"
    yaml = await anonymous.get("/schema/openapi.yaml")
    assert yaml.status_code == 200
    assert "title: Sundial" in yaml.text


@pytest.fixture
def server(database_url: str) -> Iterator[str]:
    with running_server(database_url) as url:
        yield url


def test_swagger_ui_renders_with_nothing_but_the_server(server: str) -> None:
    """Chromium, every request to another origin aborted (as on an air-gapped host)."""
    from playwright.sync_api import Route, sync_playwright

    if not CHROMIUM.exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run ./dev test (apt-get install chromium)")
    origin = server.rstrip("/")
    requested: list[str] = []
    elsewhere: list[str] = []
    errors: list[str] = []

    def only_the_server(route: Route) -> None:
        url = route.request.url
        requested.append(url)
        if url.startswith(f"{origin}/") or url.startswith("data:"):
            route.continue_()
        else:
            elsewhere.append(url)
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            page = browser.new_page()
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.route("**/*", only_the_server)
            page.goto(f"{origin}/schema", wait_until="networkidle")
            page.wait_for_selector(".swagger-ui .info .title", timeout=15_000)
            assert "Sundial" in page.inner_text(".swagger-ui .info .title")
            assert page.locator(".opblock").count() > 10  # the operations are listed
        finally:
            browser.close()
    assert not elsewhere, elsewhere
    assert not errors, errors
    assert f"{origin}/schema/static/swagger-ui-bundle.js" in requested
