"""Errors on the wire: the one table from error codes to HTTP statuses, and the exception
handlers that give every non-2xx answer the body
``{"error": {"code": "...", "message": "...", "details": {...}}}``.

Core errors (:mod:`app.core.errors`) carry their code; the HTTP layer adds two of its own
(:class:`UnauthorizedError`, :class:`ForbiddenError`). Litestar's own exceptions (unknown route,
wrong method, body over the size limit) are translated by status. Anything else is a bug: it is
logged with its traceback and answered ``500 internal``.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException
from litestar.openapi.datastructures import ResponseSpec
from litestar.types import ExceptionHandlersMap
from sqlalchemy import exc as sa_exc

from app.core.errors import SundialError, UnavailableError
from app.web.ratelimit import RateLimitedError

log = logging.getLogger("sundial.api")

# The contract (docs/api.md, "Errors"): error code -> HTTP status.
STATUS_BY_CODE: dict[str, int] = {
    "validation_error": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "conflict": 409,
    "lease_mismatch": 409,
    "invalid_state": 409,
    "queue_paused": 409,
    "payload_too_large": 413,
    "rate_limited": 429,
    "internal": 500,
    "unavailable": 503,
}

# Litestar's own HTTP exceptions carry only a status: the code that status stands for.
_CODE_BY_STATUS: dict[int, str] = {
    400: "validation_error",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    429: "rate_limited",
    503: "unavailable",
}

_CLIENT_GONE = "client disconnected prematurely"  # Litestar's detail when a body is cut short

RETRY_AFTER_SECONDS = 1
"""What a 503 tells the client to wait before retrying (``Retry-After``)."""


class UnauthorizedError(SundialError):
    """No bearer token, or one the server does not know (or that was revoked)."""

    code = "unauthorized"


class ForbiddenError(SundialError):
    """A valid token that may not call this endpoint (admin-only, or another namespace)."""

    code = "forbidden"


class ErrorDetail(msgspec.Struct):
    """The inside of an error body."""

    code: str
    message: str
    details: dict[str, Any]


class ErrorBody(msgspec.Struct):
    """Every non-2xx answer: ``{"error": {"code", "message", "details"}}``."""

    error: ErrorDetail


_encode = msgspec.json.Encoder().encode


def status_for(code: str) -> int:
    """The HTTP status of an error code (500 for a code outside the table)."""
    return STATUS_BY_CODE.get(code, 500)


def error_response(
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
    *,
    status: int | None = None,
    headers: dict[str, str] | None = None,
) -> Response[bytes]:
    """An error answer in the API's shape.

    Args:
        code: the error code (a key of :data:`STATUS_BY_CODE`).
        message: human-readable text.
        details: machine-readable details (``field`` for validation errors).
        status: the HTTP status; by default the one :func:`status_for` gives ``code``.
        headers: extra response headers.
    """
    status = status or status_for(code)
    if status == 503:
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS), **(headers or {})}
    body = _encode(ErrorBody(ErrorDetail(code, message, details or {})))
    return Response(body, status_code=status, media_type=MediaType.JSON, headers=headers)


def _sundial_error(_: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    assert isinstance(exc, SundialError)
    headers = None
    if isinstance(exc, UnauthorizedError):
        headers = {"WWW-Authenticate": "Bearer"}
    elif isinstance(exc, RateLimitedError):
        headers = {"Retry-After": str(exc.retry_after)}
    return error_response(exc.code, exc.message, exc.details, headers=headers)


def _http_exception(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if status == 500 and exc.detail == _CLIENT_GONE:
        # The client went away while sending its body: nobody will read this answer.
        log.info("client disconnected during %s %s", request.method, request.url.path)
        return error_response("validation_error", "incomplete request body", {"field": "body"})
    code = _CODE_BY_STATUS.get(status)
    if code is None:
        if status >= 500:
            return _unexpected(request, exc)
        code = "validation_error"
    details: dict[str, Any] = {}
    headers: dict[str, str] | None = None
    message = exc.detail
    if status == 404:
        message = f"no such endpoint: {request.method} {request.url.path}"
    elif status == 405:
        allowed = {k.lower(): v for k, v in (exc.headers or {}).items()}.get("allow", "")
        message = f"{request.method} is not allowed on {request.url.path}"
        details = {"method": request.method, "allowed": [m.strip() for m in allowed.split(",")]}
        headers = {"Allow": allowed}
    elif status == 413:
        message = "the request body is larger than the server's limit"
    elif status == 400:
        details = {"field": "request"}
    return error_response(code, message, details, status=status, headers=headers)


def _pool_timeout(_: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    log.warning("database pool exhausted: %s", exc)
    error = UnavailableError("the server is overloaded (no database connection free); retry later")
    return error_response(error.code, error.message)


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response("internal", "internal server error", status=500)


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    SundialError: _sundial_error,
    HTTPException: _http_exception,
    sa_exc.TimeoutError: _pool_timeout,
    Exception: _unexpected,
}
"""Litestar exception handlers; the most specific class of an exception wins."""


# Any operation can meet a database outage or an overloaded pool.
ALWAYS_POSSIBLE = (503,)


def error_specs(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI response entries documenting the error body for ``statuses`` (and 503)."""
    return {
        status: ResponseSpec(
            data_container=ErrorBody,
            generate_examples=False,
            description=", ".join(
                code for code, code_status in STATUS_BY_CODE.items() if code_status == status
            ),
        )
        for status in sorted({*statuses, *ALWAYS_POSSIBLE})
    }
