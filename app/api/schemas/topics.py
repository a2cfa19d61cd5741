"""The bodies of the topic endpoints of a namespace: a topic's subscriptions, a topic as read,
and a publish with what it did with each message in each subscribed queue."""

from __future__ import annotations

from datetime import datetime

import msgspec

from app.api.schemas.common import In, Out
from app.api.schemas.producing import NewMessageIn
from app.core.errors import ValidationError
from app.core.models import NewMessage
from app.core.topics import PublishOutcome, Subscription, SubscriptionSpec, TagFilter, Topic


class SubscriptionIn(In):
    """One subscription: a queue of the namespace, and optionally a tag filter (the queue then
    receives only the messages whose ``metadata[tag_key]`` is one of ``tags``)."""

    queue: str
    tag_key: str | None = None
    tags: list[str] | None = None


class SubscriptionPut(In):
    """``PUT …/topics/{topic}/subscriptions/{queue}``: an optional tag filter."""

    tag_key: str | None = None
    tags: list[str] | None = None

    def to_filter(self) -> TagFilter | None:
        """As the core's tag filter (both fields, or neither)."""
        return _tag_filter(self.tag_key, self.tags, "")


def _tag_filter(tag_key: str | None, tags: list[str] | None, field: str) -> TagFilter | None:
    prefix = f"{field}." if field else ""
    if tag_key is None and tags is None:
        return None
    if tag_key is None:
        raise ValidationError(f"{prefix}tag_key", "is required with tags")
    if tags is None:
        raise ValidationError(f"{prefix}tags", "is required with tag_key")
    return TagFilter(tag_key, tuple(tags))


class TopicPut(In):
    """``PUT …/topics/{topic}``: the topic's subscriptions, all of them (a queue subscribed
    now but not listed is unsubscribed). A plain string is a queue without a filter."""

    subscriptions: list[str | SubscriptionIn] = msgspec.field(default_factory=list)

    def to_specs(self) -> list[SubscriptionSpec]:
        """As the core's subscription specs."""
        specs = []
        for index, item in enumerate(self.subscriptions):
            if isinstance(item, str):
                specs.append(SubscriptionSpec(item))
            else:
                tags = _tag_filter(item.tag_key, item.tags, f"subscriptions[{index}]")
                specs.append(SubscriptionSpec(item.queue, tags))
        return specs


class SubscriptionOut(Out):
    """A queue subscribed to a topic."""

    queue: str
    tag_key: str | None
    tags: list[str] | None
    subscribed_at: datetime | None

    @classmethod
    def of(cls, subscription: Subscription) -> SubscriptionOut:
        """From the core's subscription."""
        tags = subscription.tags
        return cls(
            subscription.queue.name,
            tags.key if tags else None,
            list(tags.values) if tags else None,
            subscription.created_at,
        )


class TopicOut(Out):
    """A topic and its subscriptions, by queue name."""

    namespace: str
    name: str
    created_at: datetime
    updated_at: datetime
    subscriptions: list[SubscriptionOut]

    @classmethod
    def of(cls, topic: Topic) -> TopicOut:
        """From the core's topic."""
        return cls(
            topic.namespace,
            topic.name,
            topic.created_at,
            topic.updated_at,
            [SubscriptionOut.of(s) for s in topic.subscriptions],
        )


class TopicList(Out):
    """The namespace's topics by name."""

    topics: list[TopicOut]


class Publish(In):
    """``POST …/topics/{topic}/messages``: 1 to 1000 messages, as enqueue takes them."""

    messages: list[NewMessageIn]

    def to_models(self) -> list[NewMessage]:
        """As the core's new messages."""
        return [m.to_model() for m in self.messages]


class DeliveryOut(Out):
    """What a publish did with one message in one subscribed queue."""

    queue: str
    state: str
    created: bool


class PublishedOut(Out):
    """What a publish did with one message: the queues it reached (none when no
    subscription's filter accepted it)."""

    id: str
    queues: list[DeliveryOut]


class PublishOut(Out):
    """The answer to a publish, in request order."""

    messages: list[PublishedOut]

    @classmethod
    def of(cls, outcomes: list[PublishOutcome]) -> PublishOut:
        """From the core's outcomes."""
        return cls(
            [
                PublishedOut(
                    o.id,
                    [
                        DeliveryOut(d.queue, d.outcome.state, d.outcome.created)
                        for d in o.deliveries
                    ],
                )
                for o in outcomes
            ]
        )
