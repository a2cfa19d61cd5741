"""The sync and async clients against a real server: every endpoint, typed answers and errors.

Every scenario written against ``Client`` runs twice: once with ``Client``, once with
``AsyncClient`` driven through the same interface on an event loop of its own (:class:`Driven`),
so both clients are held to every call.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from app.client import (
    ApiError,
    AsyncClient,
    Client,
    Conflict,
    Forbidden,
    InvalidState,
    LeaseMismatch,
    NewMessage,
    NotFound,
    QueuePaused,
    RateLimited,
    RetryPolicy,
    Unauthorized,
    Unavailable,
    ValidationError,
)
from app.client.calls import split_queue
from tests.client.conftest import FAST_RETRY
from tests.conftest import ADMIN_TOKEN


class Driven:
    """An ``AsyncClient`` behind ``Client``'s blocking interface: each coroutine method runs to
    completion on the client's own event loop (in a thread), and ``messages`` is gathered."""

    def __init__(self, url: str, token: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._client: AsyncClient = self._wait(self._open(url, token))

    @staticmethod
    async def _open(url: str, token: str) -> AsyncClient:
        return AsyncClient(url, token, retry=FAST_RETRY)

    def _wait(self, work: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if inspect.iscoroutinefunction(attribute):
            return lambda *args, **kwargs: self._wait(attribute(*args, **kwargs))
        if inspect.isasyncgenfunction(attribute):
            return lambda *args, **kwargs: self._wait(_gather(attribute(*args, **kwargs)))
        return attribute

    def close(self) -> None:
        self._wait(self._client.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


async def _gather(items: Any) -> list[Any]:
    return [item async for item in items]


def _either(kind: str, url: str, token: str) -> Iterator[Any]:
    if kind == "sync":
        with Client(url, token, retry=FAST_RETRY) as client:
            yield client
    else:
        driven = Driven(url, token)
        try:
            yield driven
        finally:
            driven.close()


@pytest.fixture(params=["sync", "async"])
def admin(request: pytest.FixtureRequest, server: str) -> Iterator[Any]:
    yield from _either(request.param, server, ADMIN_TOKEN)


@pytest.fixture(params=["sync", "async"])
def client(request: pytest.FixtureRequest, server: str, token: str) -> Iterator[Any]:
    yield from _either(request.param, server, token)


def test_admin_plane(admin: Client, namespace: str) -> None:
    acme = f"{namespace}-acme"
    created = admin.create_namespace(acme, "a tenant")
    assert (created.name, created.description) == (acme, "a tenant")
    assert created.created_at.tzinfo is not None
    with pytest.raises(Conflict):
        admin.create_namespace(acme)
    assert acme in [n.name for n in admin.list_namespaces()]
    issued = admin.issue_token(acme, "ci", expires_at=datetime.now(UTC) + timedelta(days=1))
    assert issued.token
    assert issued.label == "ci"
    assert [t.id for t in admin.list_tokens(acme)] == [issued.id]
    with Client(admin.url, issued.token, retry=FAST_RETRY) as tenant:
        tenant.put_queue(f"{acme}/jobs")
        with pytest.raises(Forbidden):
            tenant.list_namespaces()
        admin.revoke_token(acme, issued.id)
        with pytest.raises(Unauthorized):
            tenant.list_queues(acme)
    admin.delete_namespace(acme)
    with pytest.raises(NotFound):
        admin.list_queues(acme)


def test_queue_lifecycle(q: str, client: Client) -> None:
    queue = client.put_queue(q, lease_seconds=60, max_attempts=5)
    assert (queue.path, queue.lease_seconds, queue.max_attempts) == (q, 60, 5)
    assert client.put_queue(q, lease_seconds=60, max_attempts=5).created_at == queue.created_at
    client.enqueue(q, {"n": 1})
    detail = client.get_queue(q)
    assert detail.counts["pending"] == 1
    assert detail.oldest_pending_age_seconds is not None
    assert [queue.name for queue in client.list_queues(q.split("/")[0])] == ["jobs"]
    paused = client.update_queue(q, enqueue_paused=True)
    assert paused.enqueue_paused
    assert paused.lease_seconds == 60
    with pytest.raises(QueuePaused):
        client.enqueue(q, {"n": 2})
    client.update_queue(q, enqueue_paused=False)
    with pytest.raises(Conflict):
        client.put_queue(q, kind="exclusive", exclusive_key="k")
    assert client.purge(q) == 1
    client.delete_queue(q)
    with pytest.raises(NotFound):
        client.get_queue(q)


def test_produce_consume_and_fencing(q: str, client: Client) -> None:
    client.put_queue(q, max_attempts=2)
    first = client.enqueue(q, {"to": "ada"}, id="welcome-42", metadata={"lang": "en"})
    assert (first.id, first.state, first.created) == ("welcome-42", "pending", True)
    again = client.enqueue(q, {"to": "someone else"}, id="welcome-42")
    assert not again.created
    client.enqueue(q, "later", id="later-1", delay_seconds=3600)
    outcomes = client.enqueue_many(
        q, [NewMessage(id="urgent", priority=0), NewMessage(id="urgent"), NewMessage()]
    )
    assert [o.created for o in outcomes] == [True, False, True]

    [leased] = client.dequeue(q)
    assert leased.id == "urgent"
    assert leased.attempt == 1
    assert leased.payload is None
    extended = client.extend(q, leased.id, leased.lease_id, 120)
    assert extended.lease_expires_at is not None
    assert extended.lease_expires_at > leased.lease_expires_at
    with pytest.raises(LeaseMismatch):
        client.complete(q, leased.id, "not-the-lease")
    assert client.complete(q, leased.id, leased.lease_id).state == "completed"
    with pytest.raises(InvalidState):
        client.cancel(q, leased.id)

    [welcome] = client.dequeue(q, metadata={"lang": "en"})
    assert welcome.payload == {"to": "ada"}
    assert welcome.metadata == {"lang": "en"}
    failed = client.fail(q, welcome.id, welcome.lease_id, "smtp timeout")
    assert (failed.state, failed.last_error) == ("pending", "smtp timeout")
    [welcome] = client.dequeue(q, metadata={"lang": "en"})
    results = client.ack(q, fail=[(welcome.id, welcome.lease_id, "again"), ("nope", "x", None)])
    assert [(r.id, r.ok) for r in results] == [("welcome-42", True), ("nope", False)]
    assert client.get_message(q, "welcome-42").state == "errored"
    assert client.requeue_dead_letters(q) == 1
    assert client.get_message(q, "welcome-42").attempts == 0

    assert client.update_message(q, "later-1", priority=7).priority == 7
    canceled = client.cancel(q, "later-1", reason="not needed")
    assert canceled.state == "canceled"
    assert client.requeue(q, "later-1").state == "pending"
    client.delete_message(q, "later-1")
    with pytest.raises(NotFound):
        client.get_message(q, "later-1")


def test_listing_pages_through_everything(q: str, client: Client) -> None:
    client.put_queue(q)
    client.enqueue_many(q, [NewMessage(id=f"m{i:02}", priority=i) for i in range(25)])
    page = client.query_messages(q, order="priority", limit=10)
    assert [m.id for m in page.messages] == [f"m{i:02}" for i in range(10)]
    assert page.next_cursor is not None
    every = list(client.messages(q, order="priority", page_size=10))
    assert [m.id for m in every] == [f"m{i:02}" for i in range(25)]
    low = client.query_messages(q, priority_gte=20, priority_lt=22, states=["pending"])
    assert sorted(m.id for m in low.messages) == ["m20", "m21"]


def test_validation_errors_name_the_field(q: str, client: Client) -> None:
    client.put_queue(q)
    with pytest.raises(ValidationError) as caught:
        client.enqueue(q, 1, delay_seconds=-1)
    assert caught.value.status == 400
    assert caught.value.field is not None
    assert "delay_seconds" in caught.value.field
    with pytest.raises(ValueError, match="namespace/queue"):
        split_queue("no-slash")


def test_operations_endpoints(admin: Client) -> None:
    assert admin.health().status == "ok"
    assert admin.ready().status == "ready"
    assert "# TYPE sundial_http_requests_total counter" in admin.metrics()
    schema = admin.schema()
    assert schema["openapi"].startswith("3.")
    assert "/v1/namespaces" in schema["paths"]


async def test_async_client_on_the_callers_own_event_loop(q: str, aclient: AsyncClient) -> None:
    await aclient.put_queue(q, lease_seconds=30)
    await aclient.enqueue(q, {"n": 1}, id="a")
    await aclient.enqueue_many(q, [NewMessage(id="b", payload={"n": 2})])
    assert [m.id async for m in aclient.messages(q, order="priority")] == ["a", "b"]
    leased = await aclient.dequeue(q, 10, wait_seconds=1)
    assert {m.id for m in leased} == {"a", "b"}
    for message in leased:
        await aclient.complete(q, message.id, message.lease_id)
    assert (await aclient.get_queue(q)).counts["completed"] == 2
    with pytest.raises(NotFound):
        await aclient.get_message(q, "zzz")


# --- retries: the policy alone, over a scripted transport (no server involved) -----------------


def scripted(*answers: httpx.Response | Exception) -> tuple[httpx.MockTransport, list[str]]:
    """A transport that answers each request with the next item; records request paths."""
    queue, seen = list(answers), []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.MockTransport(handle), seen


def error(status: int, code: str, retry_after: str | None = None) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after else {}
    body = {"error": {"code": code, "message": code, "details": {}}}
    return httpx.Response(status, json=body, headers=headers)


ENQUEUED = httpx.Response(
    201, json={"messages": [{"id": "x", "state": "pending", "created": True}]}
)
Q = "shop/emails"
QUICK = RetryPolicy(attempts=3, initial_wait=0.01, max_wait=0.01)


def test_unknown_outcomes_are_retried_only_when_safe() -> None:
    transport, seen = scripted(error(503, "unavailable"))
    with (
        Client("http://sundial.test", "t", transport=transport, retry=QUICK) as client,
        pytest.raises(Unavailable),
    ):
        client.purge(Q)  # a second purge would also delete what arrived in between
    assert len(seen) == 1

    transport, seen = scripted(error(503, "unavailable"), ENQUEUED)
    with Client("http://sundial.test", "t", transport=transport, retry=QUICK) as client:
        assert client.enqueue(Q, 1, id="x").created  # has an id: safe to send again
    assert len(seen) == 2

    transport, seen = scripted(error(503, "unavailable"), httpx.ReadTimeout("slow"))
    with Client("http://sundial.test", "t", transport=transport, retry=QUICK) as client:
        with pytest.raises(Unavailable):
            client.enqueue(Q, 1)  # no id: a second try could enqueue it twice
        with pytest.raises(httpx.ReadTimeout):
            client.dequeue(Q)  # a second try could lease more than asked for
    assert seen == [f"POST /v1/namespaces/shop/queues/emails/{p}" for p in ("messages", "dequeue")]


def test_completes_are_retried_through_an_outage_and_fails_are_not() -> None:
    now = "2026-01-01T00:00:00Z"
    message = {
        "id": "x", "state": "completed", "priority": 0, "payload": None, "metadata": {},
        "attempts": 1, "max_attempts": 5, "lease_seconds": 30, "lease_id": "lease",
        "lease_expires_at": None, "visible_at": now, "expires_at": None, "enqueued_at": now,
        "updated_at": now, "finished_at": now, "last_error": None, "exclusive_value": None,
    }  # fmt: skip
    completed = httpx.Response(200, json=message)
    transport, seen = scripted(error(503, "unavailable"), httpx.ReadTimeout("lost"), completed)
    with Client("http://sundial.test", "t", transport=transport, retry=QUICK) as client:
        assert client.complete(Q, "x", "lease").state == "completed"  # the same lease: safe
    assert len(seen) == 3

    acked = httpx.Response(200, json={"results": [{"id": "x", "ok": True}]})
    transport, seen = scripted(error(503, "unavailable"), acked, *[error(503, "unavailable")] * 2)
    with Client("http://sundial.test", "t", transport=transport, retry=QUICK) as client:
        assert client.ack(Q, complete=[("x", "lease")])[0].ok
        with pytest.raises(Unavailable):
            client.ack(Q, fail=[("x", "lease", "boom")])  # a repeated fail would be refused
        with pytest.raises(Unavailable):
            client.fail(Q, "x", "lease")
    assert len(seen) == 4


def test_requests_that_never_arrived_are_always_retried() -> None:
    transport, seen = scripted(
        httpx.ConnectError("refused"), error(429, "rate_limited", "0"), ENQUEUED
    )
    with Client("http://sundial.test", "t", transport=transport, retry=QUICK) as client:
        assert client.enqueue(Q, 1).created  # no id, yet nothing reached the server before
    assert len(seen) == 3


def test_retries_give_up_after_the_policy_attempts() -> None:
    transport, seen = scripted(*[error(429, "rate_limited")] * 3)
    with (
        Client("http://sundial.test", "t", transport=transport, retry=QUICK) as client,
        pytest.raises(RateLimited),
    ):
        client.get_queue(Q)
    assert len(seen) == 3


def test_non_sundial_error_bodies_still_raise_api_errors() -> None:
    transport, _ = scripted(httpx.Response(502, text="bad gateway"))
    with (
        Client("http://sundial.test", "t", transport=transport, retry=QUICK) as client,
        pytest.raises(ApiError) as caught,
    ):
        client.get_queue(Q)
    assert (caught.value.status, caught.value.code) == (502, "http_502")
