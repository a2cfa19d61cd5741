"""The dashboard in a real headless Chromium (Debian's ``chromium``, driven by Playwright)
against a real ``sundial serve`` process: sign in, watch counts change, pause a queue, requeue
a dead letter, CSRF, sign out. Every step leaves a screenshot in
``test-artifacts/screenshots/`` at 1366x768 (laptop) and, for the main pages, 1920x1080.

A missing browser is a setup error that fails these tests (``./dev test`` installs it):
they are never skipped.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import conftest
from tests.processes import clean_env, free_port, sundial_serve, wait_ready

ROOT = Path(__file__).resolve().parents[2]
SUNDIAL = Path(sys.executable).parent / "sundial"
CHROMIUM = Path(os.environ.get("SUNDIAL_TEST_CHROMIUM", "/usr/bin/chromium"))
SHOTS = ROOT / "test-artifacts" / "screenshots"
ADMIN = "browser-test-admin-token-of-32-characters"
LAPTOP = {"width": 1366, "height": 768}
WIDE = {"width": 1920, "height": 1080}
LIVE_TIMEOUT_MS = 15_000  # the pages refresh every 5 s

try:
    from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright
except ImportError:  # reported by the fixture below, as a failure
    sync_playwright = None  # type: ignore[assignment]


if sync_playwright is not None:
    expect.set_options(timeout=LIVE_TIMEOUT_MS)


@pytest.fixture(scope="module")
def server(
    postgres: conftest.TestDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """``sundial serve`` (one worker, scheduler on) on a fresh database of its own."""
    database = postgres.create()
    work = tmp_path_factory.mktemp("serve")
    port = free_port()
    env = clean_env(
        SUNDIAL_DATABASE_URL=postgres.url(database),
        SUNDIAL_ADMIN_TOKEN=ADMIN,
        SUNDIAL_PORT=str(port),
        SUNDIAL_WORKERS="1",
    )
    log = work / "serve.log"
    base = f"http://127.0.0.1:{port}"
    try:
        with sundial_serve(env, log, args=["--no-migrate"], cwd=work) as process:
            wait_ready(base, process, log)
            yield base
    finally:
        postgres.drop(database)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """Headless Chromium from the system package; a missing one fails with how to get it."""
    if sync_playwright is None:
        pytest.fail("playwright is not installed: run ./dev test (or pip install -e '.[dev]')")
    if not CHROMIUM.exists():
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: run ./dev test, which installs Debian's"
            " chromium package (or apt-get install chromium; SUNDIAL_TEST_CHROMIUM=path"
            " points at another build)"
        )
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield browser
        browser.close()


class Api:
    """The REST API with the admin token: how the tests produce and consume messages."""

    def __init__(self, base: str) -> None:
        self.client = httpx.Client(
            base_url=f"{base}/v1", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10
        )

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.client.request(method, path, **kwargs)
        assert response.status_code < 300, response.text
        return response.json() if response.content else None

    def queue(self, ns: str, name: str, **config: Any) -> str:
        self.client.post("/namespaces", json={"name": ns})
        self.call("PUT", f"/namespaces/{ns}/queues/{name}", json=config)
        return f"/namespaces/{ns}/queues/{name}"

    def enqueue(self, queue: str, *ids: str, **fields: Any) -> None:
        self.call(
            "POST", f"{queue}/messages", json={"messages": [{"id": i, **fields} for i in ids]}
        )


@pytest.fixture(scope="module")
def api(server: str) -> Iterator[Api]:
    api = Api(server)
    yield api
    api.client.close()


def new_page(chromium: Browser, viewport: dict[str, int] = LAPTOP) -> tuple[BrowserContext, Page]:
    context = chromium.new_context(viewport=viewport)  # type: ignore[arg-type]
    context.set_default_timeout(LIVE_TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors  # type: ignore[attr-defined]
    return context, page


def sign_in(page: Page, server: str, token: str = ADMIN) -> None:
    page.goto(f"{server}/dashboard/")
    expect(page).to_have_url(re.compile(r"/dashboard/login\?next="))
    page.fill("#token", token)
    page.click("button[type=submit]")


def shot(page: Page, name: str) -> None:
    width = page.viewport_size["width"] if page.viewport_size else 0
    page.screenshot(path=SHOTS / f"{name}-{width}.png", full_page=True)


@pytest.fixture
def signed_in(chromium: Browser, server: str) -> Iterator[Page]:
    context, page = new_page(chromium)
    sign_in(page, server)
    expect(page).to_have_url(f"{server}/dashboard/")
    yield page
    assert not page.errors, page.errors  # type: ignore[attr-defined]
    context.close()


def test_a_wrong_token_is_refused(chromium: Browser, server: str) -> None:
    context, page = new_page(chromium)
    sign_in(page, server, token="not-the-token")
    expect(page.locator("#login-error")).to_have_text("That is not the admin token.")
    shot(page, "01-sign-in-refused")
    page.goto(f"{server}/dashboard/")
    expect(page).to_have_url(re.compile(r"/dashboard/login"))
    context.close()


def test_overview_counts_follow_enqueues(signed_in: Page, server: str, api: Api) -> None:
    queue = api.queue("shop", "emails")
    signed_in.reload()
    pending = signed_in.locator('[data-q="shop/emails"][data-count="pending"]')
    expect(pending).to_have_text("0")
    shot(signed_in, "02-overview-empty")

    api.enqueue(queue, "a", "b", "c", payload={"to": "ada@example.com"})

    expect(pending).to_have_text("3")  # the live refresh, without reloading
    expect(signed_in.locator("#stat-waiting")).to_have_text("3")
    expect(signed_in.locator(".live")).not_to_have_class(re.compile("stale"))
    api.call("POST", f"{queue}/dequeue", json={"count": 1})
    signed_in.reload()
    expect(signed_in.locator('[data-q="shop/emails"][data-count="running"]')).to_have_text("1")
    expect(pending).to_have_text("2")
    shot(signed_in, "03-overview-live")


def test_pausing_a_queue(signed_in: Page, server: str, api: Api) -> None:
    queue = api.queue("shop", "invoices")
    signed_in.goto(f"{server}/dashboard/queues/shop/invoices")
    expect(signed_in.locator("#state-dequeue_paused")).to_have_text("Running")

    signed_in.click("#toggle-dequeue_paused")

    expect(signed_in.locator(".notice-ok")).to_have_text("Dequeue paused on shop/invoices.")
    expect(signed_in.locator("#state-dequeue_paused")).to_have_text("Paused")
    assert api.call("GET", queue)["dequeue_paused"] is True
    shot(signed_in, "04-queue-paused")
    signed_in.click("#toggle-dequeue_paused")
    expect(signed_in.locator("#state-dequeue_paused")).to_have_text("Running")
    assert api.call("GET", queue)["dequeue_paused"] is False


def test_browsing_and_requeueing_a_dead_letter(signed_in: Page, server: str, api: Api) -> None:
    queue = api.queue("media", "encode", max_attempts=1)
    api.enqueue(queue, "clip-1", "clip-2", payload={"file": "clip.mov", "sizes": [480, 1080]})
    for message in api.call("POST", f"{queue}/dequeue", json={"count": 2})["messages"]:
        api.call(
            "POST",
            f"{queue}/messages/{message['id']}/fail",
            json={"lease_id": message["lease_id"], "error": "ffmpeg exited with 1"},
        )

    signed_in.goto(f"{server}/dashboard/dead-letters")
    signed_in.click("text=encode")
    rows = signed_in.locator("#dead-letters tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("ffmpeg exited with 1")
    shot(signed_in, "05-dead-letters")

    signed_in.click("a:text('clip-1')")
    expect(signed_in.locator("#payload")).to_contain_text('"file": "clip.mov"')
    expect(signed_in.locator("#last-error")).to_have_text("ffmpeg exited with 1")
    shot(signed_in, "06-message")
    signed_in.click("button:text('Requeue…')")

    expect(signed_in.locator("#confirm-question")).to_have_text(
        "Requeue 1 message of media/encode?"
    )
    assert api.call("GET", f"{queue}/messages/clip-1")["state"] == "errored"  # not yet
    shot(signed_in, "07-confirm")
    signed_in.click("#confirm")

    expect(signed_in.locator(".notice-ok")).to_have_text("Requeued 1 message of media/encode.")
    expect(rows).to_have_count(1)
    assert api.call("GET", f"{queue}/messages/clip-1")["state"] == "pending"


def test_message_browser_filters(signed_in: Page, server: str, api: Api) -> None:
    queue = api.queue("shop", "orders")
    for i in range(6):
        api.enqueue(queue, f"order-{i}", priority=i, metadata={"lang": "en" if i % 2 else "fr"})
    signed_in.goto(f"{server}/dashboard/queues/shop/orders/messages")
    signed_in.fill("#meta", "lang=en")
    signed_in.fill("#priority_min", "2")
    signed_in.click("#apply-filters")
    ids = signed_in.locator("#messages tbody td.mono a")
    expect(ids).to_have_text(["order-5", "order-3"])
    shot(signed_in, "08-message-browser")

    signed_in.fill("#priority_min", "two")
    signed_in.click("#apply-filters")
    expect(signed_in.locator("#filter-error")).to_contain_text("priority_min")


def test_a_form_post_without_the_csrf_token_is_refused(signed_in: Page, server: str) -> None:
    response = signed_in.request.post(f"{server}/dashboard/logout", form={"x": "1"})
    assert response.status == 403
    signed_in.goto(f"{server}/dashboard/")
    expect(signed_in.locator("h1")).to_have_text("Overview")  # still signed in


def test_signing_out(signed_in: Page, server: str) -> None:
    signed_in.click("#sign-out")
    expect(signed_in).to_have_url(f"{server}/dashboard/login?signed_out=1")
    expect(signed_in.locator(".notice-ok")).to_have_text("You are signed out.")
    signed_in.goto(f"{server}/dashboard/queues/shop/emails")
    expect(signed_in).to_have_url(re.compile(r"/dashboard/login\?next="))


@pytest.mark.parametrize("viewport", [LAPTOP, WIDE], ids=["laptop", "wide"])
def test_screenshots_of_the_main_pages(
    chromium: Browser, server: str, api: Api, viewport: dict[str, int]
) -> None:
    queue = api.queue("shop", "builds", kind="exclusive", exclusive_key="project")
    api.enqueue(queue, "web-1", "web-2", metadata={"project": "web"})
    api.enqueue(queue, "api-1", metadata={"project": "api"})
    api.call("POST", f"{queue}/dequeue", json={"count": 5})
    context, page = new_page(chromium, viewport)
    sign_in(page, server)
    for name, path in [
        ("10-overview", "/dashboard/"),
        ("11-queue-exclusive", "/dashboard/queues/shop/builds"),
    ]:
        page.goto(server + path)
        expect(page.locator("body")).to_have_attribute("data-refreshed", re.compile(r"\d+"))
        expect(page.locator(".u-over").first).to_be_visible()  # the charts are drawn
        shot(page, name)
    expect(page.locator("#exclusive-table tbody tr")).to_have_count(2)
    assert not page.errors, page.errors  # type: ignore[attr-defined]
    context.close()
