"""What every body of API v1 shares: the request and response bases, and a message payload as
the core takes it.

OpenAPI component names are these classes' names (Litestar derives them), so a class keeps its
name wherever it lives.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, Raw, UnsetType


class In(msgspec.Struct, forbid_unknown_fields=True):
    """Base of request bodies: an unknown field is an error."""


class Out(msgspec.Struct, gc=False):
    """Base of response bodies (never part of a reference cycle, so not GC-tracked)."""


def payload_bytes(raw: Raw | UnsetType) -> bytes | None:
    """A payload as the core takes it: the JSON text, ``None`` when absent."""
    return None if raw is UNSET else bytes(raw)
