"""How the dashboard writes numbers, durations, times and JSON for people (Jinja filters)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from app.core.states import State

STATE_ORDER: tuple[State, ...] = (
    State.INVISIBLE,
    State.PENDING,
    State.RUNNING,
    State.COMPLETED,
    State.ERRORED,
    State.CANCELED,
)
LIVE_ORDER: tuple[State, ...] = (State.INVISIBLE, State.PENDING, State.RUNNING)


def duration(seconds: float | None) -> str:
    """``42 ms``, ``3.4 s``, ``5 min 12 s``, ``42 min``, ``2 h 05 min``, ``3 d 4 h``; ``—`` for
    None."""
    if seconds is None:
        return "—"
    if seconds == 0:
        return "0 s"
    if seconds < 0:
        return "-" + duration(-seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 10:
        return f"{minutes} min {secs:02d} s"
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def number(value: int | float | None) -> str:
    """Thousands separated by a thin space: ``12 345``."""
    if value is None:
        return "—"
    return f"{value:,}".replace(",", "\u2009")


def timestamp(value: datetime | None) -> str:
    """UTC, to the millisecond: ``2026-05-01 12:00:03.123 UTC``."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def pretty_json(raw: bytes) -> str:
    """A JSON document indented for reading."""
    return msgspec.json.format(raw, indent=2).decode()


def epoch(value: datetime) -> float:
    """Seconds since the epoch (what the charts take)."""
    return value.timestamp()


FILTERS: dict[str, Any] = {
    "duration": duration,
    "number": number,
    "timestamp": timestamp,
    "pretty_json": pretty_json,
}
