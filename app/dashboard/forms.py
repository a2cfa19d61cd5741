"""What the dashboard's forms and query strings say, checked: each problem names its field.

Typed values go on to the core, which applies the queue's own rules (metadata limits, id
syntax, :mod:`app.core.validation`) and raises :class:`app.core.errors.ValidationError` naming
the field as well, before anything is changed: a form is either refused whole or applied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from app.core import validation
from app.core.dead_letters import MAX_BULK_LIMIT
from app.core.models import MessageFilter
from app.core.states import DEAD_LETTER_STATES, State

PAGE_SIZES = (25, 50, 100)
DEAD_LETTER_STATE_NAMES = tuple(state.value for state in DEAD_LETTER_STATES)


class FormError(ValueError):
    """A field of a form or query string is invalid."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class BrowserQuery:
    """The message browser's filters, as typed by the operator and as understood."""

    states: tuple[State, ...] = ()
    metadata_text: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    priority_min: str = ""
    priority_max: str = ""
    order: Literal["enqueued_at", "priority"] = "enqueued_at"
    limit: int = 50
    cursor: str | None = None

    def to_filter(self) -> MessageFilter:
        """The core's filter."""
        return MessageFilter(
            states=self.states,
            metadata=self.metadata,
            priority_gte=int(self.priority_min) if self.priority_min else None,
            priority_lt=_just_above(self.priority_max),
            order=self.order,
            limit=self.limit,
            cursor=self.cursor,
        )

    def params(self, **changes: str | None) -> list[tuple[str, str]]:
        """The query string of this search (with ``changes``), for links and pagination."""
        values: list[tuple[str, str]] = [("state", str(s)) for s in self.states]
        values += [
            ("meta", self.metadata_text),
            ("priority_min", self.priority_min),
            ("priority_max", self.priority_max),
            ("order", self.order),
            ("limit", str(self.limit)),
        ]
        if self.cursor:
            values.append(("cursor", self.cursor))
        replaced = set(changes)
        values = [(k, v) for k, v in values if k not in replaced and v]
        values += [(k, v) for k, v in changes.items() if v]
        return values


def _just_above(maximum: str) -> int | None:
    """The exclusive bound for an inclusive ``maximum``; none above the largest priority."""
    if not maximum or int(maximum) == validation.INT64_MAX:
        return None
    return int(maximum) + 1


def parse_states(values: Sequence[str], name: str = "state") -> tuple[State, ...]:
    """States named in the query string (repeated parameter)."""
    states: list[State] = []
    for value in values:
        if not value:
            continue
        try:
            state = State(value)
        except ValueError:
            raise FormError(name, f"unknown state {value!r}") from None
        if state not in states:
            states.append(state)
    return tuple(states)


def parse_metadata(text: str, name: str = "meta") -> dict[str, str]:
    """``key=value`` pairs separated by commas or new lines."""
    pairs: dict[str, str] = {}
    for chunk in text.replace("\n", ",").split(","):
        item = chunk.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise FormError(name, f"{item!r} is not key=value")
        pairs[key.strip()] = value.strip()
    return pairs


def parse_priority(text: str, name: str) -> str:
    """A signed 64-bit integer, or empty."""
    value = text.strip()
    if not value:
        return ""
    try:
        number = int(value)
    except ValueError:
        raise FormError(name, f"{value!r} is not a whole number") from None
    if not validation.INT64_MIN <= number <= validation.INT64_MAX:
        raise FormError(name, f"must be between {validation.INT64_MIN} and {validation.INT64_MAX}")
    return str(number)


def browser_query(params: Mapping[str, Sequence[str]]) -> BrowserQuery:
    """The message browser's filters from its query string.

    Raises:
        FormError: a field is invalid (named).
    """

    def one(key: str) -> str:
        values = params.get(key) or [""]
        return values[-1]

    metadata_text = one("meta").strip()
    priority_min = parse_priority(one("priority_min"), "priority_min")
    priority_max = parse_priority(one("priority_max"), "priority_max")
    if priority_min and priority_max and int(priority_min) > int(priority_max):
        raise FormError("priority_max", "must not be below the minimum")
    order = one("order") or "enqueued_at"
    if order not in ("enqueued_at", "priority"):
        raise FormError("order", "must be enqueued_at or priority")
    limit_text = one("limit") or "50"
    if not limit_text.isdigit() or int(limit_text) not in PAGE_SIZES:
        raise FormError("limit", f"must be one of {', '.join(map(str, PAGE_SIZES))}")
    return BrowserQuery(
        states=parse_states(params.get("state") or []),
        metadata_text=metadata_text,
        metadata=parse_metadata(metadata_text),
        priority_min=priority_min,
        priority_max=priority_max,
        order="priority" if order == "priority" else "enqueued_at",
        limit=int(limit_text),
        cursor=one("cursor") or None,
    )


Action = Literal["requeue", "delete"]


@dataclass(frozen=True, slots=True)
class DeadLetterAction:
    """What the operator asked to do with dead letters: listed ids, or every one in
    ``states``."""

    action: Action
    ids: tuple[str, ...]
    every: bool
    states: tuple[str, ...]
    limit: int | None = None
    """With ``every``: only the ``limit`` oldest finished (None: all)."""
    ttl_seconds: int | None = None
    """A requeue's new TTL: they expire that long after it (None: never)."""


def _whole_number(form: Mapping[str, Sequence[str]], name: str, low: int, high: int) -> int | None:
    """The optional whole number ``name`` of a form, within ``[low, high]``; None when empty."""
    text = (form.get(name) or [""])[-1].strip()
    if not text:
        return None
    if not text.isdigit() or not low <= int(text) <= high:
        raise FormError(name, f"must be a whole number from {low} to {high}")
    return int(text)


def dead_letter_action(form: Mapping[str, Sequence[str]]) -> DeadLetterAction:
    """The dead-letter form: ``action``, then either ``ids`` or ``every=1`` with ``states``
    (and optionally ``limit``: the oldest finished only); or ``single=<action>:<id>`` (a row's
    own button, which ignores the selection). A requeue may carry ``ttl_seconds``.

    Raises:
        FormError: a field is invalid (named).
    """
    ttl_seconds = _whole_number(form, "ttl_seconds", 1, validation.MAX_RETENTION_SECONDS)
    limit = _whole_number(form, "limit", 1, MAX_BULK_LIMIT)
    single = (form.get("single") or [""])[-1]
    if single:
        action, _, message_id = single.partition(":")
        form = {"action": [action], "ids": [message_id]}
    action = (form.get("action") or [""])[-1]
    if action not in ("requeue", "delete"):
        raise FormError("action", "must be requeue or delete")
    every = (form.get("every") or [""])[-1] == "1"
    ids = tuple(dict.fromkeys(i for i in form.get("ids") or [] if i))
    states = tuple(s for s in form.get("states") or [] if s) or DEAD_LETTER_STATE_NAMES
    for state in states:
        if state not in DEAD_LETTER_STATE_NAMES:
            raise FormError("states", "must be errored or canceled")
    if not every and not ids:
        raise FormError("ids", "choose at least one message")
    return DeadLetterAction(
        "requeue" if action == "requeue" else "delete",
        ids,
        every,
        states,
        limit=limit if every else None,
        ttl_seconds=ttl_seconds if action == "requeue" else None,
    )
