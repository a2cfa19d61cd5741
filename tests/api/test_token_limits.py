"""Per-token read and write rate limits (docs/security.md, "Per-token rate limits").

Two apps on one database stand for two server processes, each with its own lookup cache (kept a
minute, so no expiry hides a stale entry): a token's limit is counted in PostgreSQL, so it holds
across both, and a change of it applies to the next request in either. The limits used are slow
(one request per 100 s), so that no test depends on where a second begins or how fast it runs:
a token's first request is allowed, its next one of the same kind is refused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api.conftest import Caller, as_token, assert_error, two_processes
from tests.helpers import scalar

SLOW = 0.01  # requests per second: one per 100 s
QUEUES = "/v1/namespaces/ns/queues"
JOBS = f"{QUEUES}/jobs"


@asynccontextmanager
async def processes_with_jobs(
    database_url: str, engine: AsyncEngine
) -> AsyncIterator[list[Caller]]:
    """:func:`two_processes`' admin callers, with namespace ``ns`` and its queue ``jobs``."""
    async with two_processes(database_url, engine) as admins:
        assert (await admins[0].post("/v1/namespaces", json={"name": "ns"})).status_code == 201
        assert (await admins[0].put(JOBS, json={})).status_code == 201
        yield admins


async def issue(admin: Caller, **limits: Any) -> tuple[str, str]:
    """A token of ``ns`` with ``limits``: its secret and its id."""
    answer = await admin.post("/v1/namespaces/ns/tokens", json=limits)
    assert answer.status_code == 201, answer.text
    body = answer.json()
    for field in ("read_rate", "write_rate"):
        assert body[field] == limits.get(field)
    return body["token"], body["id"]


def on_both(admins: list[Caller], secret: str) -> list[Caller]:
    return [as_token(admin, secret) for admin in admins]


async def enqueue(caller: Caller) -> int:
    answer = await caller.post(f"{JOBS}/messages", json={"messages": [{}]})
    return answer.status_code


async def test_a_limit_holds_across_processes_and_kinds_count_apart(
    database_url: str, engine: AsyncEngine
) -> None:
    async with processes_with_jobs(database_url, engine) as admins:
        secret, _ = await issue(admins[0], read_rate=SLOW, write_rate=SLOW)
        one, two = on_both(admins, secret)
        assert (await one.get(QUEUES)).status_code == 200
        # The next read, through the other process, is over the shared limit; so is a dequeue.
        refused = await two.get(JOBS)
        error = assert_error(refused, 429, "rate_limited")
        assert "read rate limit" in error["message"]
        assert 90 <= int(refused.headers["Retry-After"]) <= 100
        assert error["details"]["retry_after_seconds"] == int(refused.headers["Retry-After"])
        assert_error(await one.post(f"{JOBS}/dequeue", json={}), 429, "rate_limited")
        # Writes have their own allowance: one enqueue (the express lane's), then refused.
        assert await enqueue(two) == 201
        assert await enqueue(one) == 429
        assert_error(await two.post(f"{JOBS}/messages/x/cancel", json={}), 429, "rate_limited")


async def test_only_the_limited_kind_is_limited(database_url: str, engine: AsyncEngine) -> None:
    async with processes_with_jobs(database_url, engine) as admins:
        secret, _ = await issue(admins[0], write_rate=SLOW)
        one, two = on_both(admins, secret)
        assert await enqueue(one) == 201
        assert await enqueue(two) == 429
        for reader in (one, two, one, two):
            assert (await reader.get(QUEUES)).status_code == 200
            answer = await reader.post(f"{JOBS}/dequeue", json={"count": 1})
            assert answer.status_code == 200, answer.text


async def test_tokens_without_a_limit_pay_nothing(database_url: str, engine: AsyncEngine) -> None:
    async with processes_with_jobs(database_url, engine) as admins:
        secret, _ = await issue(admins[0])
        for who in on_both(admins, secret) * 5:
            assert (await who.get(QUEUES)).status_code == 200
            assert await enqueue(who) == 201
        # The admin has no per-token limit either.
        for admin in admins * 3:
            assert (await admin.get(QUEUES)).status_code == 200
        # Nothing was counted: no statement ran for them.
        assert await scalar(engine, "SELECT count(*) FROM token_rate_limits") == 0


