"""The sync and async clients against a real server: every endpoint, typed answers and errors.

Every scenario written against ``Client`` runs twice: once with ``Client``, once with
``AsyncClient`` driven through the same interface on an event loop of its own (:class:`Driven`),
so both clients are held to every call.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError

from app.client import (
    ApiError,
    AsyncClient,
    Client,
    Conflict,
    Forbidden,
    InvalidState,
    LeaseMismatch,
    Message,
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


# --- dead-letter queues and SQS access keys ----------------------------------------------------


def _eventually(read: Callable[[], Message], timeout: float = 10.0) -> Message:
    """What ``read`` answers once it stops raising NotFound: the scheduler moves dead letters
    within a tick (0.05 s here); the deadline only bounds a failing test."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return read()
        except NotFound:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _redriven(metrics: str) -> float:
    [value] = re.findall(r"^sundial_messages_redriven_total (\S+)$", metrics, re.M)
    return float(value)


def test_a_queue_names_its_dead_letter_queue(q: str, client: Client) -> None:
    """``dead_letter_queue`` is set by PUT, changed and cleared by PATCH, reset by a PUT that
    leaves it out, and a 400 naming it when it names the queue itself or is no queue name."""
    namespace, name = split_queue(q)
    assert client.put_queue(q).dead_letter_queue is None
    assert client.put_queue(q, dead_letter_queue="jobs-dead").dead_letter_queue == "jobs-dead"
    assert client.get_queue(q).dead_letter_queue == "jobs-dead"
    assert [queue.dead_letter_queue for queue in client.list_queues(namespace)] == ["jobs-dead"]
    assert client.update_queue(q, dead_letter_queue="other").dead_letter_queue == "other"
    assert client.update_queue(q, dead_letter_queue=None).dead_letter_queue is None
    refusals: list[Callable[[], Any]] = [
        lambda: client.put_queue(q, dead_letter_queue=name),
        lambda: client.update_queue(q, dead_letter_queue=name),
        lambda: client.update_queue(q, dead_letter_queue="no spaces"),
    ]
    for refused in refusals:
        with pytest.raises(ValidationError) as caught:
            refused()
        assert caught.value.field == "dead_letter_queue"
    assert client.get_queue(q).dead_letter_queue is None
    client.update_queue(q, dead_letter_queue="jobs-dead")
    assert client.put_queue(q).dead_letter_queue is None  # PUT sets the whole configuration


def test_a_dead_letter_moves_pending_into_the_dead_letter_queue(q: str, client: Client) -> None:
    """A message failed on its last attempt arrives in the dead-letter queue pending, attempts
    reset, with its id, payload, metadata, priority, times and last error; its exclusive and
    filter values are read with the target's keys; its queue keeps it canceled, dead-lettered to
    the target (so its id stays taken there); the counter counts it."""
    namespace, _ = split_queue(q)
    dead = f"{namespace}/jobs-dead"
    client.put_queue(
        dead, kind="exclusive", exclusive_key="tenant", filter_key="region", max_attempts=4
    )
    client.put_queue(q, max_attempts=1, dead_letter_queue="jobs-dead")
    before = _redriven(client.metrics())
    metadata = {"tenant": "acme", "region": "eu"}
    expires_at = datetime.now(UTC) + timedelta(hours=1)
    client.enqueue(q, {"n": 1}, id="m-1", priority=7, metadata=metadata, expires_at=expires_at)
    [leased] = client.dequeue(q)
    original = client.get_message(q, "m-1")
    assert original.exclusive_value is None  # q is a simple queue
    assert client.fail(q, leased.id, leased.lease_id, "boom").state == "errored"

    moved = _eventually(lambda: client.get_message(dead, "m-1"))
    assert (moved.state, moved.attempts, moved.max_attempts) == ("pending", 0, 4)
    assert (moved.priority, moved.payload, moved.metadata) == (7, {"n": 1}, metadata)
    assert (moved.enqueued_at, moved.expires_at) == (original.enqueued_at, original.expires_at)
    assert (moved.last_error, moved.exclusive_value) == ("boom", "acme")
    # One statement: never live in both queues. The source keeps a tombstone.
    left = client.get_message(q, "m-1")
    assert (left.state, left.last_error) == ("canceled", "dead-lettered to jobs-dead")
    assert left.finished_at is not None
    assert left.finished_at >= original.updated_at
    assert (left.payload, left.metadata, left.attempts) == ({"n": 1}, metadata, 1)
    counts = client.get_queue(q).counts
    assert (counts["errored"], counts["canceled"]) == (0, 1)
    again_sent = client.enqueue(q, {"n": 2}, id="m-1")  # a resend finds the tombstone
    assert (again_sent.created, again_sent.state) == (False, "canceled")
    assert client.get_message(q, "m-1") == left
    [again] = client.dequeue(dead, metadata={"region": "eu"})  # the target's filter key
    assert (again.id, again.attempt) == ("m-1", 1)

    deadline = time.monotonic() + 10
    while _redriven(client.metrics()) < before + 1:  # counted after the tick that moved it
        assert time.monotonic() < deadline, "sundial_messages_redriven_total did not count it"
        time.sleep(0.02)


