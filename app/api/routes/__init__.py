"""The API's routes, one module per resource; :data:`ROUTERS` lists them all (the metrics
endpoint, ``/metrics``, is the observability edge's, mounted beside them by
:mod:`app.bootstrap.server`)."""

from __future__ import annotations

from litestar.types import ControllerRouterHandler

from app.api.routes import (
    consuming,
    health,
    messages,
    namespaces,
    periodic,
    queues,
    tokens,
    topics,
)

ROUTERS: list[ControllerRouterHandler] = [
    namespaces.router,
    tokens.router,
    queues.router,
    messages.router,
    consuming.router,
    topics.router,
    periodic.router,
    *health.HANDLERS,
]

__all__ = ["ROUTERS"]
