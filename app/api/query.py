"""The query string of ``GET …/messages`` as a :class:`MessageFilter`.

``state`` may repeat or be comma-separated; ``metadata.<key>=<value>`` pairs (any number) must
all match; integers are strict (``-?[0-9]+``) and a bad one is a 400 naming its parameter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal, cast

from app.core import validation
from app.core.errors import ValidationError
from app.core.models import MessageFilter

METADATA_PREFIX = "metadata."
DEFAULT_LIMIT = 100
ORDERS = ("enqueued_at", "priority")

_INTEGER = re.compile(r"-?[0-9]{1,19}")


def integer(name: str, value: str | None, low: int, high: int) -> int | None:
    """A strict integer query parameter within ``[low, high]``; ``None`` when absent.

    Raises:
        ValidationError: not an integer, or out of range.
    """
    if value is None:
        return None
    if not _INTEGER.fullmatch(value):
        raise ValidationError(name, f"must be an integer, got {value!r}")
    return validation.integer(name, int(value), low, high)


def states(values: Iterable[str]) -> tuple[str, ...]:
    """The ``state`` parameters, repeated and/or comma-separated, empty items ignored."""
    return tuple(s for value in values for s in value.split(",") if s)


def message_filter(
    items: Iterable[tuple[str, str]],
    *,
    state: list[str] | None,
    priority_lt: str | None,
    priority_gte: str | None,
    limit: str | None,
    cursor: str | None,
    order: str | None,
) -> MessageFilter:
    """The filter a message query's parameters describe.

    Args:
        items: every query parameter, for the ``metadata.<key>`` ones.
        state: the ``state`` parameters.
        priority_lt: exclusive upper bound of ``priority``.
        priority_gte: inclusive lower bound of ``priority``.
        limit: page size, 1-1000 (default 100).
        cursor: the previous page's ``next_cursor``.
        order: ``enqueued_at`` (newest first, the default) or ``priority`` (lowest first).

    Raises:
        ValidationError: naming the bad parameter.
    """
    metadata = {
        key.removeprefix(METADATA_PREFIX): value
        for key, value in items
        if key.startswith(METADATA_PREFIX)
    }
    if order is not None and order not in ORDERS:
        raise ValidationError("order", f"must be one of {', '.join(ORDERS)}")
    int64 = (validation.INT64_MIN, validation.INT64_MAX)
    return MessageFilter(
        states=validation.states("state", states(state or ())),
        metadata=validation.metadata("metadata", metadata),
        priority_gte=integer("priority_gte", priority_gte, *int64),
        priority_lt=integer("priority_lt", priority_lt, *int64),
        order=cast(Literal["enqueued_at", "priority"], order or "enqueued_at"),
        limit=integer("limit", limit, 1, validation.MAX_QUERY_LIMIT) or DEFAULT_LIMIT,
        cursor=cursor or None,
    )
