"""Errors on dashboard pages: an HTML page that says what went wrong and where to go, with the
status the API would give (400 for a bad field, 404, 409 ...). Never a traceback."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request
from litestar.exceptions import HTTPException, PermissionDeniedException
from litestar.response import Template
from litestar.types import ExceptionHandler, ExceptionHandlersMap

from app.core.errors import SundialError, ValidationError
from app.dashboard.forms import FormError
from app.dashboard.security import PREFIX, is_dashboard_path
from app.web.errors import status_for

log = logging.getLogger("sundial.dashboard")

_TITLES = {
    400: "That did not work",
    403: "Refused",
    404: "Not found",
    405: "Not allowed",
    409: "Not possible right now",
    503: "Database unavailable",
}


def _page(status: int, message: str, field: str | None = None) -> Template:
    return Template(
        template_name="error.html",
        context={
            "status": status,
            "title": _TITLES.get(status, "Something went wrong"),
            "message": message,
            "field": field,
            "prefix": PREFIX,
            "notices": [],
        },
        status_code=status,
    )


def _sundial_error(_: Request[Any, Any, Any], exc: Exception) -> Template:
    assert isinstance(exc, SundialError)
    field = exc.field if isinstance(exc, ValidationError) else None
    return _page(status_for(exc.code), exc.message, field)


def _form_error(_: Request[Any, Any, Any], exc: Exception) -> Template:
    assert isinstance(exc, FormError)
    return _page(400, str(exc), exc.field)


def _http_exception(_: Request[Any, Any, Any], exc: Exception) -> Template:
    assert isinstance(exc, HTTPException)
    if isinstance(exc, PermissionDeniedException):
        return _page(
            403,
            "This form was not sent by a dashboard page you loaded (its security token is"
            " missing or stale). Go back, reload the page and try again.",
        )
    if exc.status_code >= 500:
        log.error("dashboard: %s", exc.detail)
        return _page(exc.status_code, "The server could not answer this request.")
    return _page(exc.status_code, str(exc.detail))


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Template:
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return _page(500, "An unexpected error happened; it has been logged.")


HTML_HANDLERS: ExceptionHandlersMap = {
    SundialError: _sundial_error,
    FormError: _form_error,
    HTTPException: _http_exception,
    Exception: _unexpected,
}


def html_under_dashboard(
    api_handler: ExceptionHandler[Exception],
) -> ExceptionHandler[Exception]:
    """The app's handler of Litestar's HTTP exceptions, for the errors no route of the dashboard
    sees (a path under ``/dashboard`` that matches nothing: 404; a method it does not take:
    405): the dashboard's error page there, ``api_handler``'s JSON everywhere else."""

    def handler(request: Request[Any, Any, Any], exc: Exception) -> Any:
        if is_dashboard_path(request.url.path):
            return _http_exception(request, exc)
        return api_handler(request, exc)

    return handler
