"""What every dashboard handler uses: the core objects, pages with flash notices, redirects."""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import quote

from litestar import Litestar
from litestar.connection import ASGIConnection
from litestar.response import Redirect, Template

from app.bootstrap.database import build_insights
from app.core.insights import Overview, QueueInsights
from app.core.service import QueueService
from app.dashboard.security import PREFIX
from app.recent import Recent
from app.web.runtime import AnyRequest, runtime

FLASH_KEY = "flash"

OVERVIEW_TTL_SECONDS = 2.0
"""However many people keep the dashboard open, each server process computes the overview's
live data (its message counts read the whole hot table) at most once per this. Pages are not
cached: one loaded after a change shows it."""


async def start_insights(app: Litestar) -> None:
    """``on_startup``: build the insights over the runtime's engine and service (the runtime
    is made by the app's lifespan, which runs first)."""
    state = app.state.runtime
    engines = {name: pool.engine for name, pool in state.pools.items()}
    app.state.dashboard_insights = build_insights(engines, state.service)
    app.state.dashboard_overview = Recent[Overview](OVERVIEW_TTL_SECONDS)


def insights(connection: ASGIConnection[Any, Any, Any, Any]) -> QueueInsights:
    """The insights of the app serving ``connection``."""
    value: QueueInsights = connection.app.state.dashboard_insights
    return value


async def overview(connection: ASGIConnection[Any, Any, Any, Any]) -> Overview:
    """The overview, at most :data:`OVERVIEW_TTL_SECONDS` old."""
    recent: Recent[Overview] = connection.app.state.dashboard_overview
    return await recent.get(insights(connection).overview)


def service(connection: ASGIConnection[Any, Any, Any, Any]) -> QueueService:
    """The queue service of the app serving ``connection``."""
    return runtime(connection).service


def flash(request: AnyRequest, text: str, kind: Literal["ok", "error"] = "ok") -> None:
    """A notice shown once, on the next page."""
    notices: list[dict[str, str]] = list(request.session.get(FLASH_KEY, []))
    notices.append({"kind": kind, "text": text})
    request.session[FLASH_KEY] = notices


def page(request: AnyRequest, template: str, status_code: int = 200, **context: Any) -> Template:
    """A page, with the notices waiting in the session."""
    session = request.scope.get("session")
    notices = session.pop(FLASH_KEY, []) if isinstance(session, dict) else []
    return Template(
        template_name=template,
        context={"notices": notices, "prefix": PREFIX, **context},
        status_code=status_code,
    )


def see_other(path: str) -> Redirect:
    """303 to a dashboard path (after a form)."""
    return Redirect(path, status_code=303)


def queue_path(namespace: str, name: str, *rest: str) -> str:
    """The dashboard path of a queue (and a page under it)."""
    parts = [quote(namespace, safe=""), quote(name, safe=""), *(quote(p, safe="") for p in rest)]
    return f"{PREFIX}/queues/" + "/".join(parts)
