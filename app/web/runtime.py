"""What the running server holds between requests: built once at startup by the composition
root (:mod:`app.bootstrap.server`) and reached by handlers (the API, the dashboard, the metrics
endpoint) through the connection's app state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.params import FromPath
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.service import QueueService
from app.web.ratelimit import RateLimiter
from app.web.waiters import WaiterRegistry


class Listener(Protocol):
    """The process's LISTEN connection, as the server sees it."""

    @property
    def connected(self) -> bool:
        """Whether notifications are arriving (else the waiters' fallback timer covers)."""
        ...


@dataclass(slots=True)
class Runtime:
    """The server process's shared objects."""

    engine: AsyncEngine
    service: QueueService
    waiters: WaiterRegistry
    listener: Listener
    schema_revision: Callable[[], Awaitable[str | None]]
    """The database's schema revision, read now (for readiness)."""
    head_revision: str | None
    rate_limiter: RateLimiter | None = None


def runtime(connection: ASGIConnection[Any, Any, Any, Any]) -> Runtime:
    """The runtime of the app serving ``connection``."""
    value: Runtime = connection.app.state.runtime
    return value


def service(connection: ASGIConnection[Any, Any, Any, Any]) -> QueueService:
    """The queue service of the app serving ``connection``."""
    return runtime(connection).service


AnyRequest = Request[Any, Any, Any]
"""The request type handlers take."""

PathStr: TypeAlias = FromPath[str]
"""A path parameter (``ns``, ``queue``, ``message_id``, ``token_id``)."""
