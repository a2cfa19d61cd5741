"""Throttling failed authentication per client address: after ``SUNDIAL_AUTH_FAILURE_LIMIT``
failures within ``SUNDIAL_AUTH_FAILURE_WINDOW_SECONDS``, every guessable secret from that
address is answered 429 ``rate_limited`` with ``Retry-After``, before it is looked at, until the
oldest failure leaves the window. Guessable secrets are the ones an attacker could find by
trying: the admin token (API bearer, dashboard sign-in) and the metrics token, i.e. every
bearer secret that does not have a namespace token's shape. Namespace tokens carry 256 random
bits, so trying them finds nothing; their failures (unknown, expired, revoked) are neither
counted nor refused, so a program that keeps a revoked token does not lock out every other
client behind its address. The API, the dashboard and ``/metrics`` share one count per
address.

The address is the ASGI scope's ``client``: the peer of the connection, or the client that a
trusted proxy names in ``X-Forwarded-For`` (uvicorn trusts the addresses in
``FORWARDED_ALLOW_IPS``, 127.0.0.1 unless set). IPv6 addresses count by their /64 network, which
one host usually holds whole.

Counting uses the ``limits`` library's moving window in memory, like the per-token rate limit
(:mod:`app.web.ratelimit`): per worker process, so with W workers an address may fail up to W
times the limit before every worker refuses it. Nothing is shared or stored.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import time
from typing import Any

from limits import RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter
from litestar.config.app import AppConfig
from litestar.connection import ASGIConnection
from litestar.plugins import InitPluginProtocol

from app.config import Settings
from app.web.ratelimit import RateLimitedError

log = logging.getLogger("sundial.api")

STATE_KEY = "auth_throttle"
"""Where the app's :class:`AuthThrottle` is kept in its state."""

UNKNOWN_ADDRESS = "unknown"
"""The key of connections whose ASGI scope has no client address."""


class AuthThrottle:
    """Counts failed authentications per client address against one limit."""

    def __init__(self, limit: int, window_seconds: int) -> None:
        """``limit`` failures per ``window_seconds`` (moving window)."""
        self.item = RateLimitItemPerSecond(limit, window_seconds, namespace="AUTH-FAILURES")
        self._limiter = MovingWindowRateLimiter(MemoryStorage())

    async def check(self, address: str) -> None:
        """Refuse ``address`` while it is over the limit (no failure is counted here).

        Raises:
            RateLimitedError: too many failures from ``address`` within the window.
        """
        if await self._limiter.test(self.item, address):
            return
        stats = await self._limiter.get_window_stats(self.item, address)
        retry_after = max(1, math.ceil(stats.reset_time - time.time()))
        raise RateLimitedError(
            f"too many failed authentications from this address; retry in {retry_after} s",
            retry_after,
        )

    async def count_failure(self, address: str) -> None:
        """Count one failed authentication of ``address``."""
        await self._limiter.hit(self.item, address)
        if not await self._limiter.test(self.item, address):
            log.warning(
                "%s failed authentication %d times within %d s: refused until the window frees up",
                address,
                self.item.amount,
                self.item.multiples,
            )


def client_address(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    """The key of the connection's client: its IPv4 address, or its IPv6 /64 network."""
    client = connection.scope.get("client")
    if not client:
        return UNKNOWN_ADDRESS
    host = str(client[0])
    if ":" not in host:
        return host
    try:
        address = ipaddress.IPv6Address(host.split("%", 1)[0])
    except ValueError:
        return host
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.IPv6Network((address, 64), strict=False))


def _throttle(connection: ASGIConnection[Any, Any, Any, Any]) -> AuthThrottle | None:
    value: AuthThrottle | None = connection.app.state.get(STATE_KEY)
    return value


async def check(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """Refuse the connection's client while it has failed authentication too often.

    Raises:
        RateLimitedError: over the limit (answered 429 ``rate_limited`` with ``Retry-After``).
    """
    throttle = _throttle(connection)
    if throttle is not None:
        await throttle.check(client_address(connection))


async def count_failure(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """Count a failed authentication of the connection's client."""
    throttle = _throttle(connection)
    if throttle is not None:
        await throttle.count_failure(client_address(connection))


class AuthThrottlePlugin(InitPluginProtocol):
    """Gives an app its throttle (none when ``auth_failure_limit`` is 0)."""

    def __init__(self, settings: Settings) -> None:
        self.limit = settings.auth_failure_limit
        self.window_seconds = settings.auth_failure_window_seconds

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        """Put a fresh :class:`AuthThrottle` in the app's state."""
        if self.limit > 0:
            app_config.state[STATE_KEY] = AuthThrottle(self.limit, self.window_seconds)
        return app_config
