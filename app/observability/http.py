"""The HTTP timing middleware: ``sundial_http_request_duration_seconds`` (histogram),
``sundial_http_requests_total``, ``sundial_http_requests_error_total`` and
``sundial_http_requests_in_progress``, labelled by method, route template and status code.

The same metrics, labels and help texts as Litestar's ``PrometheusMiddleware`` (which Sundial
used before, configured with ``app_name="sundial"``, ``prefix="sundial_http"``,
``group_path=True``), measured the same way, at a fraction of its cost per request: a plain ASGI
middleware that builds no ``Request``, no label dicts, and resolves the labelled children of the
four metrics once per (method, route, status) instead of six ``labels()`` calls per request.
It is a route middleware (it runs after routing), so the route template is in the scope.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

from litestar.enums import ScopeType
from prometheus_client import Counter, Gauge, Histogram

from app.web.runtime import ROUTE_LABEL

if TYPE_CHECKING:
    from litestar.types import ASGIApp, Message, Receive, Scope, Send

APP_NAME: Final = "sundial"
"""The constant ``app_name`` label."""

EXCLUDED_PATH: Final = "/metrics"
"""Scrapes are not timed."""

# Dequeue long polls last up to 20 s (MAX_WAIT_SECONDS); the top buckets are for them.
LATENCY_BUCKETS: list[str | float] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30,
]  # fmt: skip

# Label names in Litestar's order: its label values were a dict of these, in this order.
_LABELS: Final = ("method", "path", "status_code", "app_name")

REQUEST_DURATION = Histogram(
    "sundial_http_request_duration_seconds",
    "Request duration, in seconds",
    _LABELS,
    buckets=LATENCY_BUCKETS,
)
REQUESTS = Counter("sundial_http_requests_total", "Total requests", _LABELS)
REQUEST_ERRORS = Counter("sundial_http_requests_error_total", "Total errors in requests", _LABELS)
IN_PROGRESS = Gauge(
    "sundial_http_requests_in_progress",
    "Total requests currently in progress",
    _LABELS,
    multiprocess_mode="livesum",
)

# Labelled children, resolved once per label values (routes, methods and statuses are few).
_in_progress: dict[tuple[str, str], Gauge] = {}
_finished: dict[tuple[str, str, int], tuple[Counter, Histogram, Counter | None]] = {}


def _progress_child(method: str, path: str) -> Gauge:
    key = (method, path)
    child = _in_progress.get(key)
    if child is None:
        # Litestar labelled requests in progress with status_code 200 (not yet known).
        child = _in_progress[key] = IN_PROGRESS.labels(method, path, "200", APP_NAME)
    return child


def _finished_children(
    method: str, path: str, status: int
) -> tuple[Counter, Histogram, Counter | None]:
    key = (method, path, status)
    children = _finished.get(key)
    if children is None:
        values = (method, path, str(status), APP_NAME)
        errors = REQUEST_ERRORS.labels(*values) if status >= 500 else None
        children = _finished[key] = (
            REQUESTS.labels(*values),
            REQUEST_DURATION.labels(*values),
            errors,
        )
    return children


def http_metrics(app: ASGIApp) -> ASGIApp:
    """The middleware factory, for Litestar's ``middleware=[...]`` (a route middleware)."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        # A route middleware sees http and websocket scopes only; Litestar labelled websockets
        # with the scope type.
        method: str = scope["method"] if scope["type"] == ScopeType.HTTP else "websocket"
        if scope["path"] == EXCLUDED_PATH:
            await app(scope, receive, send)
            return
        path = scope["path_template"]
        start = time.perf_counter()
        status = 200
        duration = 0.0

        async def timed_send(message: Message) -> None:
            nonlocal status, duration
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                duration = time.perf_counter() - start
            await send(message)

        progress = _progress_child(method, path)
        progress.inc()
        try:
            await app(scope, receive, timed_send)
        finally:
            progress.dec()
            label = str(scope.get(ROUTE_LABEL, path))
            count, latency, errors = _finished_children(method, label, status)
            if errors is not None:
                errors.inc()
            count.inc()
            latency.observe(duration)

    return middleware


__all__ = ["LATENCY_BUCKETS", "http_metrics"]