def test_dead_letters_stay_while_their_move_is_impossible(q: str, client: Client) -> None:
    """A dead letter stays errored while its dead-letter queue does not exist, and while that
    queue holds its id; it moves once the queue exists. Another queue's dead letter, failed
    later, shows that the scheduler had its turn at them."""
    namespace, _ = split_queue(q)
    client.put_queue(q, max_attempts=1, dead_letter_queue="later")
    client.put_queue(f"{q}-2", max_attempts=1, dead_letter_queue="jobs-dead")
    client.put_queue(f"{namespace}/jobs-dead")
    client.enqueue(f"{namespace}/jobs-dead", "already here", id="taken")
    for queue, message_id in ((q, "lost"), (f"{q}-2", "taken"), (f"{q}-2", "sentinel")):
        client.enqueue(queue, message_id, id=message_id)
        [leased] = client.dequeue(queue)
        client.fail(queue, leased.id, leased.lease_id, "boom")

    _eventually(lambda: client.get_message(f"{namespace}/jobs-dead", "sentinel"))
    assert client.get_message(q, "lost").state == "errored"
    assert client.get_message(f"{q}-2", "taken").state == "errored"
    assert client.get_message(f"{namespace}/jobs-dead", "taken").payload == "already here"

    client.put_queue(f"{namespace}/later")
    assert _eventually(lambda: client.get_message(f"{namespace}/later", "lost")).state == "pending"


def test_issuing_an_sqs_access_key(admin: Client, namespace: str, server: str) -> None:
    """``issue_token(kind="sqs")`` answers an access key id and a secret access key that signs
    requests to the SQS door; listings tell the kinds apart; revoking refuses the key."""
    bearer = admin.issue_token(namespace, "api")
    assert (bearer.kind, bearer.access_key_id) == ("bearer", None)
    issued = admin.issue_token(namespace, "sqs-app", kind="sqs")
    assert issued.kind == "sqs"
    assert issued.access_key_id is not None
    assert re.fullmatch(r"SDLK[A-Z2-7]{16}", issued.access_key_id)
    assert len(issued.token) == 40
    assert issued.label == "sqs-app"
    listed = {token.id: (token.kind, token.access_key_id) for token in admin.list_tokens(namespace)}
    assert listed == {bearer.id: ("bearer", None), issued.id: ("sqs", issued.access_key_id)}

    sqs = boto3.client(
        "sqs",
        endpoint_url=f"{server}/sqs",
        region_name="eu-west-1",
        aws_access_key_id=issued.access_key_id,
        aws_secret_access_key=issued.token,
    )
    url = sqs.create_queue(QueueName="from-sqs")["QueueUrl"]
    assert admin.get_queue(f"{namespace}/from-sqs").name == "from-sqs"
    admin.revoke_token(namespace, issued.id)
    with pytest.raises(ClientError) as caught:
        sqs.get_queue_url(QueueName="from-sqs")
    assert caught.value.response["Error"]["Code"] == "InvalidClientTokenId"
    assert url.endswith(f"/sqs/{namespace}/from-sqs")
    with pytest.raises(ValidationError) as refused:
        admin.issue_token(namespace, kind="other")
    assert refused.value.field == "kind"


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
