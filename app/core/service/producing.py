"""Producing: enqueueing a batch of messages, all or nothing, with the queue's defaults resolved
and repeated ids reported rather than duplicated (or, when asked, waiting messages of those ids
replaced); the queue made on the first publish when asked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import uuid_utils

from app.core import catalogue, validation
from app.core.errors import NotFoundError, QueuePausedError, ValidationError
from app.core.models import EnqueueOutcome, NewMessage, Queue, QueueConfig
from app.core.ports import NewRow
from app.core.service.base import ServiceBase
from app.core.service.catalogue_retry import again_if_catalogue_changed
from app.core.service.identifiers import could_exist

ON_CONFLICT = ("keep", "replace")
"""What an enqueue does with an id the queue holds: keep the message as it is (the default), or
replace it while it waits (docs/concepts.md, "Idempotent enqueue")."""

CREATED_QUEUE_CONFIG = QueueConfig()
"""The configuration of a queue made by its first publish (``create_queue``): the defaults."""


class Producing(ServiceBase):
    """The producer's operation."""

    @again_if_catalogue_changed
    async def enqueue(
        self,
        namespace: str,
        queue_name: str,
        messages: Sequence[NewMessage],
        *,
        payload_limit: int | None = None,
        on_conflict: str = "keep",
        create_queue: bool = False,
    ) -> list[EnqueueOutcome]:
        """Add a batch (all or nothing). Ids that exist already are reported, never duplicated;
        with ``on_conflict="replace"``, those whose message still waits (invisible or pending)
        have it replaced by the new one. ``create_queue``: a queue that does not exist is made
        first, with the default configuration (:data:`CREATED_QUEUE_CONFIG`).
        ``payload_limit``: this call's largest payload instead of the configured one (the SQS
        door, whose messages are held to their queue's MaximumMessageSize instead)."""
        if on_conflict not in ON_CONFLICT:
            raise ValidationError("on_conflict", "must be keep or replace")
        limits = self.limits
        if payload_limit is not None:
            limits = replace(limits, max_payload_bytes=payload_limit)
        if create_queue:
            queue = await self._queue_made_if_absent(namespace, queue_name, messages, limits)
        else:
            queue = await self.get_queue_or_404(namespace, queue_name)
        validation.enqueue_batch(messages, queue.config, limits)
        if queue.config.enqueue_paused:
            raise QueuePausedError(f"queue {namespace}/{queue_name} is paused for enqueue")
        every_row = [new_row(message, queue.config) for message in messages]
        firsts, order = first_occurrences([row.id for row in every_row])
        rows = [every_row[i] for i in firsts]
        outcomes = await self.store.enqueue(queue, rows, on_conflict == "replace")
        self.observer.enqueued(queue, sum(o.created for o in outcomes))
        seen: set[int] = set()
        results = []
        for index in order:
            outcome = outcomes[index]
            if index in seen:
                outcome = replace(outcome, created=False, replaced=False)
            seen.add(index)
            results.append(outcome)
        return results

    async def _queue_made_if_absent(
        self,
        namespace: str,
        name: str,
        messages: Sequence[NewMessage],
        limits: validation.Limits,
    ) -> Queue:
        """The queue, made with the default configuration if it does not exist (a namespace
        that does not exist is still a NotFoundError). The batch is checked against that
        configuration first, so a bad batch makes no queue (the caller checks it again against
        the queue as read: a concurrent request may have made it with another configuration).
        Two first publishes at once make one queue (its name is unique; the second insert finds
        it taken) and both use it."""
        validation.name("queue", name)
        if not could_exist(validation.NAME_PATTERN, namespace):
            raise NotFoundError(f"namespace {namespace!r} does not exist", namespace=namespace)
        queue = await self.store.get_queue(namespace, name)
        if queue is not None:
            return queue
        validation.enqueue_batch(messages, CREATED_QUEUE_CONFIG, limits)
        await self.store.insert_queue(namespace, name, CREATED_QUEUE_CONFIG)
        # Made here or by a concurrent publish, the queue changed the catalogue: what this
        # request looked up (its token) is out of date. Authenticate again and read the queue
        # at the new version, so that the enqueue's guard holds.
        await catalogue.renew()
        return await self.get_queue_or_404(namespace, name)


def first_occurrences(ids: Sequence[str]) -> tuple[list[int], list[int]]:
    """Where each distinct id of a batch first stands in ``ids``, and for each entry of ``ids``
    the place of its id among those: a batch creates an id once, from its first occurrence, and
    answers its repeats as not created."""
    firsts: list[int] = []
    place: dict[str, int] = {}
    order: list[int] = []
    for index, message_id in enumerate(ids):
        found = place.setdefault(message_id, len(firsts))
        if found == len(firsts):
            firsts.append(index)
        order.append(found)
    return firsts, order


def new_row(message: NewMessage, config: QueueConfig) -> NewRow:
    """The row to insert for ``message``: its id chosen, the queue's fixed defaults resolved."""
    exclusive_value = None
    if config.exclusive_key is not None:
        exclusive_value = message.metadata[config.exclusive_key]
    delay = message.delay_seconds
    if delay is None:
        delay = config.delay_seconds
    return NewRow(
        id=message.id if message.id is not None else str(uuid_utils.uuid7()),
        priority=message.priority,
        payload=message.payload,
        metadata=message.metadata,
        exclusive_value=exclusive_value,
        max_attempts=message.max_attempts,
        lease_seconds=message.lease_seconds,
        delay_seconds=delay,
        visible_at=message.visible_at,
        ttl_seconds=message.ttl_seconds,
        expires_at=message.expires_at,
    )
