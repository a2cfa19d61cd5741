"""Between the core's models and the statements' rows: rows read back as
:mod:`app.core.models`, and the parameters every statement about a queue takes from it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import RowMapping

from app.core import catalogue
from app.core.models import DEFAULT_POOL, Message, Queue, QueueConfig
from app.core.states import State


def queue_from_row(row: RowMapping, pool: str = DEFAULT_POOL) -> Queue:
    """A queue from a ``queues`` row of ``pool`` (with ``catalogue_version`` when the statement
    read it)."""
    return Queue(
        id=row["id"],
        namespace=row["namespace"],
        name=row["name"],
        config=QueueConfig(
            kind=row["kind"],
            exclusive_key=row["exclusive_key"],
            filter_keys=tuple(key for key in (row["filter_key"], row["filter_key_2"]) if key),
            ordering=row["ordering"],
            lease_seconds=row["lease_seconds"],
            delay_seconds=row["delay_seconds"],
            max_attempts=row["max_attempts"],
            retry_delay_seconds=row["retry_delay_seconds"],
            retry_delay_max_seconds=row["retry_delay_max_seconds"],
            retention_seconds=row["retention_seconds"],
            enqueue_paused=row["enqueue_paused"],
            dequeue_paused=row["dequeue_paused"],
            dead_letter_queue=row["dead_letter_queue"],
        ),
        sqs=row["sqs"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        catalogue_version=row.get("catalogue_version"),
        pool=pool,
    )


def message_from_row(row: RowMapping | Mapping[str, Any]) -> Message:
    """A message from a row of :data:`app.store.sql.reads.MESSAGE_COLUMNS_SQL`."""
    return Message(
        id=row["id"],
        state=State(row["state"]),
        priority=row["priority"],
        payload=row["payload"].encode(),
        metadata=row["metadata"],
        exclusive_value=row["exclusive_value"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        lease_seconds=row["lease_seconds"],
        lease_id=row["lease_id"],
        lease_expires_at=row["lease_expires_at"],
        visible_at=row["visible_at"],
        expires_at=row["expires_at"],
        enqueued_at=row["enqueued_at"],
        updated_at=row["updated_at"],
        finished_at=row["finished_at"],
        last_error=row["last_error"],
        leased_at=row.get("leased_at"),
    )


def guard_params(version: int | None, valid_until: datetime | None) -> dict[str, Any]:
    """The parameters of :data:`app.store.sql.guards.CATALOGUE_IS_CURRENT`."""
    return {"catalogue_version": version, "valid_until": valid_until}


def queue_guard(queue: Queue) -> dict[str, Any]:
    """The catalogue guard of a request's statement about ``queue``."""
    return guard_params(*catalogue.guard(queue.catalogue_version))


def queue_params(queue: Queue, guard: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Parameters every message statement takes from its queue's configuration, and the
    catalogue guard it carries (:data:`app.store.sql.guards.CATALOGUE_IS_CURRENT`): ``guard``,
    that of joined requests, or by default the current request's."""
    config = queue.config
    return {
        **(queue_guard(queue) if guard is None else guard),
        "queue_id": queue.id,
        "queue_max_attempts": config.max_attempts,
        "queue_lease": config.lease_seconds,
        "queue_retry_delay": config.retry_delay_seconds,
        "queue_retry_delay_max": config.retry_delay_max_seconds,
        # Finishing a running message of an exclusive queue frees its value: wake consumers.
        "frees_value": config.kind == "exclusive",
    }
