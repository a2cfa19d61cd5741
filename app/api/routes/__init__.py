"""The API's routes, one module per resource; :data:`ROUTERS` lists them all."""

from __future__ import annotations

from litestar.types import ControllerRouterHandler

from app.api.routes import health, messages, namespaces, queues, tokens
from app.observability import endpoint as metrics

ROUTERS: list[ControllerRouterHandler] = [
    namespaces.router,
    tokens.router,
    queues.router,
    messages.router,
    *health.HANDLERS,
    *metrics.HANDLERS,
]

__all__ = ["ROUTERS"]
