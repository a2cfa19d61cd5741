"""The field rules of app/core/validation.py: names and ids, integers and their columns, text,
and datetimes with the timestamp range, with the field each refusal names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo

import pytest

from app.core import validation as v
from app.core.models import MessageChanges, NewMessage
from tests.core.helpers import LIMITS, NAIVE, NOW, SIMPLE, refused

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
