"""The harness of the representable-values property (tests/api/test_representable.py): it
sends one request or dashboard form, then checks the answer: a refusal changed no stored row, an
acceptance left every listing, message and dashboard page readable."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import count
from typing import Any
from urllib.parse import urlencode

import httpx
from hypothesis import event
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api.conftest import Caller
from tests.api.extreme_requests import BASE, LEASE, NS, QUEUES, Form, Op, encode
from tests.api.rows import snapshot

CSRF_FIELD = re.compile(r'name="_csrf_token" value="([^"]+)"')


@dataclass
class Harness:
    """An admin caller, a signed-in dashboard browser and the database, on one app."""

    admin: Caller
    browser: httpx.AsyncClient
    engine: AsyncEngine
    ids: count[int] = field(default_factory=count)

    async def snapshot(self) -> dict[str, list[str]]:
        """Every stored row, as PostgreSQL renders it."""
        return await snapshot(self.engine)

    async def prepare(self, needs: str | None, queue: str) -> tuple[str, str | None]:
        """A fresh message of ``queue`` in the state ``needs``: its id and current lease."""
        message_id = f"t{next(self.ids)}"
        if needs is None:
            return message_id, None
        tag = {"k": message_id, "tag": message_id}
        enqueued = await self.admin.post(
            f"{BASE}/{queue}/messages", json={"messages": [{"id": message_id, "metadata": tag}]}
        )
        assert enqueued.status_code == 201, enqueued.text
        if needs == "pending":
            return message_id, None
        leased = await self.admin.post(
            f"{BASE}/{queue}/dequeue", json={"metadata": {"tag": message_id}}
        )
        [message] = leased.json()["messages"]
        if needs == "running":
            return message_id, message["lease_id"]
        canceled = await self.admin.post(
            f"{BASE}/{queue}/messages/{message_id}/cancel", json={"force": True}
        )
        assert canceled.status_code == 200, canceled.text
        return message_id, None

    async def run(self, op: Op) -> None:
        """Send ``op`` and check the property."""
        message_id, lease = await self.prepare(op.needs, op.queue)
        path = op.path.format(message=f"{BASE}/{op.queue}/messages/{message_id}")
        content = None
        if op.body is not None:
            content = encode(_bind(op.body, message_id, lease))
        before = await self.snapshot()
        response = await self.admin.request(
            op.method, path, content=content, headers={"Content-Type": "application/json"}
        )
        touched = _touched(response, op)
        if op.needs is not None:
            touched.add((op.queue, message_id))
        await self.judge(response, before, touched, settings_changed=not touched)

    async def submit(self, form: Form) -> None:
        """Post ``form`` from its page and check the property."""
        message_id, _ = await self.prepare(form.needs, "q")
        page = await self.browser.get(form.page)
        assert page.status_code == 200, page.text
        match = CSRF_FIELD.search(page.text)
        assert match, page.text
        fields = [(k, val.replace("{id}", message_id)) for k, val in form.fields]
        fields.append(("_csrf_token", match.group(1)))
        before = await self.snapshot()
        response = await self.browser.post(
            form.action,
            content=urlencode(fields),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        await self.judge(response, before, {("q", message_id)}, settings_changed=True)

    async def judge(
        self,
        response: httpx.Response,
        before: dict[str, list[str]],
        touched: set[tuple[str, str]],
        *,
        settings_changed: bool,
    ) -> None:
        assert response.status_code < 500, response.text
        event(f"answered {response.status_code}")  # --hypothesis-show-statistics
        if response.status_code >= 400:
            if response.headers["content-type"].startswith("application/json"):
                error = response.json()["error"]
                if response.status_code == 400:
                    # Named: a field of the request, not the database's catch-all.
                    assert error["details"].get("field") not in (None, "", "request"), error
            assert await self.snapshot() == before, (
                f"refused with {response.status_code}, yet changed"
            )
        else:
            await self.assert_readable(touched, settings_changed=settings_changed)

    async def assert_readable(
        self, touched: set[tuple[str, str]], *, settings_changed: bool = False
    ) -> None:
        """Every listing, every touched message and its dashboard pages answer 200; the
        dashboard's queue pages too when the request was about queues rather than messages."""
        admin = self.admin
        namespaces = await admin.get("/v1/namespaces")
        assert namespaces.status_code == 200, namespaces.text
        for ns in [n["name"] for n in namespaces.json()["namespaces"]]:
            tokens = await admin.get(f"/v1/namespaces/{ns}/tokens")
            assert tokens.status_code == 200, tokens.text
            queues = await admin.get(f"/v1/namespaces/{ns}/queues")
            assert queues.status_code == 200, queues.text
            for queue in [q["name"] for q in queues.json()["queues"]]:
                await self.assert_listing(ns, queue)
        for queue in sorted({queue for queue, _ in touched}):
            page = await self.browser.get(f"/dashboard/queues/{NS}/{queue}/messages")
            assert page.status_code == 200, page.text
        for queue, message_id in touched:
            got = await admin.get(f"{BASE}/{queue}/messages/{message_id}")
            assert got.status_code in (200, 404), got.text
            page = await self.browser.get(f"/dashboard/queues/{NS}/{queue}/messages/{message_id}")
            assert page.status_code == got.status_code, page.text
        if settings_changed:
            await self.assert_dashboard()

    async def assert_dashboard(self) -> None:
        """The dashboard's pages that show queues (their settings and counts) answer 200."""
        for path in (
            "/dashboard/",
            "/dashboard/dead-letters",
            *(f"/dashboard/queues/{NS}/{q}" for q in QUEUES),
        ):
            page = await self.browser.get(path)
            assert page.status_code == 200, (path, page.text)

    async def assert_listing(self, ns: str, queue: str) -> None:
        base = f"/v1/namespaces/{ns}/queues/{queue}"
        detail = await self.admin.get(base)
        assert detail.status_code == 200, detail.text
        cursor = None
        while True:
            params = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
            page = await self.admin.get(f"{base}/messages", params=params)
            assert page.status_code == 200, page.text
            cursor = page.json()["next_cursor"]
            if cursor is None:
                return


def _bind(body: Any, message_id: str, lease: str | None) -> Any:
    if isinstance(body, dict):
        return {k: _bind(item, message_id, lease) for k, item in body.items()}
    if isinstance(body, list):
        return [_bind(item, message_id, lease) for item in body]
    if body == LEASE:
        return lease or "00000000-0000-0000-0000-000000000000"
    if body == "{id}":
        return message_id
    return body


def _touched(response: httpx.Response, op: Op) -> set[tuple[str, str]]:
    """The messages a 2xx answer names (enqueued or leased ones)."""
    if not response.is_success or not response.content:
        return set()
    found = response.json().get("messages")
    if not isinstance(found, list):
        return set()
    return {(op.queue, m["id"]) for m in found}
