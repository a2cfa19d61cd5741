"""Representable values only: whatever a client sends at the extremes of a field — timestamps
around years 1 and 9999 with offsets up to ±23:59, integers around the 32- and 64-bit limits and
beyond, long, empty and odd text (NUL, lone surrogates), payload numbers beyond ``numeric`` —
to any write endpoint of the API or the dashboard, the answer is one of two:

- a 4xx in the error shape (a 400 names the field), and nothing stored changed (every row of
  ``namespaces``, ``tokens``, ``queues`` and ``messages``, read as text by PostgreSQL itself, is
  the same before and after); or
- a 2xx, and every read still works: the namespace, token and queue listings, every queue and
  its message listing (all pages), each message the request touched with its dashboard page
  and its queue's message browser, and — after a request about queues rather than messages,
  and once more after the last example — the dashboard's overview, dead-letter and queue pages.

Each body holds one or two drawn fields, so that one extreme value at a time is often accepted
(the ends of every range are drawn often) and the answer is about that value. Hypothesis
draws the operations in a bounded, derandomized run (about 150 requests and their reads); the
issue's own reproductions are explicit examples. ``--hypothesis-show-statistics`` shows how the
answers split between accepted and refused.

The values drawn are in tests/api/extreme_values.py, the requests in tests/api/extreme_requests.py,
and the checks of each answer in tests/api/representable_harness.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlencode

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api.conftest import Caller, namespace_caller
from tests.api.extreme_requests import (
    BASE,
    NS,
    QUEUES,
    Form,
    Op,
    Raw,
    admin_operations,
    dashboard_forms,
    dequeues,
    enqueues,
    lease_operations,
    patches,
)
from tests.api.representable_harness import CSRF_FIELD, Harness
from tests.conftest import ADMIN_TOKEN

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
async def harness(
    client: httpx.AsyncClient, app: Litestar, engine: AsyncEngine
) -> AsyncIterator[Harness]:
    """The harness on this test's app: namespace ``alpha`` with :data:`QUEUES`, and a browser
    signed in to the dashboard as the admin."""
    admin = Caller(client, app, ADMIN_TOKEN)
    await namespace_caller(admin, NS)
    for name, config in QUEUES.items():
        created = await admin.put(f"{BASE}/{name}", json=config)
        assert created.status_code == 201, created.text
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://sundial.test") as browser:
        login = await browser.get("/dashboard/login")
        token = CSRF_FIELD.search(login.text)
        assert token, login.text
        signed_in = await browser.post(
            "/dashboard/login",
            content=urlencode({"token": ADMIN_TOKEN, "_csrf_token": token.group(1)}),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert signed_in.status_code == 303, signed_in.text
        harness = Harness(admin, browser, engine)
        yield harness
        # Whatever the examples left behind is readable everywhere.
        await harness.assert_readable(set(), settings_changed=True)


# --- the properties --------------------------------------------------------------------------

ISSUE_TIMESTAMPS = ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00")


@SETTINGS
@given(op=st.one_of(enqueues, patches))
@example(op=Op("POST", f"{BASE}/q/messages", {"messages": [{"visible_at": ISSUE_TIMESTAMPS[0]}]}))
@example(op=Op("POST", f"{BASE}/q/messages", {"messages": [{"visible_at": ISSUE_TIMESTAMPS[1]}]}))
@example(op=Op("POST", f"{BASE}/q/messages", {"messages": [{"expires_at": ISSUE_TIMESTAMPS[0]}]}))
@example(op=Op("POST", f"{BASE}/q/messages", {"messages": [{"expires_at": ISSUE_TIMESTAMPS[1]}]}))
@example(op=Op("PATCH", "{message}", {"visible_at": ISSUE_TIMESTAMPS[0]}, needs="pending"))
@example(op=Op("PATCH", "{message}", {"visible_at": ISSUE_TIMESTAMPS[1]}, needs="pending"))
@example(op=Op("PATCH", "{message}", {"payload": Raw("1e131072")}, needs="pending"))
async def test_producing(harness: Harness, op: Op) -> None:
    await harness.run(op)


@SETTINGS
@given(op=st.one_of(dequeues, lease_operations))
async def test_consuming(harness: Harness, op: Op) -> None:
    await harness.run(op)


@SETTINGS
@given(op=admin_operations)
@example(op=Op("POST", f"/v1/namespaces/{NS}/tokens", {"expires_at": ISSUE_TIMESTAMPS[0]}))
@example(op=Op("POST", f"/v1/namespaces/{NS}/tokens", {"expires_at": ISSUE_TIMESTAMPS[1]}))
async def test_administering(harness: Harness, op: Op) -> None:
    await harness.run(op)


@settings(SETTINGS, max_examples=20)
@given(form=dashboard_forms)
async def test_dashboard_forms(harness: Harness, form: Form) -> None:
    await harness.submit(form)
