"""Exceptions of the Sundial client: one class per error code of the API.

::

    SundialError                     anything this client raises on purpose
    ├── ApiError                     the server answered with an error body (status, code)
    │   ├── ValidationError          400 validation_error (``field`` names the bad field)
    │   ├── Unauthorized             401 unauthorized
    │   ├── Forbidden                403 forbidden
    │   ├── NotFound                 404 not_found
    │   ├── Conflict                 409 conflict
    │   ├── LeaseMismatch            409 lease_mismatch
    │   ├── InvalidState             409 invalid_state
    │   ├── QueuePaused              409 queue_paused
    │   ├── PayloadTooLarge          413 payload_too_large
    │   ├── RateLimited              429 rate_limited (``retry_after`` seconds)
    │   └── Unavailable              503 unavailable (``retry_after`` seconds)
    ├── CallTimeout                  client.call(): no reply in time (also a TimeoutError)
    └── CallFailed                   client.call(): the handler failed on its last attempt

Network failures that outlast the retries are :class:`httpx.TransportError` subclasses.
"""

from __future__ import annotations

from typing import Any

import httpx
import msgspec


class SundialError(Exception):
    """Base of the client's exceptions."""


class ApiError(SundialError):
    """The server answered with an error: ``status``, ``code``, ``message`` and ``details``."""

    status: int = 0
    code: str = ""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str,
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.message = message
        self.status = status
        self.code = code
        self.details: dict[str, Any] = details or {}
        self.retry_after = retry_after

    @property
    def field(self) -> str | None:
        """The offending field of a validation error (``details.field``), if named."""
        value = self.details.get("field")
        return value if isinstance(value, str) else None


class ValidationError(ApiError):
    """400 ``validation_error``: the request is malformed; :attr:`field` names the field."""


class Unauthorized(ApiError):
    """401 ``unauthorized``: missing or unknown token."""


class Forbidden(ApiError):
    """403 ``forbidden``: the token may not do this (other namespace, admin-only)."""


class NotFound(ApiError):
    """404 ``not_found``: no such namespace, queue, message or token."""


class Conflict(ApiError):
    """409 ``conflict``: e.g. the namespace exists, or a queue's kind cannot change."""


class LeaseMismatch(ApiError):
    """409 ``lease_mismatch``: the lease is not the message's current one, or it expired."""


class InvalidState(ApiError):
    """409 ``invalid_state``: the message's state does not allow the operation."""


class QueuePaused(ApiError):
    """409 ``queue_paused``: enqueue is paused on this queue (or, for a lease by id,
    dequeue)."""


class PayloadTooLarge(ApiError):
    """413 ``payload_too_large``: a payload or the request body is over the server's limit."""


class RateLimited(ApiError):
    """429 ``rate_limited``: over the token's request rate; retry after :attr:`retry_after`."""


class Unavailable(ApiError):
    """503 ``unavailable``: the server cannot reach its database; retry after a while."""


class CallTimeout(SundialError, TimeoutError):
    """``call()`` got no reply within its timeout (the request may still be processed)."""


class CallFailed(SundialError):
    """``call()``'s request failed on its last attempt; the message is the handler's error."""


ERRORS_BY_CODE: dict[str, type[ApiError]] = {
    "validation_error": ValidationError,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "lease_mismatch": LeaseMismatch,
    "invalid_state": InvalidState,
    "queue_paused": QueuePaused,
    "payload_too_large": PayloadTooLarge,
    "rate_limited": RateLimited,
    "unavailable": Unavailable,
}


class _ErrorDetail(msgspec.Struct):
    code: str
    message: str = ""
    details: dict[str, Any] = {}


class _ErrorBody(msgspec.Struct):
    error: _ErrorDetail


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: not sent by Sundial
        return None


def error_from_response(response: httpx.Response) -> ApiError:
    """The exception for a non-2xx answer (a generic :class:`ApiError` for an unknown code or a
    body that is not Sundial's, e.g. from a proxy)."""
    try:
        body = msgspec.json.decode(response.content, type=_ErrorBody).error
    except (msgspec.DecodeError, msgspec.ValidationError):
        body = _ErrorDetail(f"http_{response.status_code}", response.text[:200] or "no body")
    cls = ERRORS_BY_CODE.get(body.code, ApiError)
    return cls(
        body.message,
        status=response.status_code,
        code=body.code,
        details=body.details,
        retry_after=_retry_after(response),
    )
