"""The last value of an expensive read, reused for a few seconds: however many callers ask
(dashboard viewers, metrics scrapers), each server process computes it at most once per period,
and concurrent callers share one computation."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Recent(Generic[T]):
    """The last value ``load`` returned, reused while younger than ``ttl`` seconds; concurrent
    callers share one load."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._value: tuple[float, T] | None = None
        self._lock = asyncio.Lock()

    def _fresh(self) -> T | None:
        if self._value is not None and self.clock() - self._value[0] < self.ttl:
            return self._value[1]
        return None

    async def get(self, load: Callable[[], Awaitable[T]]) -> T:
        """The cached value, or a new one from ``load``."""
        fresh = self._fresh()
        if fresh is not None:
            return fresh
        async with self._lock:
            fresh = self._fresh()
            if fresh is not None:
                return fresh
            value = await load()
            self._value = (self.clock(), value)
            return value
