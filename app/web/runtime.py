"""What the running server holds between requests: built once at startup by the composition
root (:mod:`app.bootstrap.server`) and reached by handlers (the API, the dashboard, the metrics
endpoint) through the connection's app state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.params import FromPath
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import DEFAULT_POOL, Queue
from app.core.service import QueueService
from app.web.ratelimit import RateLimiter
from app.web.waiters import WaiterRegistry

ROUTE_LABEL: str = "sundial.route_label"
"""A scope key a handler may set to label its request in the HTTP metrics more precisely than
its route template (the SQS door: ``/sqs:<Action>``); its values must be few."""


class Listener(Protocol):
    """The process's LISTEN connection, as the server sees it."""

    @property
    def connected(self) -> bool:
        """Whether notifications are arriving (else the waiters' fallback timer covers)."""
        ...

    async def start(self) -> None:
        """Start listening (in the background)."""
        ...

    async def stop(self) -> None:
        """Stop listening."""
        ...


@dataclass(slots=True)
class Pool:
    """One pool (database) as the server process holds it (docs/scaling.md)."""

    name: str
    engine: AsyncEngine
    waiters: WaiterRegistry
    """The long polls parked on the pool's queues, woken by its listener."""
    listener: Listener
    schema_revision: Callable[[], Awaitable[str | None]]
    """The pool's schema revision, read now (for readiness)."""


@dataclass(slots=True)
class Runtime:
    """The server process's shared objects."""

    service: QueueService
    pools: Mapping[str, Pool]
    """Every pool by name; ``default`` is the catalogue's database."""
    head_revision: str | None
    rate_limiter: RateLimiter | None = None
    catalogue: Pool = field(init=False)
    """The pool ``default``: the catalogue's database."""

    def __post_init__(self) -> None:
        self.catalogue = self.pools[DEFAULT_POOL]

    @property
    def engine(self) -> AsyncEngine:
        """The catalogue's engine."""
        return self.catalogue.engine

    @property
    def waiters(self) -> WaiterRegistry:
        """The catalogue pool's waiters (the only ones of a single-database install)."""
        return self.catalogue.waiters

    @property
    def listener(self) -> Listener:
        """The catalogue pool's LISTEN connection."""
        return self.catalogue.listener

    def waiters_of(self, queue: Queue) -> WaiterRegistry:
        """The waiters of the pool ``queue`` was read from."""
        return self.pools[queue.pool].waiters


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
