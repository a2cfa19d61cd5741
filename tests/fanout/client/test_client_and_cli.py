"""Topics through the Python client (sync and async) and ``sundial topic`` against a real
server over a real socket."""

from __future__ import annotations

import json

import pytest

from app.client import AsyncClient, Client, NewMessage, NotFound, QueuePaused, ValidationError
from tests.client.conftest import Sundial


def test_sync_client_round_trip(client: Client, namespace: str) -> None:
    for queue in ("billing", "audit"):
        client.put_queue(f"{namespace}/{queue}")
    topic = client.put_topic(f"{namespace}/orders", ["billing", ("audit", "kind", ["A", "B"])])
    assert topic.path == f"{namespace}/orders"
    assert [(s.queue, s.tags) for s in topic.subscriptions] == [
        ("audit", ["A", "B"]),
        ("billing", None),
    ]

    [a, c] = client.publish(
        topic.path,
        [
            NewMessage(id="a", payload={"n": 1}, metadata={"kind": "A"}),
            NewMessage(id="c", metadata={"kind": "C"}),
        ],
    )
    assert sorted((d.queue, d.created) for d in a.queues) == [("audit", True), ("billing", True)]
    assert [d.queue for d in c.queues] == ["billing"]
    [again] = client.publish(topic.path, [NewMessage(id="a", metadata={"kind": "A"})])
    assert not any(d.created for d in again.queues)
    assert client.get_message(f"{namespace}/audit", "a").payload == {"n": 1}

    client.unsubscribe(topic.path, "audit")
    assert [s.queue for s in client.get_topic(topic.path).subscriptions] == ["billing"]
    with pytest.raises(NotFound):
        client.unsubscribe(topic.path, "audit")
    client.subscribe(topic.path, "audit", tag_key="kind", tags=["Z"])
    assert [t.name for t in client.list_topics(namespace)] == ["orders"]

    client.update_queue(f"{namespace}/billing", enqueue_paused=True)
    with pytest.raises(QueuePaused):
        client.publish(topic.path, [NewMessage(id="p", metadata={"kind": "Z"})])
    with pytest.raises(NotFound):
        client.get_message(f"{namespace}/audit", "p")
    with pytest.raises(ValidationError):
        client.put_topic(topic.path, ["missing"])
    client.delete_topic(topic.path)
    with pytest.raises(NotFound):
        client.get_topic(topic.path)


async def test_async_client_round_trip(aclient: AsyncClient, namespace: str) -> None:
    await aclient.put_queue(f"{namespace}/one")
    await aclient.put_queue(f"{namespace}/two")
    topic = await aclient.subscribe(f"{namespace}/news", "one")
    await aclient.subscribe(topic.path, "two")

    [published] = await aclient.publish(topic.path, [NewMessage(payload="hi")])

    assert sorted(d.queue for d in published.queues) == ["one", "two"]
    for queue in ("one", "two"):
        message = await aclient.get_message(f"{namespace}/{queue}", published.id)
        assert message.payload == "hi"
    assert [t.name for t in await aclient.list_topics(namespace)] == ["news"]
    await aclient.delete_topic(topic.path)
    assert await aclient.list_topics(namespace) == []


def test_cli(sundial: Sundial, client: Client, namespace: str) -> None:
    for queue in ("billing", "audit"):
        client.put_queue(f"{namespace}/{queue}")
    topic = f"{namespace}/orders"
    shown = json.loads(
        sundial("topic", "set", topic, "billing", "audit:kind=A||B", "--json").output
    )
    assert shown["subscriptions"][0] == {
        "queue": "audit",
        "tag_key": "kind",
        "tags": ["A", "B"],
        "subscribed_at": shown["subscriptions"][0]["subscribed_at"],
    }
    assert "kind in A || B" in sundial("topic", "list", namespace).output

    out = sundial("topic", "publish", topic, "--id", "o1", "--payload", '{"n": 1}', "--json").output
    assert sorted(d["queue"] for d in json.loads(out)["queues"]) == ["billing"]
    out = sundial("topic", "publish", topic, "--id", "o2", "--metadata", "kind=B").output
    assert "audit" in out
    assert "billing" in out

    sundial("topic", "unsubscribe", topic, "billing")
    sundial("topic", "subscribe", topic, "billing", "--tags", "kind=C")
    assert "kind in C" in sundial("topic", "show", topic).output
    sundial("topic", "delete", topic)
    assert "not_found" in sundial("topic", "show", topic, code=1).output
    refused = sundial("topic", "set", topic, "nowhere", code=1).output
    assert "subscriptions[0].queue" in refused
