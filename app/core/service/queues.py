"""Queues: creating and configuring them (``kind``, ``exclusive_key`` and ``filter_keys`` fixed at
creation), deleting and purging them, and reading them with their message counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.core import validation
from app.core.errors import ConflictError, NotFoundError, ValidationError
from app.core.models import MUTABLE_QUEUE_FIELDS, Queue, QueueConfig, QueueStats
from app.core.service.base import ServiceBase
from app.core.service.catalogue_retry import again_if_catalogue_changed
from app.core.service.identifiers import could_exist
from app.core.states import State


@dataclass(frozen=True, slots=True)
class QueueDetail:
    """A queue with its live statistics."""

    queue: Queue
    stats: QueueStats


class Queues(ServiceBase):
    """The operations on queues."""

    @again_if_catalogue_changed
    async def put_queue(self, namespace: str, name: str, config: QueueConfig) -> tuple[Queue, bool]:
        """Create a queue, or bring an existing one to ``config``; returns (queue, created).

        ``kind``, ``exclusive_key``, ``filter_keys`` and ``ordering`` are fixed at creation:
        changing them is a ConflictError.
        """
        validation.name("queue", name)
        validation.queue_config(config)
        _check_dead_letter_queue(name, config.dead_letter_queue)
        if not could_exist(validation.NAME_PATTERN, namespace):
            raise NotFoundError(f"namespace {namespace!r} does not exist", namespace=namespace)
        created = await self.store.insert_queue(namespace, name, config)
        if created is not None:
            return created, True
        existing = await self.get_queue_or_404(namespace, name)
        fixed = existing.config
        if (fixed.kind, fixed.exclusive_key, fixed.filter_keys, fixed.ordering) != (
            config.kind,
            config.exclusive_key,
            config.filter_keys,
            config.ordering,
        ):
            raise ConflictError(
                f"queue {namespace}/{name} exists as {fixed.kind}"
                f" (exclusive_key={fixed.exclusive_key!r}, filter_keys={list(fixed.filter_keys)!r},"
                f" ordering={fixed.ordering!r});"
                " kind, exclusive_key, filter_keys and ordering cannot change",
                queue=name,
            )
        if existing.config == config:
            return existing, False
        changes = {
            key: getattr(config, key)
            for key in MUTABLE_QUEUE_FIELDS
            if getattr(config, key) != getattr(existing.config, key)
        }
        resumed = fixed.dequeue_paused and not config.dequeue_paused
        return await self.store.update_queue(existing, changes, wake=resumed), False

    @again_if_catalogue_changed
    async def get_queue(self, namespace: str, name: str) -> Queue:
        """The queue (NotFoundError if there is none), its lookup confirmed current: for an
        answer made of the queue alone."""
        return await self.get_queue_or_404(namespace, name)

    @again_if_catalogue_changed
    async def create_queue(
        self,
        namespace: str,
        name: str,
        config: QueueConfig,
        sqs: Mapping[str, Any] | None = None,
    ) -> Queue | None:
        """Create a queue with ``config`` (and what the SQS door keeps for it); None when the
        name is taken, whatever that queue's configuration (nothing changes then)."""
        validation.name("queue", name)
        validation.queue_config(config)
        _check_dead_letter_queue(name, config.dead_letter_queue)
        if not could_exist(validation.NAME_PATTERN, namespace):
            raise NotFoundError(f"namespace {namespace!r} does not exist", namespace=namespace)
        return await self.store.insert_queue(namespace, name, config, sqs)

    @again_if_catalogue_changed
    async def update_queue(
        self,
        namespace: str,
        name: str,
        changes: Mapping[str, Any],
        *,
        sqs_patch: Mapping[str, Mapping[str, str | None]] | None = None,
    ) -> Queue:
        """Change some of a queue's mutable settings (pause switches included), and merge
        ``sqs_patch`` into what the SQS door keeps for it (keys per section; ``None`` removes
        one), in one statement."""
        checked = validation.queue_patch(changes)
        queue = await self.get_queue_or_404(namespace, name)
        merged = replace(queue.config, **checked)
        validation.queue_config(merged)
        _check_dead_letter_queue(name, merged.dead_letter_queue)
        if not checked and not sqs_patch:
            return queue
        resumed = queue.config.dequeue_paused and not merged.dequeue_paused
        return await self.store.update_queue(queue, checked, wake=resumed, sqs_patch=sqs_patch)

    @again_if_catalogue_changed
    async def delete_queue(self, namespace: str, name: str) -> None:
        """Delete a queue and its messages."""
        if not (
            could_exist(validation.NAME_PATTERN, namespace)
            and could_exist(validation.NAME_PATTERN, name)
            and await self.store.delete_queue(namespace, name)
        ):
            raise NotFoundError(f"queue {namespace}/{name} does not exist", queue=name)

    @again_if_catalogue_changed
    async def list_queues(self, namespace: str) -> list[tuple[Queue, dict[State, int]]]:
        """A namespace's queues with their message counts per state."""
        await self._require_namespace(namespace)
        queues = await self.store.list_queues(namespace)
        counts = await self.store.queue_counts(queues)
        return [(q, counts[q.id]) for q in queues]

    @again_if_catalogue_changed
    async def queue_detail(self, namespace: str, name: str) -> QueueDetail:
        """A queue's configuration, counts per state and oldest pending age."""
        queue = await self.get_queue_or_404(namespace, name)
        counts = (await self.store.queue_counts([queue]))[queue.id]
        age = await self.store.oldest_pending_age(queue)
        return QueueDetail(queue, QueueStats(counts, age))

    @again_if_catalogue_changed
    async def purge_queue(
        self, namespace: str, name: str, states: Sequence[str] | None = None
    ) -> int:
        """Delete a queue's messages in ``states`` (all states by default); returns how many."""
        chosen = validation.states("states", states) if states is not None else tuple(State)
        queue = await self.get_queue_or_404(namespace, name)
        return await self.store.purge(queue, chosen)


def _check_dead_letter_queue(name: str, dead_letter_queue: str | None) -> None:
    """A queue's dead letters go to another queue (the scheduler moves them: docs/concepts.md)."""
    if dead_letter_queue == name:
        raise ValidationError("dead_letter_queue", "must name another queue than the queue itself")
