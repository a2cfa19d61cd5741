"""Fan-out topics in the client: the answers' models and the calls of
``/v1/namespaces/{ns}/topics``. A topic is named ``"namespace/name"``, as queues are; its
subscriptions name queues of the same namespace."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from app.client.calls import (
    Call,
    decoder,
    identified,
    namespace_path,
    nothing,
    segment,
    split_queue,
)
from app.client.models import Model, NewMessage


class Subscription(Model, frozen=True, kw_only=True):
    """A queue subscribed to a topic; with ``tag_key``, it receives only the messages whose
    ``metadata[tag_key]`` is one of ``tags``."""

    queue: str
    tag_key: str | None = None
    tags: list[str] | None = None
    subscribed_at: datetime | None = None


class Topic(Model, frozen=True, kw_only=True):
    """A topic and its subscriptions."""

    namespace: str
    name: str
    created_at: datetime
    updated_at: datetime
    subscriptions: list[Subscription]

    @property
    def path(self) -> str:
        """``namespace/name``, as the client's methods take it."""
        return f"{self.namespace}/{self.name}"


class Delivery(Model, frozen=True, kw_only=True):
    """What a publish did with one message in one subscribed queue (``created`` is false for
    an id already there)."""

    queue: str
    state: str
    created: bool


class Published(Model, frozen=True, kw_only=True):
    """What a publish did with one message: the queues it reached."""

    id: str
    queues: list[Delivery]


SubscriptionSpec = str | tuple[str, str, Sequence[str]]
"""A subscription to ask for: a queue's name, or ``(queue, tag_key, tags)`` for a filtered one."""


def _topics(namespace: str) -> str:
    return f"{namespace_path(namespace)}/topics"


def _topic(topic: str) -> str:
    namespace, name = split_queue(topic)
    return f"{_topics(namespace)}/{segment(name)}"


def _subscription_path(topic: str, queue: str) -> str:
    return f"{_topic(topic)}/subscriptions/{segment(queue)}"


def _subscription(spec: SubscriptionSpec) -> str | dict[str, Any]:
    if isinstance(spec, str):
        return spec
    queue, tag_key, tags = spec
    return {"queue": queue, "tag_key": tag_key, "tags": list(tags)}


_TOPIC = decoder(Topic)


def put_topic(topic: str, subscriptions: Iterable[SubscriptionSpec]) -> Call[Topic]:
    """``PUT …/topics/{topic}``: the topic with exactly these subscriptions."""
    body = {"subscriptions": [_subscription(s) for s in subscriptions]}
    return Call("PUT", _topic(topic), _TOPIC, body, safe=True)


def list_topics(namespace: str) -> Call[list[Topic]]:
    """``GET /v1/namespaces/{ns}/topics``."""
    return Call("GET", _topics(namespace), decoder(list[Topic], "topics"), safe=True)


def get_topic(topic: str) -> Call[Topic]:
    """``GET …/topics/{topic}``."""
    return Call("GET", _topic(topic), _TOPIC, safe=True)


def delete_topic(topic: str) -> Call[None]:
    """``DELETE …/topics/{topic}``."""
    return Call("DELETE", _topic(topic), nothing, safe=True)


def subscribe(
    topic: str, queue: str, tag_key: str | None = None, tags: Sequence[str] | None = None
) -> Call[Topic]:
    """``PUT …/topics/{topic}/subscriptions/{queue}`` (the topic is made if need be)."""
    body = {} if tag_key is None and tags is None else {"tag_key": tag_key, "tags": tags}
    return Call("PUT", _subscription_path(topic, queue), _TOPIC, body, safe=True)


def unsubscribe(topic: str, queue: str) -> Call[None]:
    """``DELETE …/topics/{topic}/subscriptions/{queue}``."""
    return Call("DELETE", _subscription_path(topic, queue), nothing, safe=True)


def publish(topic: str, messages: Iterable[NewMessage]) -> Call[list[Published]]:
    """``POST …/topics/{topic}/messages``: 1 to 1000 messages into every subscribed queue, all
    or nothing. Safe to repeat when every message has an id."""
    items = list(messages)
    decode = decoder(list[Published], "messages")
    path = f"{_topic(topic)}/messages"
    return Call("POST", path, decode, {"messages": items}, safe=identified(items))
