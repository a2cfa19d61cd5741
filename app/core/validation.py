"""Input rules: every edge validates through these functions, so the HTTP API, the CLI, the
dashboard and the pipeline refuse the same things with the same field names.

Types (int vs str, strictness) are the edges' business; these functions check ranges, lengths,
patterns and the rules that tie fields together. Each raises :class:`ValidationError` naming the
offending field, before anything is written.

The ranges are those the server can store *and read back*: every integer fits its column
(``bigint`` priorities, ``integer`` counts and seconds), every timestamp a client sends lies
within :data:`EARLIEST_TIMESTAMP` .. :data:`LATEST_TIMESTAMP`, every timestamp the server
derives (``now()`` plus at most :data:`MAX_RETENTION_SECONDS`) stays far inside it, text is
Unicode without NUL characters, and a payload is JSON that ``jsonb`` holds as it was sent
(:mod:`app.core.jsonb`). So a value that was accepted can always be returned, and the database's
own refusals are left for what no rule can foresee.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.core import jsonb
from app.core.errors import PayloadTooLargeError, ValidationError
from app.core.models import (
    IMMUTABLE_QUEUE_FIELDS,
    MAX_FILTER_KEYS,
    MUTABLE_QUEUE_FIELDS,
    FilterValue,
    MessageChanges,
    NewMessage,
    QueueConfig,
)
from app.core.states import State

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
MAX_DELAY_SECONDS = 365 * 24 * 3600
MAX_LEASE_SECONDS = 12 * 3600
MAX_ATTEMPTS = 1000
MAX_RETENTION_SECONDS = 10 * 365 * 24 * 3600
MAX_BATCH_ENQUEUE = 1000
MAX_BATCH_DEQUEUE = 100
MAX_BATCH_ACK = 1000
MAX_QUERY_LIMIT = 1000
MAX_WAIT_SECONDS = 20
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 256
MAX_FILTER_VALUES = 32
"""How many values a dequeue filter's list (any of them) may hold, and how many combinations
the lists of one filter may make (the product of their lengths)."""
MAX_TEXT = 4096
MAX_PAYLOAD_DEPTH = 512

EARLIEST_TIMESTAMP = datetime(1, 1, 2, tzinfo=UTC)
LATEST_TIMESTAMP = datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC)
"""The timestamps a client may send, bounds included, compared in UTC (after the offset).

PostgreSQL's ``timestamptz`` would take far more (4713 BC to 294276 AD), but the server reads
timestamps back as Python datetimes, which end at years 1 and 9999 *in the database session's
time zone* (up to 16 hours from UTC): a day inside each end keeps every accepted timestamp
readable whatever that zone, and encodable as RFC 3339 on the way out."""

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MESSAGE_ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,200}")


@dataclass(frozen=True, slots=True)
class Limits:
    """Limits that come from configuration rather than from the product's fixed rules."""

    max_payload_bytes: int = 256 * 1024


def name(field: str, value: str) -> str:
    """A namespace or queue name: 1-64 of ``[A-Za-z0-9._-]``, starting alphanumeric."""
    if not NAME_PATTERN.fullmatch(value):
        raise ValidationError(
            field, "must be 1-64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit"
        )
    return value


def message_id(field: str, value: str) -> str:
    """A producer-chosen message id: 1-200 of ``[A-Za-z0-9._:-]``."""
    if not MESSAGE_ID_PATTERN.fullmatch(value):
        raise ValidationError(field, "must be 1-200 characters of A-Z a-z 0-9 . _ : -")
    return value


def integer(field: str, value: int, low: int, high: int) -> int:
    """An integer within ``[low, high]``."""
    if not low <= value <= high:
        raise ValidationError(field, f"must be between {low} and {high}")
    return value


def text(field: str, value: str, max_length: int = MAX_TEXT) -> str:
    """Free text: bounded, without NUL characters (PostgreSQL cannot store them) and without
    lone surrogates (not Unicode text: no UTF-8 encoding exists for them)."""
    if len(value) > max_length:
        raise ValidationError(field, f"must be at most {max_length} characters")
    if "\x00" in value:
        raise ValidationError(field, "must not contain NUL characters")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise ValidationError(field, "must be Unicode text (no lone surrogates)") from None
    return value


