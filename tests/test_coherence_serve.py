"""Changes apply to every request sent after their answer, across real server processes.

A server with two worker processes and a second server share one database (the embedded
default's), as an operator runs them. Keep-alive connections, spread over both servers, loop
requests around a token revoke, a namespace deleted and recreated under the same name, and a
pause; every request sent after the change's answer must see it (tests/api/test_coherence.py
does the same in process, with more cases). The SQS door is held to the same rule.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass
class Seen:
    lock: threading.Lock = field(default_factory=threading.Lock)
    before: set[int] = field(default_factory=set)
    after: list[tuple[int, str]] = field(default_factory=list)


def hammer(
    bases: list[str],
    token: str,
    request: Callable[[httpx.Client], httpx.Response],
    change: Callable[[], None],
) -> Seen:
    """CONNECTIONS threads, each on one keep-alive connection to one of ``bases``, loop
    ``request``; ``change`` runs once all have made WARM requests."""
    seen = Seen()
    warm = threading.Barrier(CONNECTIONS + 1, timeout=60)
    changed = threading.Event()

    def loop(base: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            for _ in range(WARM):
                status = request(client).status_code
                with seen.lock:
                    seen.before.add(status)
            warm.wait()
            changed.wait(60)
            for _ in range(AFTER):
                answer = request(client)
                with seen.lock:
                    seen.after.append((answer.status_code, answer.text[:200]))

    threads = [
        threading.Thread(target=loop, args=(bases[i % len(bases)],)) for i in range(CONNECTIONS)
    ]
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


def created(answer: httpx.Response) -> None:
    assert answer.status_code in (200, 201, 204), answer.text


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
    requests = iter(range(10**9))

    def list_or_enqueue(client: httpx.Client) -> httpx.Response:
        if next(requests) % 2:
            return client.get("/v1/namespaces/shop/queues")
        return client.post("/v1/namespaces/shop/queues/jobs/messages", json=enqueue_body)

    seen = hammer(
        bases,
        secret,
        list_or_enqueue,
        lambda: created(admin.delete(f"/v1/namespaces/shop/tokens/{token_id}")),
    )
    assert seen.before == {200, 201}
    assert {status for status, _ in seen.after} == {401}, seen.after

    # A namespace deleted and recreated under its name: the old token reads nothing of the new.
    secret, _ = new_token(admin, "shop")

    def recreate() -> None:
        created(admin.delete("/v1/namespaces/shop"))
        created(admin.post("/v1/namespaces", json={"name": "shop"}))
        created(admin.put("/v1/namespaces/shop/queues/jobs", json={}))

    seen = hammer(bases, secret, lambda c: c.get("/v1/namespaces/shop/queues/jobs"), recreate)
    assert seen.before == {200}
    assert {status for status, _ in seen.after} == {401}, seen.after

    # A pause: every enqueue sent after the answer is refused.
    secret, _ = new_token(admin, "shop")
    seen = hammer(
        bases,
        secret,
        lambda c: c.post("/v1/namespaces/shop/queues/jobs/messages", json=enqueue_body),
        lambda: created(
            admin.patch("/v1/namespaces/shop/queues/jobs", json={"enqueue_paused": True})
        ),
    )
    assert seen.before == {201}
    assert {status for status, _ in seen.after} == {409}, seen.after


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
    calls = [
        lambda c: c.get_queue_url(QueueName="jobs"),
        lambda c: c.list_queue_tags(QueueUrl=url),
        lambda c: c.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"]),
        lambda c: c.send_message(QueueUrl=url, MessageBody="x"),
    ]

    def outcomes(change: Callable[[], None]) -> tuple[set[str], set[str]]:
        before: set[str] = set()
        after: set[str] = set()
        lock = threading.Lock()
        warm = threading.Barrier(CONNECTIONS + 1, timeout=60)
        changed = threading.Event()

        def code(client: object, n: int) -> str:
            try:
                calls[n % len(calls)](client)
            except ClientError as error:
                return str(error.response["Error"]["Code"])
            return "ok"

        def loop(client: object) -> None:
            for n in range(WARM):
                found = code(client, n)
                with lock:
                    before.add(found)
            warm.wait()
            changed.wait(60)
            for n in range(AFTER):
                found = code(client, n)
                with lock:
                    after.add(found)

        threads = [threading.Thread(target=loop, args=(c,)) for c in clients]
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
        return before, after

    def delete_queue() -> None:
        created(admin.delete("/v1/namespaces/acct/queues/jobs"))

    before, after = outcomes(delete_queue)
    assert before == {"ok"}
    assert after == {"AWS.SimpleQueueService.NonExistentQueue"}

    clients[0].create_queue(QueueName="jobs", tags={"team": "a"})
    before, after = outcomes(
        lambda: created(admin.delete(f"/v1/namespaces/acct/tokens/{token_id}"))
    )
    assert before == {"ok"}
    assert after == {"InvalidClientTokenId"}
