"""Fixtures of the model-based tests: one database and its :class:`Harness` per test module,
and the same harness emptied for a test that starts from nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.model.harness import Harness


@pytest.fixture(scope="module")
def harness(postgres: Any) -> Iterator[Harness]:
    """A database of its own for this test module (cloned from the migrated template), and the
    harness on it."""
    name = postgres.create()
    h = Harness(postgres.url(name))
    try:
        yield h
    finally:
        h.close()
        postgres.drop(name)


@pytest.fixture
def fresh(harness: Harness) -> Harness:
    """The module's harness, emptied: just the namespace and its queues."""
    harness.run(harness.reset())
    return harness
