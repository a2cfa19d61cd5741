"""Fan-out topics (docs/concepts.md, "Topics"): a topic's subscriptions made, changed and
read, and the publish that enqueues each message into every subscribed queue, all or nothing.

A publish is decided here and written by one transaction (:meth:`Store.publish`): the topic
and its queues are read afresh, every queue that would receive a message is checked as enqueue
checks it (paused, an exclusive queue's key), and one refusal refuses the whole publish before
anything is written. The transaction then applies nothing if the subscriptions or a queue
changed since they were read (the catalogue guard), and the publish runs again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import uuid_utils

from app.core import validation
from app.core.errors import NotFoundError, QueuePausedError, ValidationError
from app.core.models import NewMessage, Queue, QueueConfig
from app.core.ports import NewRow
from app.core.service.base import ServiceBase
from app.core.service.catalogue_retry import again_if_catalogue_changed
from app.core.service.identifiers import could_exist
from app.core.service.producing import first_occurrences, new_row
from app.core.topics import Delivery, PublishOutcome, SubscriptionSpec, TagFilter, Topic

MAX_SUBSCRIPTIONS = 100
"""Most queues one topic may reach."""
MAX_TAGS = 100
"""Most values one tag filter may accept."""

_ANY_QUEUE = QueueConfig()
"""What every message of a publish is checked against before its queues' own rules."""


@dataclass(slots=True)
class _Target:
    queue: Queue
    indexes: list[int]
    """The batch's distinct messages this queue receives, by their place among them."""
    rows: list[NewRow]


class Topics(ServiceBase):
    """The operations on topics and the publish."""

    async def _topic_or_404(self, namespace: str, name: str) -> Topic:
        if not (
            could_exist(validation.NAME_PATTERN, namespace)
            and could_exist(validation.NAME_PATTERN, name)
        ):
            raise NotFoundError(f"topic {namespace}/{name} does not exist", topic=name)
        topic = await self.store.get_topic(namespace, name)
        if topic is None:
            raise NotFoundError(f"topic {namespace}/{name} does not exist", topic=name)
        return topic

    @again_if_catalogue_changed
    async def get_topic(self, namespace: str, name: str) -> Topic:
        """The topic with its subscriptions, or NotFoundError."""
        return await self._topic_or_404(namespace, name)

    @again_if_catalogue_changed
    async def list_topics(self, namespace: str) -> list[Topic]:
        """The namespace's topics by name (the store tells a namespace not here)."""
        if not could_exist(validation.NAME_PATTERN, namespace):
            raise NotFoundError(f"namespace {namespace!r} does not exist", namespace=namespace)
        return await self.store.list_topics(namespace)

    @again_if_catalogue_changed
    async def put_topic(
        self, namespace: str, name: str, subscriptions: Sequence[SubscriptionSpec]
    ) -> tuple[Topic, bool]:
        """Create the topic with these subscriptions, or bring it to exactly them (a queue not
        listed is unsubscribed); the topic and whether it was created. Every change applies to
        each publish answered after this answer, in every server."""
        validation.name("name", name)
        if len(subscriptions) > MAX_SUBSCRIPTIONS:
            raise ValidationError("subscriptions", f"must hold at most {MAX_SUBSCRIPTIONS} queues")
        await self._require_namespace(namespace)
        seen: set[str] = set()
        resolved: list[tuple[Queue, TagFilter | None]] = []
        for index, spec in enumerate(subscriptions):
            field = f"subscriptions[{index}]"
            _check_spec(field, spec)
            if spec.queue in seen:
                raise ValidationError(f"{field}.queue", f"queue {spec.queue!r} is listed twice")
            seen.add(spec.queue)
            resolved.append((await self._subscribed_queue(namespace, spec.queue, field), spec.tags))
        return await self.store.put_topic(namespace, name, resolved)

    @again_if_catalogue_changed
    async def subscribe(
        self, namespace: str, topic: str, queue_name: str, tags: TagFilter | None = None
    ) -> tuple[Topic, bool]:
        """Subscribe a queue to the topic (created when it does not exist), or change its tag
        filter; the topic and whether the subscription is new."""
        validation.name("topic", topic)
        _check_spec("", SubscriptionSpec(queue_name, tags))
        queue = await self.get_queue_or_404(namespace, queue_name)
        found = await self.store.get_topic(namespace, topic)
        subscribed = found.subscriptions if found is not None else ()
        if len(subscribed) >= MAX_SUBSCRIPTIONS and all(s.queue.id != queue.id for s in subscribed):
            raise ValidationError(
                "queue", f"topic {topic!r} has {MAX_SUBSCRIPTIONS} subscriptions already"
            )
        return await self.store.subscribe(namespace, topic, queue, tags)

    @again_if_catalogue_changed
    async def unsubscribe(self, namespace: str, topic: str, queue_name: str) -> None:
        """Delete a queue's subscription (NotFoundError when it has none)."""
        await self._topic_or_404(namespace, topic)
        queue = await self.get_queue_or_404(namespace, queue_name)
        if not await self.store.unsubscribe(namespace, topic, queue):
            raise NotFoundError(
                f"queue {queue_name!r} is not subscribed to topic {namespace}/{topic}",
                queue=queue_name,
            )

    async def delete_topic(self, namespace: str, name: str) -> None:
        """Delete a topic and its subscriptions; the queues and their messages stay."""
        if not (
            could_exist(validation.NAME_PATTERN, namespace)
            and could_exist(validation.NAME_PATTERN, name)
            and await self.store.delete_topic(namespace, name)
        ):
            raise NotFoundError(f"topic {namespace}/{name} does not exist", topic=name)

    async def _subscribed_queue(self, namespace: str, name: str, field: str) -> Queue:
        """The queue a subscription names, or a ValidationError naming ``field``."""
        try:
            return await self.get_queue_or_404(namespace, name)
        except NotFoundError:
            raise ValidationError(
                f"{field}.queue", f"queue {namespace}/{name} does not exist"
            ) from None

    @again_if_catalogue_changed
    async def publish(
        self, namespace: str, topic_name: str, messages: Sequence[NewMessage]
    ) -> list[PublishOutcome]:
        """Enqueue each message into every subscribed queue whose filter accepts it, in one
        transaction: all of them, or (a queue paused for enqueue, a message without the key of
        an exclusive queue it would reach) none, with the error naming the queue. A message
        has the same id in every queue (its own, or one generated), so publishing it again
        creates nothing twice."""
        topic = await self._topic_or_404(namespace, topic_name)
        validation.enqueue_batch(messages, _ANY_QUEUE, self.limits)
        named = [
            m if m.id is not None else replace(m, id=str(uuid_utils.uuid7())) for m in messages
        ]
        firsts, order = first_occurrences([m.id or "" for m in named])
        distinct = [named[i] for i in firsts]
        targets: list[_Target] = []
        for subscription in topic.subscriptions:
            queue = subscription.queue
            indexes = [i for i, m in enumerate(distinct) if subscription.accepts(m.metadata)]
            if not indexes:
                continue
            _check_target(topic, queue, distinct, indexes, firsts)
            rows = [new_row(distinct[i], queue.config) for i in indexes]
            targets.append(_Target(queue, indexes, rows))
        delivered: list[list[Delivery]] = [[] for _ in distinct]
        if targets:
            written = await self.store.publish(topic, [(t.queue, t.rows) for t in targets])
            for target, outcomes in zip(targets, written, strict=True):
                self.observer.enqueued(target.queue, sum(o.created for o in outcomes))
                for index, outcome in zip(target.indexes, outcomes, strict=True):
                    delivered[index].append(Delivery(target.queue.name, outcome))
        results: list[PublishOutcome] = []
        answered: set[int] = set()
        for index in order:
            deliveries = delivered[index]
            if index in answered:  # a repeat within the batch: created by the first
                deliveries = [_not_created(d) for d in deliveries]
            answered.add(index)
            message_id = distinct[index].id
            assert message_id is not None
            results.append(PublishOutcome(message_id, deliveries))
        return results


