"""app/core/jsonb.py reads JSON texts right: numbers in strings (ids, UUIDs, prose, escaped
quotes and backslashes) are left alone, numbers outside them are all found, and nesting is
measured outside strings. Documents are drawn by Hypothesis and written out here, so each
number's literal and the nesting are known; what ``jsonb`` makes of one number is checked
against PostgreSQL in tests/store/test_jsonb_model.py."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core import jsonb


@dataclass(frozen=True)
class Doc:
    """A JSON text with what it holds: its number literals and its nesting depth."""

    text: str
    numbers: tuple[str, ...]
    depth: int


TRICKY_TEXT = [
    "550e8400-e29b-41d4-a716-446655440000",
    "1e999999",
    "0e+3 and 2E-7",
    'quote " 1e131072 " quote',
    "back\\slash\\",
    '\\"[[[[',
    "]]]]}}",
    "[{",
    "é 1e5 ✓",
    "",
]
LITERALS = [
    "0",
    "-0",
    "12",
    "-3.25",
    "1e3",
    "1E+3",
    "2.5e-3",
    "-0.0e-99",
    "1e300",
    "5e-324",
    "0e999999",
    "1e131072",
    "1e-16384",
    "7" * 20,
]


def _leaf() -> st.SearchStrategy[Doc]:
    numbers = st.sampled_from(LITERALS).map(lambda n: Doc(n, (n,), 0))
    texts = st.one_of(st.sampled_from(TRICKY_TEXT), st.text(max_size=12)).flatmap(
        lambda s: st.sampled_from([json.dumps(s), json.dumps(s, ensure_ascii=False)])
    )
    literals = st.sampled_from(["true", "false", "null"])
    return st.one_of(
        numbers, texts.map(lambda t: Doc(t, (), 0)), literals.map(lambda t: Doc(t, (), 0))
    )


def _array(items: list[Doc]) -> Doc:
    text = "[" + ", ".join(i.text for i in items) + "]"
    return Doc(
        text, sum((i.numbers for i in items), ()), 1 + max((i.depth for i in items), default=0)
    )


def _object(pairs: list[tuple[str, Doc]]) -> Doc:
    text = "{" + ",".join(f"{json.dumps(k)}:{v.text}" for k, v in pairs) + "}"
    return Doc(
        text,
        sum((v.numbers for _, v in pairs), ()),
        1 + max((v.depth for _, v in pairs), default=0),
    )


documents = st.recursive(
    _leaf(),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(_array),
        st.lists(st.tuples(st.sampled_from(TRICKY_TEXT), inner), max_size=4).map(_object),
    ),
    max_leaves=12,
)


def expected_growth(numbers: tuple[str, ...]) -> int | None:
    """Growth of the literals with an exponent, as the one-number model gives it; None when
    one of all the literals is beyond numeric."""
    growth = 0
    for literal in numbers:
        stored = _one(literal)
        if stored is None:
            return None
        if "e" in literal.lower():
            growth += stored - len(literal)
    return growth


def _one(literal: str) -> int | None:
    try:
        return len(literal) + jsonb.number_growth(literal.encode())
    except jsonb.UnstorableNumberError:
        return None


def measured_growth(text: bytes) -> int | None:
    try:
        return jsonb.number_growth(text)
    except jsonb.UnstorableNumberError:
        return None


@settings(max_examples=500, derandomize=True, deadline=None)
@given(doc=documents)
def test_numbers_are_found_outside_strings_only(doc: Doc) -> None:
    json.loads(doc.text)  # a well-formed document
    assert measured_growth(doc.text.encode()) == expected_growth(doc.numbers), doc.text


@settings(max_examples=300, derandomize=True, deadline=None)
@given(doc=documents, limit=st.integers(0, 6))
def test_depth_is_measured_outside_strings(doc: Doc, limit: int) -> None:
    assert jsonb.deeper_than(doc.text.encode(), limit) == (doc.depth > limit), doc.text


def test_a_long_number_without_exponent_takes_the_slow_path() -> None:
    ok = "1" * (jsonb.NUMERIC_MAX_WHOLE_DIGITS)
    text = f'["{"9" * 20000}", {ok}, 1e3, "1e999999"]'.encode()
    assert jsonb.number_growth(text) == 4 - 3
    too_long = f'["x", 0.{"1" * (jsonb.NUMERIC_MAX_SCALE + 1)}]'.encode()
    with pytest.raises(jsonb.UnstorableNumberError):
        jsonb.number_growth(too_long)
    assert jsonb.number_growth(f'["{"1" * 20000}"]'.encode()) == 0  # only in a string


def test_brackets_in_strings_cannot_mask_nesting() -> None:
    # Each level opens an array and holds a string closing one; the strings after it open one
    # again: counted with the strings, the brackets would pair up one level deep.
    depth = 20
    text = '["]", ' * depth + "0" + ', "["]' * depth
    assert json.loads(text)
    assert jsonb.deeper_than(text.encode(), depth - 1)
    assert not jsonb.deeper_than(text.encode(), depth)
