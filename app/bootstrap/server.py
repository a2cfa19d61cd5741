"""The HTTP server, assembled: :func:`create_app` builds the Litestar application from
:class:`Settings` and the edges (the API's routes, the dashboard, the metrics endpoint and its
middleware, the scheduler).

At startup (the lifespan) it creates the database engine (unless one is given), the queue
service, the notification listener that wakes long-polling consumers, and, when enabled, the
background scheduler; at shutdown it stops them in reverse order.

Run it with ``uvicorn --factory app.bootstrap.server:create_app_from_env`` (``sundial serve``
does).
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.express import ExpressLane
from app.api.openapi import config as openapi_config
from app.api.routes import ROUTERS
from app.bootstrap import database
from app.config import Settings, get_settings
from app.dashboard import DashboardPlugin
from app.observability import endpoint as metrics_endpoint
from app.observability.http import http_metrics
from app.observability.server import ServerMetrics
from app.scheduler import Scheduler
from app.web.errors import EXCEPTION_HANDLERS
from app.web.ratelimit import RateLimiter
from app.web.runtime import Runtime
from app.web.throttle import AuthThrottlePlugin
from app.web.waiters import WaiterRegistry

log = logging.getLogger("sundial.api")


def _lifespan(
    settings: Settings, engine: AsyncEngine | None
) -> Callable[[Litestar], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        own_engine = engine is None
        if engine is not None:
            db = engine
        elif settings.database_url is not None:
            db = database.create_engine(settings.database_url, settings.pool_size)
        else:
            raise RuntimeError(
                "no database configured: set SUNDIAL_DATABASE_URL"
                " (sundial serve starts the embedded database before the app)"
            )
        waiters = WaiterRegistry()
        listener = database.notification_listener(db, waiters)
        scheduler = (
            Scheduler(db, settings, work=database.scheduling)
            if settings.scheduler_enabled
            else None
        )
        service = database.build_service(db, settings)
        metrics_token = settings.metrics_token
        metrics = app.state.metrics = ServerMetrics(
            db, waiters, scheduler, metrics_token.get_secret_value() if metrics_token else None
        )
        service.observer = metrics.observer
        app.state.runtime = Runtime(
            engine=db,
            service=service,
            waiters=waiters,
            listener=listener,
            schema_revision=lambda: database.read_schema_revision(db),
            head_revision=database.head_revision(),
            rate_limiter=RateLimiter(settings.rate_limit) if settings.rate_limit else None,
        )
        sweeper = asyncio.create_task(waiters.run_sweeper(), name="sundial-waiter-sweeper")
        try:
            await listener.start()
            if scheduler is not None:
                await scheduler.start()
            await metrics.start()
            # Everything built so far lives as long as the process: keep it out of the cyclic
            # garbage collector's full collections, which would otherwise walk it all (about
            # 140,000 objects) in the middle of requests.
            gc.freeze()
            yield
        finally:
            await metrics.stop()
            sweeper.cancel()
            waiters.close()
            if scheduler is not None:
                await scheduler.stop()
            await listener.stop()
            if own_engine:
                await db.dispose()

    return lifespan


def create_app(settings: Settings, *, engine: AsyncEngine | None = None) -> Litestar:
    """The Sundial HTTP application.

    Args:
        settings: server configuration (database URL, admin token, limits, scheduler).
        engine: an engine to use instead of creating one from ``settings.database_url``; the
            caller keeps ownership (it is not disposed at shutdown).

    Raises:
        RuntimeError: at startup, when neither ``engine`` nor ``settings.database_url`` is set.
    """
    app = Litestar(
        route_handlers=[*ROUTERS, *metrics_endpoint.HANDLERS],
        lifespan=[_lifespan(settings, engine)],
        exception_handlers=EXCEPTION_HANDLERS,
        middleware=[http_metrics],
        request_max_body_size=settings.max_body_bytes,
        openapi_config=openapi_config(),
        logging_config=None,
        plugins=[DashboardPlugin(settings), AuthThrottlePlugin(settings)],
    )
    if settings.express_lane:
        app.asgi_handler = ExpressLane(
            app.asgi_handler, max_body_bytes=settings.max_body_bytes, metrics=http_metrics
        )
    return app


def create_app_from_env() -> Litestar:
    """The application configured from the environment (:func:`app.config.get_settings`), for
    ``uvicorn --factory``. Configures logging at ``SUNDIAL_LOG_LEVEL`` unless already set up.
    """
    settings = get_settings()
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # /readyz reads the schema revision through Alembic, which logs two INFO lines per call.
    logging.getLogger("alembic.runtime.migration").setLevel(logging.WARNING)
    return create_app(settings)
