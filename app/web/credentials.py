"""The credentials a request carries: the token of its ``Authorization: Bearer`` header (the API's
namespace and admin tokens, the metrics token).
"""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection

from app.web.errors import UnauthorizedError

SCHEME = "bearer"


def bearer_token(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    """The token of the ``Authorization: Bearer`` header.

    Raises:
        UnauthorizedError: no such header, or another scheme.
    """
    header = next(
        (v.decode("latin-1") for k, v in connection.scope["headers"] if k == b"authorization"),
        None,
    )  # the raw ASGI headers (lower-case names): cheaper than building Litestar's Headers
    if not header:
        raise UnauthorizedError("missing Authorization: Bearer <token> header")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != SCHEME or not token:
        raise UnauthorizedError("the Authorization header must be 'Bearer <token>'")
    return token
