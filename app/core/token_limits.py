"""Per-token rate limits: what a limit is, and its validation (docs/security.md, "Per-token rate
limits").

A namespace token may carry a limit for each kind of request, in requests per second: ``read_rate``
and ``write_rate`` (None: no limit of its own). Which requests are reads and which writes is the
edge's classification (:mod:`app.web.token_limits`); the count is shared by every server process
(:mod:`app.store.sql.token_limits`). Rates may be fractional: ``0.5`` is one request every two
seconds. At most one second's worth of requests (and always one) may come at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final, Literal

from app.core.errors import ValidationError

Kind = Literal["read", "write"]
"""The kinds of request a token's limits tell apart."""

FIELDS: Final = ("read_rate", "write_rate")
"""The token fields that hold the limits, one per kind."""

MAX_RATE: Final = 1_000_000.0
"""The highest limit a token may carry, in requests per second."""


def rate(field: str, value: object) -> float | None:
    """A limit: None (no limit) or a number of requests per second in ``(0, MAX_RATE]``.

    Raises:
        ValidationError: anything else, naming ``field``.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field, "must be a number of requests per second, or null")
    number = float(value)
    if not (math.isfinite(number) and 0 < number <= MAX_RATE):
        raise ValidationError(field, f"must be above 0 and at most {MAX_RATE:g}, or null")
    return number


def changes(values: Mapping[str, object]) -> dict[str, float | None]:
    """The limits to set (``read_rate``, ``write_rate``; a field left out stays as it is).

    Raises:
        ValidationError: an unknown field, a bad value, or no field at all.
    """
    for field in values:
        if field not in FIELDS:
            raise ValidationError(field, "is not a token limit (read_rate, write_rate)")
    if not values:
        raise ValidationError("read_rate", "give read_rate and/or write_rate")
    return {field: rate(field, value) for field, value in values.items()}