def aware(field: str, value: datetime) -> datetime:
    """A timestamp with a time zone (naive times are ambiguous for a delay queue)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(field, "must include a time zone, e.g. 2030-01-01T00:00:00Z")
    return value


def timestamp(field: str, value: datetime) -> datetime:
    """A timestamp with a time zone, within :data:`EARLIEST_TIMESTAMP` ..
    :data:`LATEST_TIMESTAMP` once its offset is applied (``0001-01-01T00:00:00+14:00`` is
    year 0 in UTC: refused)."""
    aware(field, value)
    if not EARLIEST_TIMESTAMP <= value <= LATEST_TIMESTAMP:
        raise ValidationError(
            field,
            "must be between 0001-01-02T00:00:00Z and 9999-12-30T23:59:59.999999Z"
            " once its UTC offset is applied",
        )
    return value


def _metadata_keys(field: str, value: Mapping[str, object]) -> None:
    """At most 16 pairs, each key 1-64 characters without NUL."""
    if len(value) > MAX_METADATA_PAIRS:
        raise ValidationError(field, f"must have at most {MAX_METADATA_PAIRS} pairs")
    for key in value:
        if not key:
            raise ValidationError(field, "keys must not be empty")
        text(f"{field}.{key}", key, MAX_METADATA_KEY)


def metadata(field: str, value: Mapping[str, str]) -> dict[str, str]:
    """At most 16 string pairs, key 1-64 characters, value up to 256, no NUL."""
    _metadata_keys(field, value)
    for key, item in value.items():
        text(f"{field}.{key}", item, MAX_METADATA_VALUE)
    return dict(value)


def dequeue_request(
    count: int, lease_seconds: int | None, filter_: Mapping[str, FilterValue], prefix: str = ""
) -> dict[str, FilterValue]:
    """A dequeue's ``count``, ``lease_seconds`` and metadata filter, the fields named after
    ``prefix`` (``"dequeue."`` in an acknowledgement); returns the checked filter."""
    integer(f"{prefix}count", count, 1, MAX_BATCH_DEQUEUE)
    if lease_seconds is not None:
        integer(f"{prefix}lease_seconds", lease_seconds, 1, MAX_LEASE_SECONDS)
    return dequeue_filter(f"{prefix}metadata", filter_)


def dequeue_filter(field: str, value: Mapping[str, FilterValue]) -> dict[str, FilterValue]:
    """A dequeue's metadata filter: pairs as :func:`metadata` allows, all of which must match,
    where a value may also be a list of 1 to :data:`MAX_FILTER_VALUES` values, any of which
    matches (``{"tag": ["A", "B"]}``: tag A or tag B). A list comes back as a tuple without
    repeats, and a list of one value as that value; the lists of one filter may make at most
    :data:`MAX_FILTER_VALUES` combinations. The same rules for every dequeue: REST, the ack's
    next dequeue, long polls."""
    _metadata_keys(field, value)
    checked: dict[str, FilterValue] = {}
    combinations = 1
    for key, item in value.items():
        if isinstance(item, str):
            checked[key] = text(f"{field}.{key}", item, MAX_METADATA_VALUE)
            continue
        if not 1 <= len(item) <= MAX_FILTER_VALUES:
            raise ValidationError(
                f"{field}.{key}", f"must list 1 to {MAX_FILTER_VALUES} values (any of them)"
            )
        for index, one in enumerate(item):
            if not isinstance(one, str):
                raise ValidationError(f"{field}.{key}[{index}]", "must be a string")
            text(f"{field}.{key}[{index}]", one, MAX_METADATA_VALUE)
        values = tuple(dict.fromkeys(item))
        combinations *= len(values)
        checked[key] = values[0] if len(values) == 1 else values
    if combinations > MAX_FILTER_VALUES:
        raise ValidationError(
            field,
            f"its lists must make at most {MAX_FILTER_VALUES} combinations"
            " (the product of their lengths)",
        )
    return checked


def payload(field: str, value: bytes, limits: Limits) -> bytes:
    """A JSON payload that PostgreSQL's ``jsonb`` stores and returns as sent, within the
    configured limit.

    ``jsonb`` cannot hold a NUL character (``\\u0000``), nor a number beyond ``numeric``'s
    range (``1e131072``), and it returns numbers written out in full (``1e300`` comes back as
    301 digits, and counts so against the limit): such payloads are refused here, where the
    field can be named, rather than failing in the database or coming back larger than the
    limit. Nesting is bounded too (:data:`MAX_PAYLOAD_DEPTH`), below what PostgreSQL's parser
    refuses.
    """
    if len(value) > limits.max_payload_bytes:
        raise PayloadTooLargeError(
            f"{field} is {len(value)} bytes; the limit is {limits.max_payload_bytes}",
            field=field,
            limit=limits.max_payload_bytes,
        )
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationError(field, "must be UTF-8 encoded JSON") from None
    if b"\\u0000" in value and _has_escaped_nul(value):
        raise ValidationError(field, "must not contain the NUL character \\u0000")
    if jsonb.deeper_than(value, MAX_PAYLOAD_DEPTH):
        raise ValidationError(field, f"must not nest more than {MAX_PAYLOAD_DEPTH} levels deep")
    try:
        stored = len(value) + jsonb.number_growth(value)
    except jsonb.UnstorableNumberError as error:
        raise ValidationError(
            field,
            f"holds the number {error.number}, beyond what can be stored (at most"
            f" {jsonb.NUMERIC_MAX_WHOLE_DIGITS} digits before the decimal point and"
            f" {jsonb.NUMERIC_MAX_SCALE} after it, once the exponent is applied)",
        ) from None
    if stored > limits.max_payload_bytes:
        raise PayloadTooLargeError(
            f"{field} is {stored} bytes once its numbers are written out in full, as they are"
            f" stored and returned (1e3 as 1000); the limit is {limits.max_payload_bytes}",
            field=field,
            limit=limits.max_payload_bytes,
        )
    return value


def _has_escaped_nul(raw: bytes) -> bool:
    # An odd number of backslashes before "u0000" means it escapes a NUL (an even number is an
    # escaped backslash followed by the literal text "u0000").
    return any(len(match.group(1)) % 2 == 1 for match in re.finditer(rb"(\\+)u0000", raw))


def states(field: str, values: Sequence[str]) -> tuple[State, ...]:
    """A list of state names."""
    result = []
    for index, value in enumerate(values):
        try:
            result.append(State(value))
        except ValueError:
            allowed = ", ".join(s.value for s in State)
            raise ValidationError(f"{field}[{index}]", f"must be one of {allowed}") from None
    return tuple(result)


def expiry(ttl_seconds: int | None, expires_at: datetime | None, prefix: str = "") -> None:
    """A message's expiry: a TTL of 1 s to 10 years or a time (not both), the fields named after
    ``prefix``."""
    if ttl_seconds is not None and expires_at is not None:
        raise ValidationError(f"{prefix}expires_at", "give ttl_seconds or expires_at, not both")
    if ttl_seconds is not None:
        integer(f"{prefix}ttl_seconds", ttl_seconds, 1, MAX_RETENTION_SECONDS)
    if expires_at is not None:
        timestamp(f"{prefix}expires_at", expires_at)


def new_message(field: str, message: NewMessage, config: QueueConfig, limits: Limits) -> NewMessage:
    """Check one message of an enqueue batch against the rules and its queue's configuration."""
    if message.id is not None:
        message_id(f"{field}.id", message.id)
    if message.priority is not None:
        integer(f"{field}.priority", message.priority, INT64_MIN, INT64_MAX)
    if message.payload is not None:
        payload(f"{field}.payload", message.payload, limits)
    metadata(f"{field}.metadata", message.metadata)
    if message.delay_seconds is not None and message.visible_at is not None:
        raise ValidationError(f"{field}.visible_at", "give delay_seconds or visible_at, not both")
    if message.delay_seconds is not None:
        integer(f"{field}.delay_seconds", message.delay_seconds, 0, MAX_DELAY_SECONDS)
    if message.visible_at is not None:
        timestamp(f"{field}.visible_at", message.visible_at)
    expiry(message.ttl_seconds, message.expires_at, prefix=f"{field}.")
    if message.max_attempts is not None:
        integer(f"{field}.max_attempts", message.max_attempts, 1, MAX_ATTEMPTS)
    if message.lease_seconds is not None:
        integer(f"{field}.lease_seconds", message.lease_seconds, 1, MAX_LEASE_SECONDS)
    if config.kind == "exclusive":
        key = config.exclusive_key
        assert key is not None
        if not message.metadata.get(key):
            raise ValidationError(
                f"{field}.metadata.{key}",
                f"is required: this exclusive queue runs one message per '{key}' value",
            )
    return message


