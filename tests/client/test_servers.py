"""A client given several servers moves on to the next when a request fails in transit
(``app.client.servers``), so that a producer keeps going when one server dies."""

from __future__ import annotations

import httpx
import pytest

from app.client import AsyncClient, Client, RetryPolicy
from app.client.servers import server_urls
from tests.processes import free_port

QUICK = RetryPolicy(attempts=3, initial_wait=0.01, max_wait=0.01)
ENQUEUED = {"messages": [{"id": "x", "state": "pending", "created": True}]}
Q = "shop/emails"


def two_servers_one_down() -> tuple[httpx.MockTransport, list[str]]:
    """``a.test`` refuses every connection; ``b.test`` enqueues. Records the hosts asked."""
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["Host"])
        if request.url.host == "a.test":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(201, json=ENQUEUED)

    return httpx.MockTransport(handle), seen


def test_a_request_refused_by_one_server_goes_to_the_next() -> None:
    transport, seen = two_servers_one_down()
    urls = ["http://a.test:8080", "http://b.test:8081"]
    with Client(urls, "t", transport=transport, retry=QUICK) as client:
        assert client.url == "http://a.test:8080/"
        assert client.enqueue(Q, 1).created
        assert client.url == "http://b.test:8081/"
        assert client.enqueue(Q, 2).created  # stays on the server that works
    assert seen == ["a.test:8080", "b.test:8081", "b.test:8081"]


async def test_the_async_client_moves_on_too() -> None:
    seen: list[str] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.host)
        if request.url.host == "a.test":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(201, json=ENQUEUED)

    transport = httpx.MockTransport(handle)
    async with AsyncClient(
        "http://a.test,http://b.test", "t", transport=transport, retry=QUICK
    ) as c:
        assert (await c.enqueue(Q, 1)).created
    assert seen == ["a.test", "b.test"]


def test_one_server_is_used_as_before() -> None:
    transport, seen = two_servers_one_down()
    with (
        Client("http://a.test", "t", transport=transport, retry=QUICK) as client,
        pytest.raises(httpx.ConnectError),
    ):
        client.enqueue(Q, 1)
    assert seen == ["a.test"] * QUICK.attempts


def test_urls_come_from_the_argument_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUNDIAL_URL", "http://a:8080, http://b:8081/")
    assert server_urls(None) == ["http://a:8080/", "http://b:8081/"]
    assert server_urls(["http://c:1"]) == ["http://c:1/"]
    with pytest.raises(ValueError, match="share one path"):
        server_urls(["http://a/x", "http://b/y"])


def test_a_dead_server_first_in_the_list_costs_nothing_but_a_retry(server: str, token: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with Client([dead, server], token, retry=QUICK) as client:
        assert client.health().status == "ok"
        assert client.url == server.rstrip("/") + "/"
