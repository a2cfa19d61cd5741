"""Producing: enqueueing a batch of messages, all or nothing, with the queue's defaults resolved
and repeated ids reported rather than duplicated."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import uuid_utils

from app.core import validation
from app.core.errors import QueuePausedError
from app.core.models import EnqueueOutcome, NewMessage, QueueConfig
from app.core.ports import NewRow
from app.core.service.base import ServiceBase
from app.core.service.catalogue_retry import again_if_catalogue_changed


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
    ) -> list[EnqueueOutcome]:
        """Add a batch (all or nothing). Ids that exist already are reported, never duplicated.
        ``payload_limit``: this call's largest payload instead of the configured one (the SQS
        door, whose messages are held to their queue's MaximumMessageSize instead)."""
        queue = await self.get_queue_or_404(namespace, queue_name)
        limits = self.limits
        if payload_limit is not None:
            limits = replace(limits, max_payload_bytes=payload_limit)
        validation.enqueue_batch(messages, queue.config, limits)
        if queue.config.enqueue_paused:
            raise QueuePausedError(f"queue {namespace}/{queue_name} is paused for enqueue")
        rows: list[NewRow] = []
        first_index: dict[str, int] = {}
        order: list[int] = []
        for message in messages:
            row = _new_row(message, queue.config)
            index = first_index.setdefault(row.id, len(rows))
            if index == len(rows):
                rows.append(row)
            order.append(index)
        outcomes = await self.store.enqueue(queue, rows)
        self.observer.enqueued(queue, sum(o.created for o in outcomes))
        seen: set[int] = set()
        results = []
        for index in order:
            outcome = outcomes[index]
            if index in seen:
                outcome = replace(outcome, created=False)
            seen.add(index)
            results.append(outcome)
        return results


def _new_row(message: NewMessage, config: QueueConfig) -> NewRow:
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
