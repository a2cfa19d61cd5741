"""The topics a queue is subscribed to, as its dashboard page shows them."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.service import QueueService


@dataclass(frozen=True, slots=True)
class QueueTopic:
    """A topic the queue receives from, and what it takes of it."""

    name: str
    filter: str
    """``kind in A || B``, or empty: every message."""


async def queue_topics(service: QueueService, namespace: str, queue: str) -> list[QueueTopic]:
    """The namespace's topics that ``queue`` is subscribed to, by name."""
    found = []
    for topic in await service.list_topics(namespace):
        for subscription in topic.subscriptions:
            if subscription.queue.name == queue:
                tags = subscription.tags
                shown = f"{tags.key} in {' || '.join(tags.values)}" if tags else ""
                found.append(QueueTopic(topic.name, shown))
    return found
