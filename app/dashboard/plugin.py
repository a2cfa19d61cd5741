"""The dashboard as a Litestar plugin: ``Litestar(plugins=[DashboardPlugin(settings)])`` adds
its routes under ``/dashboard``, its templates and its static files to the app.

Only the dashboard's routes get the session and CSRF middleware, and none of them appear in the
OpenAPI schema; the REST API is untouched (it keeps its bearer tokens and has no CSRF check).
Every answer under ``/dashboard`` gets the security headers from an app-wide ``before_send``
hook, the one place that sees them all (the router's own 404 and 405, static files, error
handlers). Without an admin token there is nobody to sign in, and the dashboard is not mounted.
"""

from __future__ import annotations

from pathlib import Path

from litestar import Litestar, Router
from litestar.config.app import AppConfig
from litestar.datastructures import CacheControlHeader
from litestar.exceptions import HTTPException
from litestar.plugins import InitPluginProtocol
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.static_files import create_static_files_router
from litestar.template import TemplateConfig

from app.bootstrap import database
from app.config import Settings
from app.dashboard import auth, dead_letters, live, messages, pages, periodic
from app.dashboard.common import start_insights
from app.dashboard.errors import HTML_HANDLERS, html_under_dashboard
from app.dashboard.format import FILTERS
from app.dashboard.security import (
    PREFIX,
    SESSION_IDLE_SECONDS,
    SESSIONS_STATE_KEY,
    add_security_headers,
    middleware,
    require_api_login,
    require_page_login,
)
from app.web.errors import EXCEPTION_HANDLERS as JSON_HANDLERS

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"


def _register_filters(engine: JinjaTemplateEngine) -> None:
    engine.engine.filters.update(FILTERS)


async def start_sessions(app: Litestar) -> None:
    """``on_startup``: the server-side sessions, over the runtime's engine (made by the app's
    lifespan, which runs first)."""
    app.state[SESSIONS_STATE_KEY] = database.dashboard_sessions(
        app.state.runtime.engine, SESSION_IDLE_SECONDS
    )


def dashboard_router(admin_token: str) -> Router:
    """Every dashboard route: sign-in, the pages (signed in), the live JSON (signed in)."""
    pages_router = Router(
        "/",
        route_handlers=[
            *pages.HANDLERS,
            *messages.HANDLERS,
            *dead_letters.HANDLERS,
            *periodic.HANDLERS,
        ],
        before_request=require_page_login,
    )
    live_router = Router(
        "/api",
        route_handlers=live.HANDLERS,
        before_request=require_api_login,
        exception_handlers=JSON_HANDLERS,
    )
    return Router(
        PREFIX,
        route_handlers=[*auth.HANDLERS, pages_router, live_router],
        middleware=middleware(admin_token),
        exception_handlers=HTML_HANDLERS,
        include_in_schema=False,
    )


class DashboardPlugin(InitPluginProtocol):
    """Mounts the dashboard on an app."""

    def __init__(self, settings: Settings) -> None:
        self.admin_token = settings.admin_token.get_secret_value() if settings.admin_token else None

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        """Add the routes, the template engine and the startup hook."""
        if self.admin_token is None:
            return app_config
        app_config.route_handlers.extend(
            [
                dashboard_router(self.admin_token),
                create_static_files_router(
                    f"{PREFIX}/static",
                    directories=[STATIC],
                    name="dashboard-static",
                    include_in_schema=False,
                    cache_control=CacheControlHeader(max_age=3600),
                ),
            ]
        )
        app_config.template_config = TemplateConfig(
            directory=TEMPLATES,
            engine=JinjaTemplateEngine,
            engine_callback=_register_filters,
        )
        app_config.on_startup.extend([start_insights, start_sessions])
        app_config.before_send.append(add_security_headers)
        handlers = app_config.exception_handlers
        if (api_handler := handlers.get(HTTPException)) is not None:
            handlers[HTTPException] = html_under_dashboard(api_handler)
        return app_config