async def test_a_change_applies_to_the_next_request_in_every_process(
    database_url: str, engine: AsyncEngine
) -> None:
    async with processes_with_jobs(database_url, engine) as admins:
        secret, token_id = await issue(admins[0])
        one, two = on_both(admins, secret)
        for who in (one, two, one, two):  # both processes now remember the token, unlimited
            assert (await who.get(QUEUES)).status_code == 200

        changed = await admins[1].patch(
            f"/v1/namespaces/ns/tokens/{token_id}", json={"read_rate": SLOW}
        )
        assert changed.status_code == 200, changed.text
        assert changed.json()["read_rate"] == SLOW
        assert changed.json()["write_rate"] is None
        assert (await one.get(QUEUES)).status_code == 200  # the first of the new allowance
        assert_error(await two.get(QUEUES), 429, "rate_limited")
        assert_error(await one.get(QUEUES), 429, "rate_limited")
        assert await enqueue(two) == 201  # writes: still no limit

        # Lifted: every process serves the token's next request.
        lifted = await admins[0].patch(
            f"/v1/namespaces/ns/tokens/{token_id}", json={"read_rate": None}
        )
        assert lifted.status_code == 200, lifted.text
        for who in (two, one, two, one):
            assert (await who.get(QUEUES)).status_code == 200

        # Listed with its limits.
        listed = (await admins[1].get("/v1/namespaces/ns/tokens")).json()["tokens"]
        assert [(t["id"], t["read_rate"], t["write_rate"]) for t in listed] == [
            (token_id, None, None)
        ]


async def test_a_raised_limit_applies_at_once(database_url: str, engine: AsyncEngine) -> None:
    async with processes_with_jobs(database_url, engine) as admins:
        secret, token_id = await issue(admins[0], read_rate=SLOW)
        one, two = on_both(admins, secret)
        assert (await one.get(QUEUES)).status_code == 200
        assert_error(await two.get(QUEUES), 429, "rate_limited")
        # 1000/s: a burst of up to 1000 at once, counted from the allowance left.
        path = f"/v1/namespaces/ns/tokens/{token_id}"
        assert (await admins[0].patch(path, json={"read_rate": 1000})).status_code == 200
        for who in (two, one) * 5:
            assert (await who.get(QUEUES)).status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"read_rate": 0}, "read_rate"),
        ({"write_rate": -1}, "write_rate"),
        ({"read_rate": 1e7}, "read_rate"),
        ({"read_rate": "fast"}, "read_rate"),
        ({"write_rate": True}, "write_rate"),
    ],
)
async def test_bad_limits_are_refused_naming_the_field(
    admin: Caller, body: dict[str, Any], field: str
) -> None:
    assert (await admin.post("/v1/namespaces", json={"name": "ns"})).status_code == 201
    path = "/v1/namespaces/ns/tokens"
    assert_error(await admin.post(path, json=body), 400, "validation_error", field)
    token_id = (await admin.post(path, json={})).json()["id"]
    assert_error(await admin.patch(f"{path}/{token_id}", json=body), 400, "validation_error", field)
    # Nothing was applied.
    (listed,) = (await admin.get(path)).json()["tokens"]
    assert (listed["read_rate"], listed["write_rate"]) == (None, None)


async def test_setting_limits_of_what_does_not_exist_is_404(admin: Caller) -> None:
    assert (await admin.post("/v1/namespaces", json={"name": "ns"})).status_code == 201
    path = "/v1/namespaces/ns/tokens"
    missing = "00000000-0000-4000-8000-000000000000"
    assert_error(await admin.patch(f"{path}/{missing}", json={"read_rate": 1}), 404, "not_found")
    assert_error(await admin.patch(f"{path}/nope", json={"read_rate": 1}), 404, "not_found")
    other = "/v1/namespaces/other/tokens"
    token_id = (await admin.post(path, json={})).json()["id"]
    assert_error(await admin.patch(f"{other}/{token_id}", json={"read_rate": 1}), 404, "not_found")
    assert_error(await admin.patch(f"{path}/{token_id}", json={}), 400, "validation_error")


async def test_a_namespace_token_may_not_set_limits(admin: Caller) -> None:
    assert (await admin.post("/v1/namespaces", json={"name": "ns"})).status_code == 201
    issued = (await admin.post("/v1/namespaces/ns/tokens", json={"read_rate": 5})).json()
    own = as_token(admin, issued["token"])
    path = f"/v1/namespaces/ns/tokens/{issued['id']}"
    assert_error(await own.patch(path, json={"read_rate": None}), 403, "forbidden")