def enqueue_batch(messages: Sequence[NewMessage], config: QueueConfig, limits: Limits) -> None:
    """Check a whole enqueue batch; the first bad message rejects it, named by its index."""
    if not 1 <= len(messages) <= MAX_BATCH_ENQUEUE:
        raise ValidationError("messages", f"must hold 1 to {MAX_BATCH_ENQUEUE} messages")
    for index, message in enumerate(messages):
        new_message(f"messages[{index}]", message, config, limits)


def message_changes(changes: MessageChanges, limits: Limits) -> MessageChanges:
    """Check a PATCH of a waiting message."""
    if changes.priority is not None:
        integer("priority", changes.priority, INT64_MIN, INT64_MAX)
    if changes.payload is not None:
        payload("payload", changes.payload, limits)
    if changes.metadata is not None:
        metadata("metadata", changes.metadata)
    if changes.visible_at is not None:
        timestamp("visible_at", changes.visible_at)
    return changes


_CONFIG_BOUNDS: dict[str, tuple[int, int]] = {
    "lease_seconds": (1, MAX_LEASE_SECONDS),
    "delay_seconds": (0, MAX_DELAY_SECONDS),
    "max_attempts": (1, MAX_ATTEMPTS),
    "retry_delay_seconds": (0, MAX_DELAY_SECONDS),
    "retry_delay_max_seconds": (0, MAX_DELAY_SECONDS),
    "retention_seconds": (0, MAX_RETENTION_SECONDS),
}


