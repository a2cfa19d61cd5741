"""What every body of API v1 shares: the request, PATCH and response bases, and a message payload as
the core takes it.

OpenAPI component names are these classes' names (Litestar derives them), so a class keeps its
name wherever it lives.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, Raw, UnsetType


class In(msgspec.Struct, forbid_unknown_fields=True):
    """Base of request bodies: an unknown field is an error."""


class Patch(In):
    """Base of PATCH bodies: every field defaults to ``UNSET``, and only the fields given
    change."""

    def to_changes(self) -> dict[str, Any]:
        """The fields that were given."""
        return {
            name: value
            for name in self.__struct_fields__
            if (value := getattr(self, name)) is not UNSET
        }


class Out(msgspec.Struct, gc=False):
    """Base of response bodies (never part of a reference cycle, so not GC-tracked)."""


def payload_bytes(raw: Raw | UnsetType) -> bytes | None:
    """A payload as the core takes it: the JSON text, ``None`` when absent."""
    return None if raw is UNSET else bytes(raw)
