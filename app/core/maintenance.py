"""What the scheduler's maintenance changes: the messages one tick promoted, released and
expired, added up over ticks for the metrics."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TickResult:
    """What one scheduler tick changed."""

    promoted: int = 0
    released: int = 0
    expired: int = 0
    redriven: int = 0
    fired: int = 0
    """Messages enqueued by periodic jobs' ticks (docs/concepts.md, "Periodic jobs")."""

    @property
    def total(self) -> int:
        """Messages changed in all."""
        return self.promoted + self.released + self.expired + self.redriven

    def __add__(self, other: TickResult) -> TickResult:
        return TickResult(
            self.promoted + other.promoted,
            self.released + other.released,
            self.expired + other.expired,
            self.redriven + other.redriven,
            self.fired + other.fired,
        )
