"""The metadata rules of app/core/validation.py: pairs, keys and values up to their limits, and
the field each refusal names (the key, when one key is at fault)."""

from __future__ import annotations

from app.core import validation as v
from tests.core.helpers import refused


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
