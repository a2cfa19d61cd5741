"""No commit behind an error: on every write path, a request refused for one of its values is
refused before anything is written — a 400 naming that field, and every stored row exactly as it
was. The values are the ones that used to be stored and then broke the answer (and every later
read): timestamps outside years 1-9999 once their offset is applied, integers beyond their
column, text PostgreSQL cannot hold. And at the very edges of the ranges, what is accepted reads
back, exactly, everywhere.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from urllib.parse import urlencode

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core import validation as v
from tests.api.conftest import Caller, assert_error
from tests.api.rows import snapshot
from tests.conftest import ADMIN_TOKEN

EARLY = "0001-01-01T00:00:00+14:00"  # 0000-12-31T10:00Z: year 0 in UTC
LATE = "9999-12-31T23:59:59-14:00"  # 10000-01-01T13:59:59Z
TOO_BIG = v.INT32_MAX + 1  # fits the JSON decoder, not an integer column

Request = Callable[[Caller, str, str], Awaitable[httpx.Response]]
"""A request on the queue at ``base``, about message ``m`` whose current lease is given."""


async def _enqueue_one(caller: Caller, base: str, lease: str) -> httpx.Response:
    return await caller.post(f"{base}/messages", json={"messages": [{"visible_at": EARLY}]})


async def _enqueue_batch(caller: Caller, base: str, lease: str) -> httpx.Response:
    messages = [{"id": "fine"}, {"id": "late", "expires_at": LATE}]
    return await caller.post(f"{base}/messages", json={"messages": messages})


async def _enqueue_payload(caller: Caller, base: str, lease: str) -> httpx.Response:
    body = '{"messages": [{"id": "big"}, {"id": "huge", "payload": {"n": 1e131072}}]}'
    return await caller.post(
        f"{base}/messages", content=body, headers={"Content-Type": "application/json"}
    )


async def _patch_message(caller: Caller, base: str, lease: str) -> httpx.Response:
    return await caller.patch(f"{base}/messages/w", json={"priority": 7, "visible_at": LATE})


async def _fail(caller: Caller, base: str, lease: str) -> httpx.Response:
    body = {"lease_id": lease, "error": "boom", "retry_delay_seconds": TOO_BIG}
    return await caller.post(f"{base}/messages/m/fail", json=body)


async def _extend(caller: Caller, base: str, lease: str) -> httpx.Response:
    body = {"lease_id": lease, "lease_seconds": TOO_BIG}
    return await caller.post(f"{base}/messages/m/extend", json=body)


async def _cancel(caller: Caller, base: str, lease: str) -> httpx.Response:
    body = {"lease_id": lease, "reason": "stop\x00now"}
    return await caller.post(f"{base}/messages/m/cancel", json=body)


async def _requeue(caller: Caller, base: str, lease: str) -> httpx.Response:
    return await caller.post(f"{base}/messages/dead/requeue", json={"delay_seconds": TOO_BIG})


async def _ack(caller: Caller, base: str, lease: str) -> httpx.Response:
    body = {
        "complete": [{"id": "m", "lease_id": lease}],
        "fail": [{"id": "m", "lease_id": lease, "error": "a\x00b"}],
    }
    return await caller.post(f"{base}/ack", json=body)


async def _dequeue(caller: Caller, base: str, lease: str) -> httpx.Response:
    return await caller.post(f"{base}/dequeue", json={"lease_seconds": TOO_BIG})


async def _requeue_dead_letters(caller: Caller, base: str, lease: str) -> httpx.Response:
    body = {"states": ["canceled"], "ids": ["dead", "x" * 201]}
    return await caller.post(f"{base}/requeue", json=body)


async def _purge(caller: Caller, base: str, lease: str) -> httpx.Response:
    return await caller.post(f"{base}/purge", json={"states": ["canceled", "bogus"]})


async def _put_queue(caller: Caller, base: str, lease: str) -> httpx.Response:
    return await caller.put(f"{base}2", json={"lease_seconds": 60, "retention_seconds": TOO_BIG})


async def _patch_queue(caller: Caller, base: str, lease: str) -> httpx.Response:
    return await caller.patch(base, json={"dequeue_paused": True, "delay_seconds": TOO_BIG})


async def _issue_token(caller: Caller, base: str, lease: str) -> httpx.Response:
    admin = Caller(caller.client, caller.app, ADMIN_TOKEN)
    return await admin.post("/v1/namespaces/alpha/tokens", json={"label": "t", "expires_at": EARLY})


async def _create_namespace(caller: Caller, base: str, lease: str) -> httpx.Response:
    admin = Caller(caller.client, caller.app, ADMIN_TOKEN)
    return await admin.post("/v1/namespaces", json={"name": "beta", "description": "a\x00b"})


PATHS: dict[str, tuple[Request, str]] = {
    "enqueue": (_enqueue_one, "messages[0].visible_at"),
    "enqueue batch": (_enqueue_batch, "messages[1].expires_at"),
    "enqueue payload": (_enqueue_payload, "messages[1].payload"),
    "update message": (_patch_message, "visible_at"),
    "fail": (_fail, "retry_delay_seconds"),
    "extend": (_extend, "lease_seconds"),
    "cancel": (_cancel, "reason"),
    "requeue": (_requeue, "delay_seconds"),
    "batch ack": (_ack, "fail[0].error"),
    "dequeue": (_dequeue, "lease_seconds"),
    "requeue dead letters": (_requeue_dead_letters, "ids[1]"),
    "purge": (_purge, "states[1]"),
    "create queue": (_put_queue, "retention_seconds"),
    "update queue": (_patch_queue, "delay_seconds"),
    "issue token": (_issue_token, "expires_at"),
    "create namespace": (_create_namespace, "description"),
}


async def _stage(alpha: Caller, base: str) -> str:
    """Messages in every state a path needs: ``w`` waiting, ``m`` running (its lease is
    returned), ``dead`` canceled."""
    for message_id in ("m", "dead", "w"):
        enqueued = await alpha.post(f"{base}/messages", json={"messages": [{"id": message_id}]})
        assert enqueued.status_code == 201, enqueued.text
    leased = (await alpha.post(f"{base}/dequeue", json={"count": 2})).json()["messages"]
    leases = {m["id"]: m["lease_id"] for m in leased}
    assert set(leases) == {"m", "dead"}
    canceled = await alpha.post(f"{base}/messages/dead/cancel", json={"force": True})
    assert canceled.status_code == 200, canceled.text
    return leases["m"]


@pytest.mark.parametrize("path", list(PATHS))
async def test_a_refused_request_changes_nothing(
    alpha: Caller, queue: str, engine: AsyncEngine, path: str
) -> None:
    send, field = PATHS[path]
    lease = await _stage(alpha, queue)
    before = await snapshot(engine)
    assert_error(await send(alpha, queue, lease), 400, "validation_error", field)
    assert await snapshot(engine) == before


async def _signed_in(client: httpx.AsyncClient) -> str:
    """Sign ``client`` in to the dashboard; the CSRF token of its next form."""
    page = await client.get("/dashboard/login")
    token = page.text.split('name="_csrf_token" value="', 1)[1].split('"', 1)[0]
    answer = await client.post(
        "/dashboard/login",
        content=urlencode({"token": ADMIN_TOKEN, "_csrf_token": token}),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 303, answer.text
    page = await client.get("/dashboard/queues/alpha/q/dead-letters")
    return page.text.split('name="_csrf_token" value="', 1)[1].split('"', 1)[0]


@pytest.mark.parametrize(
    ("action", "fields", "field"),
    [
        ("switches", [("switch", "enqueue_paused"), ("paused", "maybe")], "paused"),
        (
            "dead-letters/apply",
            [("action", "requeue"), ("ids", "dead"), ("ids", "bad id")],
            "ids[1]",
        ),
        (
            "dead-letters/apply",
            [("action", "delete"), ("ids", "dead"), ("ids", "x" * 201)],
            "ids[1]",
        ),
    ],
)
async def test_a_refused_dashboard_form_changes_nothing(
    alpha: Caller,
    queue: str,
    engine: AsyncEngine,
    action: str,
    fields: list[tuple[str, str]],
    field: str,
) -> None:
    await _stage(alpha, queue)
    transport = httpx.ASGITransport(app=alpha.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://sundial.test") as browser:
        csrf = await _signed_in(browser)
        before = await snapshot(engine)
        answer = await browser.post(
            f"/dashboard/queues/alpha/q/{action}",
            content=urlencode([*fields, ("_csrf_token", csrf)]),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
    assert answer.status_code == 400, answer.text
    assert field in answer.text
    assert await snapshot(engine) == before


# --- at the edges, accepted and read back -----------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "instant"),
    [
        ("0001-01-02T14:00:00+14:00", "0001-01-02T00:00:00Z"),
        ("0001-01-02T00:00:00Z", "0001-01-02T00:00:00Z"),
        ("9999-12-30T09:59:59.999999-14:00", "9999-12-30T23:59:59.999999Z"),
        ("9999-12-30T23:59:59.999999+00:00", "9999-12-30T23:59:59.999999Z"),
    ],
)
async def test_the_edges_of_the_range_read_back_everywhere(
    admin: Caller, alpha: Caller, queue: str, sent: str, instant: str
) -> None:
    expected = datetime.fromisoformat(instant)
    enqueued = await alpha.post(
        f"{queue}/messages",
        json={"messages": [{"id": "v", "visible_at": sent}, {"id": "e", "expires_at": sent}]},
    )
    assert enqueued.status_code == 201, enqueued.text
    assert (await alpha.patch(f"{queue}/messages/v", json={"visible_at": sent})).status_code == 200
    token = await admin.post("/v1/namespaces/alpha/tokens", json={"expires_at": sent})
    assert token.status_code == 201, token.text

    got = {m: (await alpha.get(f"{queue}/messages/{m}")).json() for m in ("v", "e")}
    assert datetime.fromisoformat(got["v"]["visible_at"]) == expected
    assert datetime.fromisoformat(got["e"]["expires_at"]) == expected
    listing = await alpha.get(f"{queue}/messages")
    assert listing.status_code == 200, listing.text
    tokens = (await admin.get("/v1/namespaces/alpha/tokens")).json()["tokens"]
    assert expected in [datetime.fromisoformat(t["expires_at"]) for t in tokens if t["expires_at"]]

    # The message that is due (visible since year 1, or not expiring before 9999) is served,
    # completed, and still reads back.
    leased = (await alpha.post(f"{queue}/dequeue", json={"count": 2})).json()["messages"]
    for message in leased:
        done = await alpha.post(
            f"{queue}/messages/{message['id']}/complete", json={"lease_id": message["lease_id"]}
        )
        assert done.status_code == 200, done.text
    assert (await alpha.get(f"{queue}/messages")).status_code == 200
