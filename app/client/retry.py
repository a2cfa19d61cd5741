"""When the client sends a request again, and how long it waits first (tenacity).

- A request that never reached the server (connection refused, connect timeout) or that the
  server refused for its rate (429) is retried whatever it is: it had no effect.
- Any other network failure, and ``503 unavailable``, leave the outcome unknown: such a
  request is retried only if it is safe to repeat (:attr:`app.client.calls.Call.safe`).

Waits grow exponentially with full jitter, and are never shorter than the server's ``Retry-After``.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from app.client.errors import RateLimited, Unavailable

_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def should_retry(error: BaseException, *, safe: bool) -> bool:
    """Whether a request that failed with ``error`` may be sent again."""
    if isinstance(error, (RateLimited, *_NOT_SENT)):
        return True
    return safe and isinstance(error, Unavailable | httpx.TransportError)


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: ``attempts`` in all (1 = never retry), within ``max_seconds``.

    The default gives up after 30 s whatever the number of attempts: long enough to ride
    through a database failover (seconds of 503s, docs/high-availability.md)."""

    attempts: int = 20
    max_seconds: float = 30.0
    initial_wait: float = 0.1
    max_wait: float = 5.0

    def _wait(self) -> wait_random_exponential:
        return wait_random_exponential(multiplier=self.initial_wait, max=self.max_wait)

    def _arguments(self, safe: bool) -> dict[str, object]:
        backoff = self._wait()

        def wait(state: RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome else None
            hinted = getattr(error, "retry_after", None) or 0.0
            return max(float(hinted), backoff(state))

        return {
            "stop": stop_after_attempt(self.attempts) | stop_after_delay(self.max_seconds),
            "wait": wait,
            "retry": retry_if_exception(lambda error: should_retry(error, safe=safe)),
            "reraise": True,
        }

    def sync(self, safe: bool) -> Retrying:
        """A tenacity controller for a blocking call."""
        return Retrying(**self._arguments(safe))  # type: ignore[arg-type]

    def asynchronous(self, safe: bool) -> AsyncRetrying:
        """A tenacity controller for a coroutine."""
        return AsyncRetrying(**self._arguments(safe))  # type: ignore[arg-type]


NO_RETRY = RetryPolicy(attempts=1)
