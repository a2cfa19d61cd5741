"""The bodies of the queue endpoints of a namespace: create or replace, change, read, list,
purge."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from app.api.schemas.common import In, Out, Patch
from app.core import validation
from app.core.errors import ValidationError
from app.core.models import Queue, QueueConfig, QueueKind, QueueOrdering
from app.core.service.queues import QueueDetail
from app.core.states import State

_DEFAULTS = QueueConfig()


class QueuePut(In):
    """``PUT …/queues/{queue}``: the whole configuration; absent fields take their defaults."""

    kind: QueueKind = _DEFAULTS.kind
    exclusive_key: str | None = _DEFAULTS.exclusive_key
    filter_key: str | None = None
    filter_keys: list[str] | None = None
    ordering: QueueOrdering = _DEFAULTS.ordering
    lease_seconds: int = _DEFAULTS.lease_seconds
    delay_seconds: int = _DEFAULTS.delay_seconds
    max_attempts: int = _DEFAULTS.max_attempts
    retry_delay_seconds: int = _DEFAULTS.retry_delay_seconds
    retry_delay_max_seconds: int = _DEFAULTS.retry_delay_max_seconds
    retention_seconds: int = _DEFAULTS.retention_seconds
    enqueue_paused: bool = _DEFAULTS.enqueue_paused
    dequeue_paused: bool = _DEFAULTS.dequeue_paused
    dead_letter_queue: str | None = _DEFAULTS.dead_letter_queue

    def to_model(self) -> QueueConfig:
        """As the core's configuration."""
        fields = msgspec.structs.asdict(self)
        keys = _filter_keys(fields.pop("filter_key"), fields.pop("filter_keys"))
        return QueueConfig(**fields, filter_keys=keys)


def _filter_keys(one: str | None, keys: list[str] | None) -> tuple[str, ...]:
    """The indexed keys a PUT names: ``filter_key`` is the one-key form of ``filter_keys``, and
    a body giving both must give the same first key."""
    if keys is None:
        if one is None:
            return ()
        validation.filter_keys("filter_key", [one])  # the error names the field given
        return (one,)
    if one is not None and keys[:1] != [one]:
        raise ValidationError("filter_keys", "must start with filter_key when both are given")
    return tuple(keys)


class QueuePatch(Patch):
    """``PATCH …/queues/{queue}``: only the fields given change (``kind``, ``exclusive_key``,
    ``filter_key(s)`` and ``ordering`` are accepted here only to be refused with a clear error)."""

    kind: str | UnsetType = UNSET
    exclusive_key: str | UnsetType | None = UNSET
    filter_key: str | UnsetType | None = UNSET
    filter_keys: list[str] | UnsetType | None = UNSET
    ordering: str | UnsetType = UNSET
    lease_seconds: int | UnsetType = UNSET
    delay_seconds: int | UnsetType = UNSET
    max_attempts: int | UnsetType = UNSET
    retry_delay_seconds: int | UnsetType = UNSET
    retry_delay_max_seconds: int | UnsetType = UNSET
    retention_seconds: int | UnsetType = UNSET
    enqueue_paused: bool | UnsetType = UNSET
    dequeue_paused: bool | UnsetType = UNSET
    dead_letter_queue: str | UnsetType | None = UNSET


class QueueOut(Out):
    """A queue: its name, namespace and configuration."""

    name: str
    namespace: str
    kind: str
    exclusive_key: str | None
    filter_key: str | None
    filter_keys: list[str]
    ordering: str
    lease_seconds: int
    delay_seconds: int
    max_attempts: int
    retry_delay_seconds: int
    retry_delay_max_seconds: int
    retention_seconds: int
    enqueue_paused: bool
    dequeue_paused: bool
    dead_letter_queue: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, queue: Queue) -> QueueOut:
        """From the core model."""
        return cls(**_queue_fields(queue))


def _queue_fields(queue: Queue) -> dict[str, Any]:
    return {
        "name": queue.name,
        "namespace": queue.namespace,
        **dataclasses.asdict(queue.config),
        "filter_key": queue.config.filter_key,
        "filter_keys": list(queue.config.filter_keys),
        "created_at": queue.created_at,
        "updated_at": queue.updated_at,
    }


def _counts(counts: dict[State, int]) -> dict[str, int]:
    """Every state, 0 when the queue holds none in it."""
    return {state.value: counts.get(state, 0) for state in State}


class QueueListItem(QueueOut):
    """A queue in a listing: its configuration and message counts per state."""

    counts: dict[str, int]

    @classmethod
    def of_counts(cls, queue: Queue, counts: dict[State, int]) -> QueueListItem:
        """From the core model and counts."""
        return cls(**_queue_fields(queue), counts=_counts(counts))


class QueueDetailOut(QueueOut):
    """One queue: configuration, counts per state, and how long its oldest pending message
    has waited (``null`` when none is pending)."""

    counts: dict[str, int]
    oldest_pending_age_seconds: float | None

    @classmethod
    def of_detail(cls, detail: QueueDetail) -> QueueDetailOut:
        """From the core's queue detail."""
        stats = detail.stats
        return cls(
            **_queue_fields(detail.queue),
            counts=_counts(stats.counts),
            oldest_pending_age_seconds=stats.oldest_pending_age_seconds,
        )


class QueueList(Out):
    """``GET …/queues``."""

    queues: list[QueueListItem]


class Purge(In):
    """``POST …/purge``: the states to delete (all by default)."""

    states: list[str] | None = None


class Purged(Out):
    """How many messages a purge deleted."""

    deleted: int
