"""Per-token rate limiting: each caller (a namespace token, or the admin) may make at most
``SUNDIAL_RATE_LIMIT`` requests (e.g. ``"500/second"``) per worker process; the next one gets
429 ``rate_limited`` with ``Retry-After``.

Counting uses the ``limits`` library's moving window in memory: O(1) per request, no lock
shared between requests. Limits are per worker process (not cluster-wide): with W workers a
token may make up to W times the limit; the limit protects the server from one runaway client,
it is not a billing meter.
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItem, parse
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter

from app.core.errors import SundialError
from app.core.models import Principal


class RateLimitedError(SundialError):
    """The caller made more requests than its rate limit allows."""

    code = "rate_limited"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message, retry_after_seconds=retry_after)
        self.retry_after = retry_after


class RateLimiter:
    """Counts requests per caller against one configured limit."""

    def __init__(self, limit: str) -> None:
        """``limit`` in the ``limits`` notation: ``"500/second"``, ``"10000 per minute"``."""
        self.item: RateLimitItem = parse(limit)
        self._limiter = MovingWindowRateLimiter(MemoryStorage())

    async def check(self, principal: Principal) -> None:
        """Count one request of ``principal``.

        Raises:
            RateLimitedError: the caller is over its limit.
        """
        key = "admin" if principal.is_admin else f"token:{principal.token_id}"
        if await self._limiter.hit(self.item, key):
            return
        stats = await self._limiter.get_window_stats(self.item, key)
        retry_after = max(1, math.ceil(stats.reset_time - time.time()))
        raise RateLimitedError(
            f"rate limit of {self.item.amount} requests per {self.item.GRANULARITY.name}"
            " exceeded; retry later",
            retry_after,
        )
