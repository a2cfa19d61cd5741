"""The clients and the command line with the claim's modes: a dequeue filter with a list of
values (any of them), in ``dequeue``, ``ack_and_dequeue`` and ``sundial dequeue --metadata``
repeated; a queue's ``ordering`` and ``filter_keys``, given at creation and read back
(``sundial queue create --ordering``: tests/test_cli.py). Against a real server."""

from __future__ import annotations

import json

from app.client import AsyncClient, Client, NewMessage
from tests.client.conftest import Sundial

TAGGED = [
    NewMessage(id="a", priority=3, metadata={"tag": "A"}),
    NewMessage(id="b", priority=1, metadata={"tag": "B"}),
    NewMessage(id="c", priority=2, metadata={"tag": "C"}),
]


def test_a_list_in_the_filter_and_the_ordering(q: str, client: Client) -> None:
    created = client.put_queue(q, filter_key="tag", ordering="due")
    assert created.ordering == "due"
    assert client.get_queue(q).ordering == "due"
    client.enqueue_many(q, TAGGED)

    leased = client.dequeue(q, 10, metadata={"tag": ("A", "B")})
    assert [m.id for m in leased] == ["b", "a"]  # one enqueue: due together, by priority
    done = client.ack_and_dequeue(
        q, [(m.id, m.lease_id) for m in leased], metadata={"tag": ["C", "Z"]}
    )
    assert [m.id for m in done.messages] == ["c"]


def test_two_filter_keys(q: str, client: Client) -> None:
    created = client.put_queue(q, filter_keys=["tag", "region"])
    assert (created.filter_key, created.filter_keys) == ("tag", ["tag", "region"])
    assert client.get_queue(q).filter_keys == ["tag", "region"]
    client.enqueue_many(
        q,
        [
            NewMessage(id="eu-2", priority=2, metadata={"tag": "A", "region": "eu"}),
            NewMessage(id="us-1", priority=1, metadata={"tag": "A", "region": "us"}),
            NewMessage(id="eu-3", priority=3, metadata={"region": "eu"}),
        ],
    )

    leased = client.dequeue(q, 10, metadata={"region": "eu"})  # the second key's index
    assert [m.id for m in leased] == ["eu-2", "eu-3"]


async def test_the_async_client_takes_a_list(q: str, aclient: AsyncClient) -> None:
    queue = await aclient.put_queue(q)
    assert queue.ordering == "priority"
    await aclient.enqueue_many(q, TAGGED)

    leased = await aclient.dequeue(q, 10, metadata={"tag": ["C", "A"]})
    assert [m.id for m in leased] == ["c", "a"]


def test_the_command_line_takes_repeated_keys(q: str, client: Client, sundial: Sundial) -> None:
    client.put_queue(q, filter_key="tag")
    client.enqueue_many(q, TAGGED)

    result = sundial(
        "dequeue", q, "--count", "10", "--metadata", "tag=A", "--metadata", "tag=C", "--json"
    )  # exit status 0: the fixture asserts it
    assert [m["id"] for m in json.loads(result.output)] == ["c", "a"]
