"""What the running server holds between requests: built once at startup (the lifespan in
:mod:`app.api.app`) and reached by handlers through the connection's app state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.params import FromPath
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.longpoll import WaiterRegistry
from app.api.ratelimit import RateLimiter
from app.core.service import QueueService
from app.store.notifications import NotificationListener


@dataclass(slots=True)
class Runtime:
    """The server process's shared objects."""

    engine: AsyncEngine
    service: QueueService
    waiters: WaiterRegistry
    listener: NotificationListener
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
