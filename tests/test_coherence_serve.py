"""Changes apply to every request sent after their answer, across real server processes.

A server with two worker processes and a second server share one database (the embedded
default's), as an operator runs them. Keep-alive connections, spread over both servers, loop
requests around a token revoke, a namespace deleted and recreated under the same name, and a
pause; every request sent after the change's answer must see it (tests/api/test_coherence.py
does the same in process, with more cases). The SQS door is held to the same rule.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.processes import free_port
from tests.test_serve import serve

CONNECTIONS = 6
WARM = 20  # requests each connection makes before the change (reaching both workers)
AFTER = 30  # requests each connection makes after the change's answer

T = TypeVar("T")
C = TypeVar("C")


@dataclass
class Seen(Generic[T]):
    """What the connections saw before the change, and after its answer."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    before: set[T] = field(default_factory=set)
    after: list[T] = field(default_factory=list)


def hammer(
    clients: Sequence[C], request: Callable[[C, int], T], change: Callable[[], None]
) -> Seen[T]:
    """A thread per client (each its own keep-alive connection) loops ``request`` (with the
    request's number); ``change`` runs once all have made WARM requests."""
    seen: Seen[T] = Seen()
    warm = threading.Barrier(len(clients) + 1, timeout=60)
    changed = threading.Event()

    def loop(client: C) -> None:
        for n in range(WARM):
            found = request(client, n)
            with seen.lock:
                seen.before.add(found)
        warm.wait()
        changed.wait(60)
        for n in range(AFTER):
            found = request(client, n)
            with seen.lock:
                seen.after.append(found)

    threads = [threading.Thread(target=loop, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    try:
        warm.wait()
        change()
    finally:
        changed.set()
        for thread in threads:
            thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    return seen


@contextmanager
def http_clients(bases: list[str], token: str) -> Iterator[list[httpx.Client]]:
    """CONNECTIONS clients presenting ``token``, spread over ``bases``."""
    headers = {"Authorization": f"Bearer {token}"}
    with ExitStack() as stack:
        yield [
            stack.enter_context(
                httpx.Client(base_url=bases[i % len(bases)], headers=headers, timeout=30)
            )
            for i in range(CONNECTIONS)
        ]


def answered(
    request: Callable[[httpx.Client], httpx.Response],
) -> Callable[[httpx.Client, int], tuple[int, str]]:
    """``request`` as :func:`hammer` records it: its status and the start of its body."""

    def run(client: httpx.Client, _: int) -> tuple[int, str]:
        answer = request(client)
        return answer.status_code, answer.text[:200]

    return run


def statuses(found: set[tuple[int, str]] | list[tuple[int, str]]) -> set[int]:
    return {status for status, _ in found}


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[list[str], httpx.Client]]:
    """Two servers on one database, the first with two workers; and an admin client of it."""
    data_dir = tmp_path / "data"
    with ExitStack() as second, ExitStack() as first:
        one = first.enter_context(serve(data_dir, free_port(), workers=2))
        two = second.enter_context(serve(data_dir, free_port()))
        token = (data_dir / "admin-token").read_text().strip()
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=one, headers=headers, timeout=30) as admin:
            yield [one, two], admin


def new_token(admin: httpx.Client, namespace: str) -> tuple[str, str]:
    answer = admin.post(f"/v1/namespaces/{namespace}/tokens", json={})
    assert answer.status_code == 201, answer.text
    return answer.json()["token"], answer.json()["id"]


