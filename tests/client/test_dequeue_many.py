"""``dequeue_many`` of the sync and async clients, and ``sundial dequeue`` of several queues,
against a real server: the queues' order, each message's queue as the client names queues, a
long poll woken by the second queue, and the errors."""

from __future__ import annotations

import json
import threading
import time

import pytest

from app.client import Client, LeasedFrom, NewMessage, NotFound, ValidationError
from tests.client.test_cli import sundial  # noqa: F401 - the fixture
from tests.client.test_client import client  # noqa: F401 - the fixture, sync and async
from tests.observability.helpers import parse, value

WAIT = 10


def long_polls_parked(metrics: str) -> float:
    """The long polls the test server reports parked, in its ``metrics``: the waiters gauge,
    sampled every second (the server's waiter registry lives in an event loop of its own)."""
    return value(parse(metrics), "sundial_longpoll_waiters", pool="default")


def until_parked(scraper: Client, polls: int) -> None:
    """Until the test server reports ``polls`` long polls parked."""
    deadline = time.monotonic() + WAIT
    while long_polls_parked(scraper.metrics()) != polls:
        assert time.monotonic() < deadline, f"the server never reported {polls} parked polls"
        time.sleep(0.05)  # then scrape again


def test_dequeue_many_in_the_queues_order(namespace: str, client: Client) -> None:  # noqa: F811
    urgent, bulk = f"{namespace}/urgent", f"{namespace}/bulk"
    client.put_queue(urgent)
    client.put_queue(bulk)
    client.enqueue_many(bulk, [NewMessage(id="b1", priority=0), NewMessage(id="b2", priority=0)])
    client.enqueue(urgent, "now", id="u1", priority=99)
    leased = client.dequeue_many([urgent, bulk], count=2, lease_seconds=60)
    assert all(isinstance(m, LeasedFrom) for m in leased)
    assert [(m.queue, m.id) for m in leased] == [(urgent, "u1"), (bulk, "b1")]
    assert leased[0].payload == "now"
    for m in leased:  # each is completed where it says it came from
        assert client.complete(m.queue, m.id, m.lease_id).state == "completed"
    assert [(m.queue, m.id) for m in client.dequeue_many([urgent, bulk], 5)] == [(bulk, "b2")]
    assert client.dequeue_many([urgent, bulk]) == []


def test_a_long_poll_returns_when_the_second_queue_gets_a_message(
    namespace: str,
    client: Client,  # noqa: F811
    server: str,
    token: str,
) -> None:
    first, second = f"{namespace}/first", f"{namespace}/second"
    client.put_queue(first)
    client.put_queue(second)
    answers: list[list[LeasedFrom]] = []
    poll = threading.Thread(
        target=lambda: answers.append(client.dequeue_many([first, second], wait_seconds=WAIT))
    )
    with Client(server, token) as producer:
        until_parked(producer, 0)  # the earlier tests' polls are gone from the gauge
        poll.start()
        until_parked(producer, 1)  # the poll waits: the message must wake it
        enqueued = time.monotonic()
        producer.enqueue(second, id="late")
    poll.join(WAIT + 5)
    assert [(m.queue, m.id) for m in answers[0]] == [(second, "late")]
    assert time.monotonic() - enqueued < WAIT / 2


def test_errors(namespace: str, client: Client) -> None:  # noqa: F811
    client.put_queue(f"{namespace}/a")
    with pytest.raises(NotFound):
        client.dequeue_many([f"{namespace}/a", f"{namespace}/nope"])
    with pytest.raises(ValidationError) as error:
        client.dequeue_many([f"{namespace}/a", f"{namespace}/a"])
    assert error.value.field == "queues[1]"
    with pytest.raises(ValueError, match="one namespace"):
        client.dequeue_many([f"{namespace}/a", "elsewhere/b"])


def test_the_cli_dequeues_several_queues(namespace: str, sundial, client: Client) -> None:  # noqa: F811
    a, b = f"{namespace}/a", f"{namespace}/b"
    client.put_queue(a)
    client.put_queue(b)
    client.enqueue(b, 1, id="b1")
    client.enqueue(b, 2, id="b2")
    client.enqueue(a, 3, id="a1")
    out = json.loads(sundial("dequeue", a, b, "--count", "2", "--json").stdout)
    assert [(m["queue"], m["id"]) for m in out] == [(a, "a1"), (b, "b1")]
    table = sundial("dequeue", a, b).stdout
    assert b in table, table
    assert " b2 " in table, table
