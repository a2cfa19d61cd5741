"""The extreme values the representable-values property of tests/api/test_representable.py
draws, as Hypothesis strategies: timestamps around years 1 and 9999 with offsets up to ±23:59,
integers around the 32- and 64-bit limits and every range's ends, long, empty and odd text
(NUL, lone surrogates), metadata, and payloads with numbers beyond ``numeric``; and
:func:`body_of`, a request body holding one or two such fields."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from app.core import validation as v

DATES = [
    "0001-01-01T00:00:00",
    "0001-01-01T23:59:59.999999",
    "0001-01-02T00:00:00",
    "0001-01-02T13:59:59.999999",
    "0001-01-02T14:00:00",
    "1970-01-01T00:00:00",
    "2030-06-01T12:00:00.5",
    "9999-12-30T09:59:59.999999",
    "9999-12-30T10:00:00",
    "9999-12-30T23:59:59.999999",
    "9999-12-31T00:00:00",
    "9999-12-31T23:59:59",
]
OFFSETS = ["Z", "+00:00", "+14:00", "-14:00", "+23:59", "-23:59", "+05:30", ""]
ACCEPTED_TIMES = [
    "0001-01-02T00:00:00Z",
    "0001-01-02T14:00:00+14:00",
    "0001-01-01T10:00:00-14:00",
    "0001-01-02T23:59:00+23:59",
    "9999-12-30T23:59:59.999999Z",
    "9999-12-30T09:59:59.999999-14:00",
    "9999-12-31T13:59:59.999999+14:00",
    "9999-12-31T23:58:59+23:59",
]
"""The ends of the accepted range, written with offsets (a day's worth at most)."""
_offsets = st.integers(-(23 * 60 + 59), 23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))
timestamps = st.one_of(
    st.sampled_from(ACCEPTED_TIMES),
    st.builds(str.__add__, st.sampled_from(DATES), st.sampled_from(OFFSETS)),
    st.datetimes(
        min_value=datetime(1, 1, 1),  # noqa: DTZ001 - offsets come from `timezones`
        max_value=datetime(9999, 12, 31, 23, 59, 59, 999999),  # noqa: DTZ001
        timezones=_offsets,
    ).map(datetime.isoformat),
)

EDGE_INTS = [
    0,
    1,
    -1,
    v.INT32_MAX,
    v.INT32_MAX + 1,
    -(2**31),
    -(2**31) - 1,
    v.INT64_MAX,
    v.INT64_MAX + 1,
    v.INT64_MIN,
    v.INT64_MIN - 1,
    2**64 - 1,
    2**64,
    10**30,
    v.MAX_LEASE_SECONDS,
    v.MAX_LEASE_SECONDS + 1,
    v.MAX_DELAY_SECONDS,
    v.MAX_DELAY_SECONDS + 1,
    v.MAX_RETENTION_SECONDS,
    v.MAX_RETENTION_SECONDS + 1,
    v.MAX_ATTEMPTS,
    v.MAX_ATTEMPTS + 1,
]
integers = st.one_of(st.sampled_from(EDGE_INTS), st.integers())


def ranged(low: int, high: int) -> st.SearchStrategy[int]:
    """An integer field accepting ``low``..``high``: its ends (often), inside, or anything."""
    return st.one_of(st.sampled_from([low, high]), st.integers(low, high), integers)


priorities = ranged(v.INT64_MIN, v.INT64_MAX)
delays = ranged(0, v.MAX_DELAY_SECONDS)
leases = ranged(1, v.MAX_LEASE_SECONDS)
attempts = ranged(1, v.MAX_ATTEMPTS)
retentions = ranged(0, v.MAX_RETENTION_SECONDS)

EDGE_TEXT = [
    "",
    " ",
    "k",
    "x" * 64,
    "x" * 65,
    "x" * 200,
    "x" * 201,
    "x" * 256,
    "x" * 257,
    "x" * v.MAX_TEXT,
    "x" * (v.MAX_TEXT + 1),
    "é" * v.MAX_TEXT,
    "\U0001f984" * 300,
    "\x00",
    "a\x00b",
    "\ud800",
    "a\udfffb",
    "\ufeff\u2028\u202e",
    "'; DROP TABLE messages; --",
    "\\u0000",
]
texts = st.one_of(st.sampled_from(EDGE_TEXT), st.text(max_size=80))
metadata = st.one_of(
    st.dictionaries(texts, texts, max_size=3),
    st.just({f"k{i}": "v" for i in range(v.MAX_METADATA_PAIRS + 1)}),
)

EDGE_PAYLOADS = [
    "null",
    '{"a": [1, 2.5, true, "\\u00e9"]}',
    "1e63",
    "1e300",
    "1e4000",
    "1e4095",
    "1e4096",
    "1e131071",
    "1e131072",
    "1e-16383",
    "1e-16384",
    "-0.0e-99",
    "0e999999",
    "18446744073709551616",
    "1" * 4000,
    "[" * v.MAX_PAYLOAD_DEPTH + "]" * v.MAX_PAYLOAD_DEPTH,
    "[" * (v.MAX_PAYLOAD_DEPTH + 1) + "]" * (v.MAX_PAYLOAD_DEPTH + 1),
    '"\\u0000"',
    '"\\ud800"',
    '"\\ud83e\\udd84"',
    '"' + "x" * 5000 + '"',
]
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
payloads = st.one_of(st.sampled_from(EDGE_PAYLOADS), _json_values.map(json.dumps))


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``strategy``, or ``None`` (a field sent as ``null``)."""
    return st.one_of(st.just(None), strategy)


def body_of(**strategies: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A body holding up to two of these fields (a value or ``null``), so that one extreme
    value at a time is often accepted, and the answer is about that value."""
    names = sorted(strategies)
    return st.lists(st.sampled_from(names), max_size=2, unique=True).flatmap(
        lambda chosen: st.fixed_dictionaries({n: optional(strategies[n]) for n in chosen})
    )