def created(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code in (200, 201, 204), answer.text
    return answer


@pytest.mark.slow
def test_no_stale_answer_across_workers_and_servers(
    servers: tuple[list[str], httpx.Client],
) -> None:
    bases, admin = servers
    created(admin.post("/v1/namespaces", json={"name": "shop"}))
    created(admin.put("/v1/namespaces/shop/queues/jobs", json={}))
    enqueue_body = {"messages": [{"payload": {"n": 1}}]}

    # A revoked token: every request after the answer is refused, listings and enqueues alike.
    secret, token_id = new_token(admin, "shop")

    def list_or_enqueue(client: httpx.Client, n: int) -> tuple[int, str]:
        if n % 2:
            return answered(lambda c: c.get("/v1/namespaces/shop/queues"))(client, n)
        post = answered(
            lambda c: c.post("/v1/namespaces/shop/queues/jobs/messages", json=enqueue_body)
        )
        return post(client, n)

    with http_clients(bases, secret) as clients:
        seen = hammer(
            clients,
            list_or_enqueue,
            lambda: created(admin.delete(f"/v1/namespaces/shop/tokens/{token_id}")),
        )
    assert statuses(seen.before) == {200, 201}
    assert statuses(seen.after) == {401}, seen.after

    # A namespace deleted and recreated under its name: the old token reads nothing of the new.
    secret, _ = new_token(admin, "shop")

    def recreate() -> None:
        created(admin.delete("/v1/namespaces/shop"))
        created(admin.post("/v1/namespaces", json={"name": "shop"}))
        created(admin.put("/v1/namespaces/shop/queues/jobs", json={}))

    with http_clients(bases, secret) as clients:
        seen = hammer(
            clients, answered(lambda c: c.get("/v1/namespaces/shop/queues/jobs")), recreate
        )
    assert statuses(seen.before) == {200}
    assert statuses(seen.after) == {401}, seen.after

    # A pause: every enqueue sent after the answer is refused.
    secret, _ = new_token(admin, "shop")
    with http_clients(bases, secret) as clients:
        seen = hammer(
            clients,
            answered(
                lambda c: c.post("/v1/namespaces/shop/queues/jobs/messages", json=enqueue_body)
            ),
            lambda: created(
                admin.patch("/v1/namespaces/shop/queues/jobs", json={"enqueue_paused": True})
            ),
        )
    assert statuses(seen.before) == {201}
    assert statuses(seen.after) == {409}, seen.after


@pytest.mark.slow
def test_no_stale_sqs_answer_across_workers_and_servers(
    servers: tuple[list[str], httpx.Client],
) -> None:
    """The SQS door keeps the same rule: once a key's revocation (or a queue's deletion) is
    answered, every SQS request sent after it, to any worker of any server, sees it, including
    answers made of lookups alone (GetQueueUrl, ListQueueTags)."""
    bases, admin = servers
    created(admin.post("/v1/namespaces", json={"name": "acct"}))
    answer = admin.post("/v1/namespaces/acct/tokens", json={"kind": "sqs"})
    created(answer)
    key_id, secret, token_id = (answer.json()[k] for k in ("access_key_id", "token", "id"))
    clients = [
        boto3.client(
            "sqs",
            endpoint_url=f"{bases[i % len(bases)]}/sqs",
            region_name="us-east-1",
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            config=Config(retries={"max_attempts": 0, "mode": "standard"}),
        )
        for i in range(CONNECTIONS)
    ]
    url = clients[0].create_queue(QueueName="jobs", tags={"team": "a"})["QueueUrl"]
    calls: list[Callable[[Any], object]] = [
        lambda c: c.get_queue_url(QueueName="jobs"),
        lambda c: c.list_queue_tags(QueueUrl=url),
        lambda c: c.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"]),
        lambda c: c.send_message(QueueUrl=url, MessageBody="x"),
    ]

    def code(client: Any, n: int) -> str:
        try:
            calls[n % len(calls)](client)
        except ClientError as error:
            return str(error.response["Error"]["Code"])
        return "ok"

    seen = hammer(clients, code, lambda: created(admin.delete("/v1/namespaces/acct/queues/jobs")))
    assert seen.before == {"ok"}
    assert set(seen.after) == {"AWS.SimpleQueueService.NonExistentQueue"}, seen.after

    clients[0].create_queue(QueueName="jobs", tags={"team": "a"})
    revoke = lambda: created(admin.delete(f"/v1/namespaces/acct/tokens/{token_id}"))  # noqa: E731
    seen = hammer(clients, code, revoke)
    assert seen.before == {"ok"}
    assert set(seen.after) == {"InvalidClientTokenId"}, seen.after
