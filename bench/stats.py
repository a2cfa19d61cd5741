"""The two statistics every figure of the bench is made of: a percentile and a median.

Kept apart from the harness so that the load generator process imports nothing else of it.
"""

from __future__ import annotations

from collections.abc import Iterable


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def median(values: Iterable[float | None]) -> float | None:
    """The median of ``values``, Nones left out; None when nothing is left."""
    clean = sorted(v for v in values if v is not None)
    if not clean:
        return None
    mid = len(clean) // 2
    return clean[mid] if len(clean) % 2 else (clean[mid - 1] + clean[mid]) / 2
