"""Several Sundial servers behind one client, without a load balancer.

Every server of a deployment serves the whole API on the same database, so a client may send any
request to any of them. Given several URLs (a list, or ``$SUNDIAL_URL`` with commas), the client
sends to one server until a request to it fails in transit (refused, reset, timed out), then
moves on to the next: the retry that :mod:`app.client.retry` allows goes to another server.

The servers must differ only in scheme, host and port (the same path prefix, if any).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import httpx

from app.client.http import DEFAULT_URL


def server_urls(url: str | Sequence[str] | None) -> list[str]:
    """The servers' root URLs: ``url`` (one, several, or comma-separated), else ``$SUNDIAL_URL``,
    else the local default; each ending in ``/``."""
    chosen: str | Sequence[str] = url or os.environ.get("SUNDIAL_URL") or DEFAULT_URL
    items = chosen.split(",") if isinstance(chosen, str) else list(chosen)
    urls = [item.strip().rstrip("/") + "/" for item in items if item.strip()]
    if not urls:
        raise ValueError("no server URL given")
    prefixes = {httpx.URL(u).path for u in urls}
    if len(prefixes) > 1:
        raise ValueError(f"the servers' URLs must share one path, not {sorted(prefixes)}")
    return urls


class Servers:
    """The servers a client knows and the one it uses now (thread- and task-safe)."""

    def __init__(self, urls: Sequence[str]) -> None:
        self.origins = [httpx.URL(u) for u in urls]
        self._current = 0
        self._lock = threading.Lock()

    @property
    def current(self) -> httpx.URL:
        """The server requests go to now."""
        return self.origins[self._current]

    def failed(self, origin: httpx.URL) -> None:
        """A request to ``origin`` failed in transit: use the next server, unless another
        request has already moved on."""
        with self._lock:
            if self.origins[self._current] == origin:
                self._current = (self._current + 1) % len(self.origins)

    def route(self, request: httpx.Request) -> httpx.URL:
        """Point ``request`` at the current server; the server chosen."""
        origin = self.current
        request.url = request.url.copy_with(
            scheme=origin.scheme, host=origin.host, port=origin.port
        )
        request.headers["Host"] = origin.netloc.decode("ascii")
        return origin


class FailoverTransport(httpx.BaseTransport):
    """Sends each request to the current server of ``servers`` through ``inner``."""

    def __init__(self, servers: Servers, inner: httpx.BaseTransport | None = None) -> None:
        self.servers = servers
        self._inner = inner or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        origin = self.servers.route(request)
        try:
            return self._inner.handle_request(request)
        except httpx.TransportError:
            self.servers.failed(origin)
            raise

    def close(self) -> None:
        self._inner.close()


class AsyncFailoverTransport(httpx.AsyncBaseTransport):
    """:class:`FailoverTransport` for :class:`httpx.AsyncClient`."""

    def __init__(self, servers: Servers, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.servers = servers
        self._inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        origin = self.servers.route(request)
        try:
            return await self._inner.handle_async_request(request)
        except httpx.TransportError:
            self.servers.failed(origin)
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()