def _not_created(delivery: Delivery) -> Delivery:
    return replace(delivery, outcome=replace(delivery.outcome, created=False))


def _check_spec(field: str, spec: SubscriptionSpec) -> None:
    """A subscription's queue name and tag filter, each error naming its field."""
    prefix = f"{field}." if field else ""
    validation.name(f"{prefix}queue", spec.queue)
    if spec.tags is None:
        return
    key_field = f"{prefix}tag_key"
    if not spec.tags.key:
        raise ValidationError(key_field, "must not be empty")
    validation.text(key_field, spec.tags.key, validation.MAX_METADATA_KEY)
    if not 1 <= len(spec.tags.values) <= MAX_TAGS:
        raise ValidationError(f"{prefix}tags", f"must hold 1 to {MAX_TAGS} values")
    for index, value in enumerate(spec.tags.values):
        validation.text(f"{prefix}tags[{index}]", value, validation.MAX_METADATA_VALUE)


def _check_target(
    topic: Topic,
    queue: Queue,
    distinct: Sequence[NewMessage],
    indexes: Sequence[int],
    requested: Sequence[int],
) -> None:
    """Refuse the whole publish when ``queue`` would refuse its messages (``indexes`` of
    ``distinct``; ``requested``: each one's place in the request, for the error)."""
    where = f"queue {queue.namespace}/{queue.name} (subscribed to topic {topic.name})"
    if queue.config.enqueue_paused:
        raise QueuePausedError(
            f"{where} is paused for enqueue; nothing was published", queue=queue.name
        )
    key = queue.config.exclusive_key
    if queue.config.kind != "exclusive" or key is None:
        return
    for index in indexes:
        if not distinct[index].metadata.get(key):
            raise ValidationError(
                f"messages[{requested[index]}].metadata.{key}",
                f"is required by exclusive {where}; nothing was published",
            )
