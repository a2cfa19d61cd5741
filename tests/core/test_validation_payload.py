"""The payload rules of app/core/validation.py: the size limit in bytes as stored, escaped NULs,
numbers beyond PostgreSQL's ``numeric``, and nesting depth."""

from __future__ import annotations

import pytest

from app.core import validation as v
from app.core.errors import PayloadTooLargeError
from tests.core.helpers import LIMITS, refused


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