def filter_keys(field: str, keys: Sequence[str]) -> None:
    """A queue's indexed filter keys: at most MAX_FILTER_KEYS distinct, non-empty metadata
    keys."""
    if len(keys) > MAX_FILTER_KEYS:
        raise ValidationError(field, f"may name at most {MAX_FILTER_KEYS} keys")
    for key in keys:
        if not key:
            raise ValidationError(field, "must not be empty")
        text(field, key, MAX_METADATA_KEY)
    if len(set(keys)) != len(keys):
        raise ValidationError(field, "must not name a key twice")


def queue_config(config: QueueConfig) -> QueueConfig:
    """Check a whole queue configuration (creation or replacement)."""
    if config.kind not in ("simple", "exclusive"):
        raise ValidationError("kind", "must be 'simple' or 'exclusive'")
    if config.kind == "exclusive":
        if not config.exclusive_key:
            raise ValidationError("exclusive_key", "is required for an exclusive queue")
        text("exclusive_key", config.exclusive_key, MAX_METADATA_KEY)
    elif config.exclusive_key is not None:
        raise ValidationError("exclusive_key", "is only allowed for an exclusive queue")
    filter_keys("filter_keys", config.filter_keys)
    if config.ordering not in ("priority", "due"):
        raise ValidationError("ordering", "must be 'priority' or 'due'")
    for key, (low, high) in _CONFIG_BOUNDS.items():
        integer(key, getattr(config, key), low, high)
    if config.dead_letter_queue is not None:
        name("dead_letter_queue", config.dead_letter_queue)
    return config


def queue_patch(changes: Mapping[str, Any]) -> dict[str, Any]:
    """Check a PATCH of a queue: only mutable fields, each within bounds."""
    for key, value in changes.items():
        if key in IMMUTABLE_QUEUE_FIELDS:
            raise ValidationError(key, "is fixed when the queue is created")
        if key not in MUTABLE_QUEUE_FIELDS:
            raise ValidationError(key, "is not a queue setting")
        if key in _CONFIG_BOUNDS:
            low, high = _CONFIG_BOUNDS[key]
            integer(key, value, low, high)
        if key == "dead_letter_queue" and value is not None:
            name(key, value)
    return dict(changes)
