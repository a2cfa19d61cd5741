"""Every rule of app/core/validation.py, with the field each refusal names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo

import pytest

from app.core import validation as v
from app.core.errors import PayloadTooLargeError, ValidationError
from app.core.models import MessageChanges, NewMessage, QueueConfig
from app.core.states import State

LIMITS = v.Limits(max_payload_bytes=64)
SIMPLE = QueueConfig()
EXCLUSIVE = QueueConfig(kind="exclusive", exclusive_key="project")
NOW = datetime(2030, 1, 1, tzinfo=UTC)
NAIVE = datetime(2030, 1, 1)  # noqa: DTZ001 - the point of the test


def refused(field: str):
    """Context manager: a ValidationError naming exactly ``field``."""
    return _Refused(field)


class _Refused:
    def __init__(self, field: str) -> None:
        self.field = field

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, tb) -> bool:
        assert kind is not None, f"expected a ValidationError for {self.field!r}, nothing raised"
        assert kind is ValidationError, f"expected ValidationError, got {kind.__name__}: {error}"
        assert error.field == self.field
        assert error.details == {"field": self.field}
        assert error.message.startswith(f"{self.field}: ")
        assert error.code == "validation_error"
        return True


# --- names and ids ---------------------------------------------------------------------------


@pytest.mark.parametrize("good", ["a", "A", "0", "orders", "a.b_c-d", "x" * 64, "9lives"])
def test_name_accepts(good: str):
    assert v.name("queue", good) == good


@pytest.mark.parametrize(
    "bad", ["", "x" * 65, ".hidden", "_x", "-x", "a b", "a/b", "a:b", "ä", "a\x00", "a\n"]
)
def test_name_refuses(bad: str):
    with refused("queue"):
        v.name("queue", bad)


@pytest.mark.parametrize("good", ["a", "x" * 200, "job:42", "A.b_c-d:e", "-", ".", "0"])
def test_message_id_accepts(good: str):
    assert v.message_id("id", good) == good


@pytest.mark.parametrize("bad", ["", "x" * 201, "a b", "a/b", "é", "a\x00", "id\n", "a#b"])
def test_message_id_refuses(bad: str):
    with refused("messages[0].id"):
        v.message_id("messages[0].id", bad)


# --- integers, text, datetimes -----------------------------------------------------------------


def test_integer_bounds_are_inclusive():
    assert v.integer("n", 1, 1, 3) == 1
    assert v.integer("n", 3, 1, 3) == 3
    with refused("n"):
        v.integer("n", 0, 1, 3)
    with refused("n"):
        v.integer("n", 4, 1, 3)


def test_int64_bounds():
    assert v.INT64_MIN == -(2**63)
    assert v.INT64_MAX == 2**63 - 1
    for good in (v.INT64_MIN, v.INT64_MAX, 0, -1):
        message = NewMessage(priority=good)
        assert v.new_message("messages[0]", message, SIMPLE, LIMITS) is message
    for bad in (v.INT64_MIN - 1, v.INT64_MAX + 1, 2**64):
        with refused("messages[0].priority"):
            v.new_message("messages[0]", NewMessage(priority=bad), SIMPLE, LIMITS)


def test_text_length_and_nul():
    assert v.text("description", "x" * v.MAX_TEXT) == "x" * v.MAX_TEXT
    with refused("description"):
        v.text("description", "x" * (v.MAX_TEXT + 1))
    assert v.text("label", "x" * 10, 10) == "x" * 10
    with refused("label"):
        v.text("label", "x" * 11, 10)
    with refused("description"):
        v.text("description", "before\x00after")
    with refused("description"):
        v.text("description", "\x00")
    # The six characters backslash-u-0-0-0-0 are ordinary text.
    assert v.text("description", "\\u0000") == "\\u0000"


class _NoOffset(tzinfo):
    def utcoffset(self, dt):
        return None

    def dst(self, dt):
        return None


def test_text_refuses_lone_surrogates():
    assert v.text("label", "ünïcødé ✓ 🦄") == "ünïcødé ✓ 🦄"
    for bad in ("\ud800", "a\udfffb", "\udc00\ud800"):
        with refused("label"):
            v.text("label", bad, 200)
    with refused("messages[0].metadata.k"):
        v.metadata("messages[0].metadata", {"k": "\ud83d"})


def test_aware_datetimes_only():
    assert v.aware("visible_at", NOW) is NOW
    other = datetime(2030, 1, 1, tzinfo=timezone(timedelta(hours=-5)))
    assert v.aware("visible_at", other) is other
    with refused("visible_at"):
        v.aware("visible_at", NAIVE)
    with refused("visible_at"):
        v.aware("visible_at", datetime(2030, 1, 1, tzinfo=_NoOffset()))


PLUS_14 = timezone(timedelta(hours=14))
MINUS_14 = timezone(timedelta(hours=-14))
ALMOST_A_DAY = timezone(timedelta(hours=23, minutes=59))


def test_timestamp_bounds_are_inclusive_and_in_utc():
    earliest, latest = v.EARLIEST_TIMESTAMP, v.LATEST_TIMESTAMP
    assert (earliest.isoformat(), latest.isoformat()) == (
        "0001-01-02T00:00:00+00:00",
        "9999-12-30T23:59:59.999999+00:00",
    )
    for good in (
        earliest,
        latest,
        NOW,
        datetime(1, 1, 2, 14, tzinfo=PLUS_14),  # 0001-01-02T00:00Z
        datetime(9999, 12, 30, 9, 59, 59, 999999, tzinfo=MINUS_14),  # the latest, in -14:00
    ):
        assert v.timestamp("visible_at", good) is good
    for bad in (
        datetime(1, 1, 1, tzinfo=PLUS_14),  # 0000-12-31T10:00Z: year 0 in UTC
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(1, 1, 2, 13, 59, 59, 999999, tzinfo=PLUS_14),  # a microsecond too early
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=MINUS_14),  # 10000-01-01T13:59:59Z
        datetime(9999, 12, 31, tzinfo=UTC),
        datetime(9999, 12, 30, 10, tzinfo=MINUS_14),  # a microsecond too late
        datetime(1, 1, 1, 23, 58, tzinfo=ALMOST_A_DAY),
        NAIVE,
    ):
        with refused("visible_at"):
            v.timestamp("visible_at", bad)


def test_every_timestamp_field_is_bounded():
    early = datetime(1, 1, 1, tzinfo=PLUS_14)
    late = datetime(9999, 12, 31, 23, 59, 59, tzinfo=MINUS_14)
    for value in (early, late):
        with refused("messages[1].visible_at"):
            v.new_message("messages[1]", NewMessage(visible_at=value), SIMPLE, LIMITS)
        with refused("messages[1].expires_at"):
            v.new_message("messages[1]", NewMessage(expires_at=value), SIMPLE, LIMITS)
        with refused("visible_at"):
            v.message_changes(MessageChanges(visible_at=value), LIMITS)


def test_derived_timestamps_stay_representable():
    """What the server adds to ``now()`` (delays, TTLs, leases, retry backoff, retention) stays
    well inside the timestamp range for centuries."""
    longest = max(v.MAX_DELAY_SECONDS, v.MAX_RETENTION_SECONDS, v.MAX_LEASE_SECONDS)
    assert datetime(9000, 1, 1, tzinfo=UTC) + timedelta(seconds=longest) < v.LATEST_TIMESTAMP


def test_integer_bounds_fit_their_columns():
    """Every integer a client sets is stored in a column of the type checked here: ``integer``
    (32 bits) for counts and seconds, ``bigint`` for priorities."""
    from sqlalchemy import BigInteger, Integer

    from app.store.tables import messages, queues

    bounds = {
        **{f"queues.{k}": high for k, (_, high) in v._CONFIG_BOUNDS.items()},
        "messages.max_attempts": v.MAX_ATTEMPTS,
        "messages.lease_seconds": v.MAX_LEASE_SECONDS,
    }
    for name, high in bounds.items():
        table, column = name.split(".")
        kind = {"queues": queues, "messages": messages}[table].c[column].type
        assert type(kind) is Integer, name
        assert high <= v.INT32_MAX, name
    assert type(messages.c.priority.type) is BigInteger
    assert (v.INT64_MIN, v.INT64_MAX) == (-(2**63), 2**63 - 1)


# --- metadata --------------------------------------------------------------------------------


def test_metadata_accepts_up_to_the_limits():
    full = {f"k{i}": "v" for i in range(v.MAX_METADATA_PAIRS)}
    assert v.metadata("metadata", full) == full
    wide = {"k" * v.MAX_METADATA_KEY: "v" * v.MAX_METADATA_VALUE}
    assert v.metadata("metadata", wide) == wide
    assert v.metadata("metadata", {}) == {}
    assert v.metadata("metadata", {"k": ""}) == {"k": ""}


def test_metadata_too_many_pairs():
    too_many = {f"k{i}": "v" for i in range(v.MAX_METADATA_PAIRS + 1)}
    with refused("messages[2].metadata"):
        v.metadata("messages[2].metadata", too_many)


def test_metadata_empty_key():
    with refused("messages[2].metadata"):
        v.metadata("messages[2].metadata", {"": "v"})


def test_metadata_key_too_long():
    key = "k" * (v.MAX_METADATA_KEY + 1)
    with refused(f"messages[2].metadata.{key}"):
        v.metadata("messages[2].metadata", {key: "v"})


def test_metadata_value_too_long():
    with refused("messages[2].metadata.project"):
        v.metadata("messages[2].metadata", {"project": "v" * (v.MAX_METADATA_VALUE + 1)})


def test_metadata_nul_in_value_and_key():
    with refused("messages[2].metadata.project"):
        v.metadata("messages[2].metadata", {"project": "a\x00b"})
    with refused("messages[2].metadata.pro\x00ject"):
        v.metadata("messages[2].metadata", {"pro\x00ject": "a"})


# --- payload ---------------------------------------------------------------------------------


def test_payload_size_limit():
    exact = b'"' + b"x" * 62 + b'"'
    assert len(exact) == LIMITS.max_payload_bytes
    assert v.payload("payload", exact, LIMITS) is exact
    over = b'"' + b"x" * 63 + b'"'
    with pytest.raises(PayloadTooLargeError) as info:
        v.payload("messages[1].payload", over, LIMITS)
    assert info.value.details == {"field": "messages[1].payload", "limit": 64}
    assert info.value.code == "payload_too_large"
    assert "65" in info.value.message


def test_payload_size_counts_bytes_not_characters():
    # 32 two-byte characters: 32 characters, 66 bytes with the quotes.
    payload = ('"' + "é" * 32 + '"').encode()
    with pytest.raises(PayloadTooLargeError):
        v.payload("payload", payload, LIMITS)


@pytest.mark.parametrize(
    "raw",
    [
        rb'"\u0000"',
        rb'{"a": "x\u0000y"}',
        rb'["ok", "\u0000"]',
        rb'"\\\u0000"',  # an escaped backslash, then an escaped NUL
        rb'{"\u0000": 1}',
    ],
)
def test_payload_with_escaped_nul_is_refused(raw: bytes):
    with refused("messages[0].payload"):
        v.payload("messages[0].payload", raw, LIMITS)


@pytest.mark.parametrize(
    "raw",
    [
        rb'"\\u0000"',  # an escaped backslash followed by the text u0000
        rb'"\\\\u0000"',
        rb'"u0000"',
        rb'"\u0001"',
        rb'{"a": null}',
    ],
)
def test_payload_with_literal_backslash_u0000_is_accepted(raw: bytes):
    assert v.payload("payload", raw, LIMITS) is raw


def test_payload_refused_when_one_of_several_escapes_is_a_nul():
    raw = rb'["\\u0000", "\u0000"]'
    with refused("payload"):
        v.payload("payload", raw, LIMITS)


@pytest.mark.parametrize(
    "raw",
    [
        b"1e131072",  # 131073 digits before the point
        b"-1e131072",
        b"1e-16384",  # 16384 digits after it
        b"0e-16384",
        b"[1, 2, 1E+999999999]",
        b'{"a": [0.5e2147483647]}',
        b"1e" + b"9" * 5000,
        b"0." + b"0" * 16384,
    ],
)
def test_payload_numbers_beyond_numeric_are_refused(raw: bytes):
    limits = v.Limits(max_payload_bytes=1 << 20)
    with refused("messages[0].payload"):
        v.payload("messages[0].payload", raw, limits)


@pytest.mark.parametrize(
    "raw",
    [
        b"1e300",
        b"-1.7976931348623157e+308",  # the largest double
        b"5e-324",  # the smallest
        b"0e999999",  # zero, whatever the exponent
        b'"1e999999"',  # text, not a number
        rb'{"1e999999": "\"1e999999"}',  # an escaped quote, then text
        b"1" * 4000,
    ],
)
def test_payload_numbers_within_numeric_are_accepted(raw: bytes):
    limits = v.Limits(max_payload_bytes=1 << 20)
    assert v.payload("payload", raw, limits) is raw


def test_payload_counts_numbers_as_stored_against_the_limit():
    # 1e63 is stored and returned as 64 digits: 64 bytes, the limit.
    assert v.payload("payload", b"1e63", LIMITS) == b"1e63"
    with pytest.raises(PayloadTooLargeError) as info:
        v.payload("messages[3].payload", b"1e64", LIMITS)
    assert info.value.details == {"field": "messages[3].payload", "limit": 64}
    assert "65 bytes" in info.value.message


def test_payload_nesting_is_bounded():
    limits = v.Limits(max_payload_bytes=1 << 20)
    deepest = b"[" * v.MAX_PAYLOAD_DEPTH + b"]" * v.MAX_PAYLOAD_DEPTH
    assert v.payload("payload", deepest, limits) is deepest
    wide = b"[" + b"[], " * 2000 + b"[]]"  # many brackets, depth 2
    assert v.payload("payload", wide, limits) is wide
    brackets_in_text = b'["' + b"[" * 2000 + b'"]'
    assert v.payload("payload", brackets_in_text, limits) is brackets_in_text
    deeper = b"[" + deepest + b"]"
    with refused("messages[0].payload"):
        v.payload("messages[0].payload", deeper, limits)
    objects = b'{"a":' * (v.MAX_PAYLOAD_DEPTH + 1) + b"1" + b"}" * (v.MAX_PAYLOAD_DEPTH + 1)
    with refused("payload"):
        v.payload("payload", objects, limits)


# --- states ----------------------------------------------------------------------------------


def test_states():
    assert v.states("states", ["errored", "canceled"]) == (State.ERRORED, State.CANCELED)
    assert v.states("states", []) == ()
    with refused("states[1]"):
        v.states("states", ["errored", "dead"])
    with refused("states[0]"):
        v.states("states", ["Errored"])


# --- a message of an enqueue batch -----------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (NewMessage(id="bad id"), "messages[2].id"),
        (NewMessage(id=""), "messages[2].id"),
        (NewMessage(priority=2**63), "messages[2].priority"),
        (NewMessage(payload=rb'"\u0000"'), "messages[2].payload"),
        (NewMessage(metadata={"k": "\x00"}), "messages[2].metadata.k"),
        (NewMessage(metadata={"": "x"}), "messages[2].metadata"),
        (NewMessage(delay_seconds=1, visible_at=NOW), "messages[2].visible_at"),
        (NewMessage(delay_seconds=-1), "messages[2].delay_seconds"),
        (NewMessage(delay_seconds=v.MAX_DELAY_SECONDS + 1), "messages[2].delay_seconds"),
        (NewMessage(visible_at=NAIVE), "messages[2].visible_at"),
        (NewMessage(ttl_seconds=1, expires_at=NOW), "messages[2].expires_at"),
        (NewMessage(ttl_seconds=0), "messages[2].ttl_seconds"),
        (NewMessage(ttl_seconds=v.MAX_RETENTION_SECONDS + 1), "messages[2].ttl_seconds"),
        (NewMessage(expires_at=NAIVE), "messages[2].expires_at"),
        (NewMessage(max_attempts=0), "messages[2].max_attempts"),
        (NewMessage(max_attempts=v.MAX_ATTEMPTS + 1), "messages[2].max_attempts"),
        (NewMessage(lease_seconds=0), "messages[2].lease_seconds"),
        (NewMessage(lease_seconds=v.MAX_LEASE_SECONDS + 1), "messages[2].lease_seconds"),
    ],
)
def test_new_message_refusals(message: NewMessage, field: str):
    with refused(field):
        v.new_message("messages[2]", message, SIMPLE, LIMITS)


def test_new_message_accepts_every_field_at_its_bounds():
    message = NewMessage(
        id="x" * 200,
        priority=v.INT64_MIN,
        payload=b'{"a": 1}',
        metadata={"k": "v"},
        delay_seconds=v.MAX_DELAY_SECONDS,
        max_attempts=v.MAX_ATTEMPTS,
        lease_seconds=v.MAX_LEASE_SECONDS,
        ttl_seconds=v.MAX_RETENTION_SECONDS,
    )
    assert v.new_message("m", message, SIMPLE, LIMITS) is message
    low = NewMessage(delay_seconds=0, max_attempts=1, lease_seconds=1, ttl_seconds=1)
    assert v.new_message("m", low, SIMPLE, LIMITS) is low
    dated = NewMessage(visible_at=NOW, expires_at=NOW + timedelta(days=1))
    assert v.new_message("m", dated, SIMPLE, LIMITS) is dated


def test_new_message_payload_too_large_names_the_field():
    with pytest.raises(PayloadTooLargeError) as info:
        v.new_message("messages[4]", NewMessage(payload=b"1" * 65), SIMPLE, LIMITS)
    assert info.value.details["field"] == "messages[4].payload"


def test_exclusive_queue_requires_the_key():
    with refused("messages[2].metadata.project"):
        v.new_message("messages[2]", NewMessage(), EXCLUSIVE, LIMITS)
    with refused("messages[2].metadata.project"):
        v.new_message("messages[2]", NewMessage(metadata={"other": "x"}), EXCLUSIVE, LIMITS)
    with refused("messages[2].metadata.project"):
        v.new_message("messages[2]", NewMessage(metadata={"project": ""}), EXCLUSIVE, LIMITS)
    ok = NewMessage(metadata={"project": "foo"})
    assert v.new_message("messages[2]", ok, EXCLUSIVE, LIMITS) is ok
    # A simple queue does not care about the key.
    assert v.new_message("messages[2]", NewMessage(), SIMPLE, LIMITS) is not None


def test_enqueue_batch_size():
    with refused("messages"):
        v.enqueue_batch([], SIMPLE, LIMITS)
    with refused("messages"):
        v.enqueue_batch([NewMessage()] * (v.MAX_BATCH_ENQUEUE + 1), SIMPLE, LIMITS)
    v.enqueue_batch([NewMessage()] * v.MAX_BATCH_ENQUEUE, SIMPLE, LIMITS)


def test_enqueue_batch_names_the_first_bad_message_by_index():
    batch = [
        NewMessage(metadata={"project": "a"}),
        NewMessage(metadata={"project": "b"}),
        NewMessage(metadata={"other": "c"}),
        NewMessage(id="bad id", metadata={"project": "d"}),
    ]
    with refused("messages[2].metadata.project"):
        v.enqueue_batch(batch, EXCLUSIVE, LIMITS)
    with refused("messages[3].id"):
        v.enqueue_batch(batch, SIMPLE, LIMITS)  # a simple queue does not need the key


# --- a change of a waiting message -----------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        (MessageChanges(priority=2**63), "priority"),
        (MessageChanges(priority=-(2**63) - 1), "priority"),
        (MessageChanges(payload=rb'"\u0000"'), "payload"),
        (MessageChanges(metadata={"k": "v" * 257}), "metadata.k"),
        (MessageChanges(metadata={f"k{i}": "v" for i in range(17)}), "metadata"),
        (MessageChanges(visible_at=NAIVE), "visible_at"),
    ],
)
def test_message_changes_refusals(changes: MessageChanges, field: str):
    with refused(field):
        v.message_changes(changes, LIMITS)


def test_message_changes_accepts():
    changes = MessageChanges(
        priority=v.INT64_MAX, payload=b"[]", metadata={"a": "b"}, visible_at=NOW
    )
    assert v.message_changes(changes, LIMITS) is changes
    assert v.message_changes(MessageChanges(), LIMITS) == MessageChanges()
    with pytest.raises(PayloadTooLargeError):
        v.message_changes(MessageChanges(payload=b"1" * 65), LIMITS)


# --- queue configuration ---------------------------------------------------------------------


def test_queue_config_defaults_are_valid():
    assert v.queue_config(QueueConfig()) == QueueConfig()
    assert v.queue_config(EXCLUSIVE) == EXCLUSIVE


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (QueueConfig(kind="fifo"), "kind"),  # type: ignore[arg-type]
        (QueueConfig(kind="exclusive"), "exclusive_key"),
        (QueueConfig(kind="exclusive", exclusive_key=""), "exclusive_key"),
        (QueueConfig(kind="exclusive", exclusive_key="k" * 65), "exclusive_key"),
        (QueueConfig(kind="exclusive", exclusive_key="a\x00"), "exclusive_key"),
        (QueueConfig(exclusive_key="project"), "exclusive_key"),
        (QueueConfig(lease_seconds=0), "lease_seconds"),
        (QueueConfig(lease_seconds=v.MAX_LEASE_SECONDS + 1), "lease_seconds"),
        (QueueConfig(delay_seconds=-1), "delay_seconds"),
        (QueueConfig(delay_seconds=v.MAX_DELAY_SECONDS + 1), "delay_seconds"),
        (QueueConfig(max_attempts=0), "max_attempts"),
        (QueueConfig(max_attempts=v.MAX_ATTEMPTS + 1), "max_attempts"),
        (QueueConfig(retry_delay_seconds=-1), "retry_delay_seconds"),
        (QueueConfig(retry_delay_seconds=v.MAX_DELAY_SECONDS + 1), "retry_delay_seconds"),
        (QueueConfig(retry_delay_max_seconds=-1), "retry_delay_max_seconds"),
        (QueueConfig(retention_seconds=-1), "retention_seconds"),
        (QueueConfig(retention_seconds=v.MAX_RETENTION_SECONDS + 1), "retention_seconds"),
    ],
)
def test_queue_config_refusals(config: QueueConfig, field: str):
    with refused(field):
        v.queue_config(config)


def test_queue_config_bounds_inclusive():
    config = QueueConfig(
        lease_seconds=v.MAX_LEASE_SECONDS,
        delay_seconds=v.MAX_DELAY_SECONDS,
        max_attempts=v.MAX_ATTEMPTS,
        retry_delay_seconds=v.MAX_DELAY_SECONDS,
        retry_delay_max_seconds=v.MAX_DELAY_SECONDS,
        retention_seconds=v.MAX_RETENTION_SECONDS,
    )
    assert v.queue_config(config) is config
    low = QueueConfig(
        lease_seconds=1,
        delay_seconds=0,
        max_attempts=1,
        retry_delay_seconds=0,
        retry_delay_max_seconds=0,
        retention_seconds=0,
    )
    assert v.queue_config(low) is low


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"kind": "exclusive"}, "kind"),
        ({"exclusive_key": "x"}, "exclusive_key"),
        ({"colour": "blue"}, "colour"),
        ({"lease_seconds": 0}, "lease_seconds"),
        ({"max_attempts": v.MAX_ATTEMPTS + 1}, "max_attempts"),
        ({"retention_seconds": -1}, "retention_seconds"),
        ({"delay_seconds": 0, "retry_delay_seconds": -1}, "retry_delay_seconds"),
    ],
)
def test_queue_patch_refusals(changes: dict, field: str):
    with refused(field):
        v.queue_patch(changes)


def test_queue_patch_accepts():
    changes = {"lease_seconds": 60, "enqueue_paused": True, "dequeue_paused": False}
    result = v.queue_patch(changes)
    assert result == changes
    assert result is not changes  # a copy
    assert v.queue_patch({}) == {}
