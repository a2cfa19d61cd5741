"""Dead letters in bulk and their second life: which dead letters a bulk requeue or delete takes
(:func:`selection`), and how a requeued one starts again (:class:`Respawn`, :func:`respawn`).

A bulk requeue and a bulk delete take the same messages: up to ``limit`` of the queue's
messages in ``states`` (dead-letter states only), optionally only those among ``ids``, oldest
finished first (docs/api.md, "Dead letters").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from app.core import validation
from app.core.errors import ValidationError
from app.core.states import DEAD_LETTER_STATES, State

MAX_BULK_LIMIT: Final = 100_000
"""The most dead letters one bulk requeue or delete takes (``limit``)."""

DEFAULT_BULK_LIMIT: Final = validation.MAX_QUERY_LIMIT
"""``limit`` when a bulk requeue or delete does not give one."""


@dataclass(frozen=True, slots=True)
class Respawn:
    """How a requeued dead letter starts again: visible ``delay_seconds`` after the requeue,
    expiring at ``expires_at``, else ``ttl_seconds`` after the requeue, else never."""

    delay_seconds: int = 0
    ttl_seconds: int | None = None
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Selection:
    """The dead letters a bulk operation takes (validated)."""

    states: tuple[State, ...]
    ids: list[str] | None
    limit: int


def respawn(
    delay_seconds: int = 0, ttl_seconds: int | None = None, expires_at: datetime | None = None
) -> Respawn:
    """Validate a requeue's terms: a delay of 0-365 days, and a TTL of 1 s to 10 years or an
    expiry time (not both), as an enqueue takes them.

    Raises:
        ValidationError: naming the field.
    """
    validation.integer("delay_seconds", delay_seconds, 0, validation.MAX_DELAY_SECONDS)
    validation.expiry(ttl_seconds, expires_at)
    return Respawn(delay_seconds, ttl_seconds, expires_at)


def selection(
    states: Sequence[str], ids: Sequence[str] | None, limit: int = DEFAULT_BULK_LIMIT
) -> Selection:
    """Validate which dead letters a bulk requeue or delete takes.

    Raises:
        ValidationError: naming the field (``states[1]``, ``ids[0]``, ``limit``).
    """
    chosen = validation.states("states", states)
    for index, state in enumerate(chosen):
        if state not in DEAD_LETTER_STATES:
            raise ValidationError(f"states[{index}]", "must be errored or canceled")
    if ids is not None:
        if len(ids) > validation.MAX_QUERY_LIMIT:
            raise ValidationError("ids", f"at most {validation.MAX_QUERY_LIMIT} ids")
        for index, message_id in enumerate(ids):
            validation.message_id(f"ids[{index}]", message_id)
    validation.integer("limit", limit, 1, MAX_BULK_LIMIT)
    return Selection(chosen, list(ids) if ids is not None else None, limit)
