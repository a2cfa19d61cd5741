"""Bearer-token authentication and the two authorization rules, as ``before_request`` hooks of
the routers (not Litestar guards: Litestar copies the route handler for every guard call, a
cost paid on every request).

``Authorization: Bearer <token>``: the admin token (server configuration) or a namespace token.
Missing or unknown → 401 ``unauthorized``; a valid token that may not call the endpoint →
403 ``forbidden``. Tokens are checked against the database on every request, so a revoked token
stops working at once, in every server process.
"""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection

from app.api.errors import ForbiddenError, UnauthorizedError
from app.api.runtime import runtime, service
from app.core.models import Principal

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


async def authenticate(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    """Who is calling.

    Raises:
        UnauthorizedError: no token, or a token the server does not know.
    """
    principal = await service(connection).authenticate(bearer_token(connection))
    if principal is None:
        raise UnauthorizedError("unknown, expired or revoked token")
    limiter = runtime(connection).rate_limiter
    if limiter is not None:
        await limiter.check(principal)
    return principal


async def require_admin(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """Hook of the admin plane: only the admin token.

    Raises:
        UnauthorizedError: no valid token.
        ForbiddenError: a namespace token.
    """
    if not (await authenticate(connection)).is_admin:
        raise ForbiddenError("this endpoint needs the admin token")


async def require_namespace(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """Hook of the data plane: the admin, or a token of the path's namespace ``{ns}``.

    Raises:
        UnauthorizedError: no valid token.
        ForbiddenError: a token of another namespace.
    """
    namespace: str = connection.path_params["ns"]
    if not (await authenticate(connection)).may_access(namespace):
        raise ForbiddenError(
            f"this token may not access namespace {namespace!r}", namespace=namespace
        )
