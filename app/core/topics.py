"""Fan-out topics (docs/concepts.md, "Topics"): what a topic is, what a publish did, and which
messages a subscription accepts.

A topic belongs to a namespace and names queues of that namespace, its subscriptions (a
RocketMQ consumer group is one subscribed queue). Publishing to it enqueues each message into
every subscribed queue whose tag filter accepts it, in one transaction: every such queue gets
it, or none does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from app.core.models import EnqueueOutcome, Queue


@dataclass(frozen=True, slots=True)
class TagFilter:
    """The messages a subscription accepts: those whose ``metadata[key]`` is one of ``values``
    (RocketMQ's ``subscribe(topic, "A || B")``)."""

    key: str
    values: tuple[str, ...]

    def accepts(self, metadata: Mapping[str, str]) -> bool:
        """Whether a message with this metadata passes the filter."""
        return metadata.get(self.key) in self.values


@dataclass(frozen=True, slots=True)
class SubscriptionSpec:
    """A subscription as a caller asks for it: a queue's name and an optional tag filter."""

    queue: str
    tags: TagFilter | None = None


@dataclass(frozen=True, slots=True)
class Subscription:
    """A queue subscribed to a topic, as read with the topic."""

    queue: Queue
    tags: TagFilter | None
    created_at: datetime

    def accepts(self, metadata: Mapping[str, str]) -> bool:
        """Whether this subscription receives a message with this metadata."""
        return self.tags is None or self.tags.accepts(metadata)


@dataclass(frozen=True, slots=True)
class Topic:
    """A topic with its subscriptions (by queue name)."""

    namespace: str
    name: str
    created_at: datetime
    updated_at: datetime
    subscriptions: Sequence[Subscription] = field(default_factory=tuple)
    catalogue_version: int | None = None
    """The catalogue version the topic and its queues were read at."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """What a publish did with one message in one subscribed queue."""

    queue: str
    outcome: EnqueueOutcome


@dataclass(frozen=True, slots=True)
class PublishOutcome:
    """What a publish did with one message: its id and where it went (no delivery when no
    subscription accepted it)."""

    id: str
    deliveries: Sequence[Delivery]
