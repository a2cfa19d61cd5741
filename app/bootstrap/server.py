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
from app.core.models import DEFAULT_POOL
from app.dashboard import DashboardPlugin
from app.observability import endpoint as metrics_endpoint
from app.observability.http import http_metrics
from app.observability.server import ServerMetrics, metered_pools
from app.scheduler import Scheduler
from app.sqs import door as sqs_door
from app.web.errors import EXCEPTION_HANDLERS
from app.web.ratelimit import RateLimiter
from app.web.runtime import Pool, Runtime
from app.web.throttle import AuthThrottlePlugin
from app.web.waiters import WaiterRegistry

log = logging.getLogger("sundial.api")


def _lifespan(
    settings: Settings, engine: AsyncEngine | None
) -> Callable[[Litestar], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        if engine is not None:
            catalogue = engine
        elif settings.database_url is not None:
            catalogue = database.create_engine(settings.database_url, settings.pool_size)
        else:
            raise RuntimeError(
                "no database configured: set SUNDIAL_DATABASE_URL"
                " (sundial serve starts the embedded database before the app)"
            )
        engines = {DEFAULT_POOL: catalogue} | {
            name: database.create_engine(url, settings.pool_size)
            for name, url in settings.pools.items()
        }
        pools = {name: _pool(name, db) for name, db in engines.items()}
        schedulers = (
            [Scheduler(db, settings, work=database.scheduling) for db in engines.values()]
            if settings.scheduler_enabled
            else []
        )
        service = database.build_service(engines, settings)
        metrics_token = settings.metrics_token
        metrics = app.state.metrics = ServerMetrics(
            metered_pools(pools, schedulers),
            metrics_token.get_secret_value() if metrics_token else None,
        )
        service.observer = metrics.observer
        app.state.runtime = Runtime(
            service=service,
            pools=pools,
            head_revision=database.head_revision(),
            rate_limiter=RateLimiter(settings.rate_limit) if settings.rate_limit else None,
        )
        sweepers = [
            asyncio.create_task(pool.waiters.run_sweeper(), name=f"sundial-sweeper-{pool.name}")
            for pool in pools.values()
        ]
        try:
            for pool in pools.values():
                await pool.listener.start()
            for scheduler in schedulers:
                await scheduler.start()
            await metrics.start()
            # Everything built so far lives as long as the process: keep it out of the cyclic
            # garbage collector's full collections, which would otherwise walk it all (about
            # 140,000 objects) in the middle of requests.
            gc.freeze()
            yield
        finally:
            await metrics.stop()
            for sweeper in sweepers:
                sweeper.cancel()
            for pool in pools.values():
                pool.waiters.close()
            for scheduler in schedulers:
                await scheduler.stop()
            for pool in pools.values():
                await pool.listener.stop()
            for db in engines.values():
                if db is not engine:
                    await db.dispose()

    return lifespan


def _pool(name: str, engine: AsyncEngine) -> Pool:
    """A pool's share of the process: its waiters and the LISTEN connection that wakes them."""
    waiters = WaiterRegistry()
    listener = database.notification_listener(engine, waiters)
    return Pool(
        name=name,
        engine=engine,
        waiters=waiters,
        listener=listener,
        schema_revision=lambda: database.read_schema_revision(engine),
    )


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
        route_handlers=[*ROUTERS, *metrics_endpoint.HANDLERS, sqs_door.ROUTER],
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
