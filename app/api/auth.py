"""Bearer-token authentication and the two authorization rules, as ``before_request`` hooks of
the routers (not Litestar guards: Litestar copies the route handler for every guard call, a
cost paid on every request).

``Authorization: Bearer <token>``: the admin token (server configuration) or a namespace token.
Missing or unknown → 401 ``unauthorized``; a valid token that may not call the endpoint →
403 ``forbidden``. A token may be found in the process's memory, but every statement of the
request checks that the catalogue has not changed since it was read, so a revoked token stops
working at once, in every server process (:mod:`app.core.catalogue`).
"""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection

from app.core import catalogue
from app.core.models import Principal
from app.core.service.tokens import is_namespace_token
from app.web import throttle, token_limits
from app.web.credentials import bearer_token
from app.web.errors import ForbiddenError, UnauthorizedError
from app.web.runtime import runtime, service


async def authenticate(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    """Who is calling.

    Raises:
        UnauthorizedError: no token, or a token the server does not know.
    """
    secret = bearer_token(connection)
    # Only a secret that could be a guess at the admin token is throttled: a namespace token
    # (256 random bits) cannot be guessed, and refusing those would lock out every client
    # behind the address of one program that still holds a revoked token.
    guessable = not is_namespace_token(secret)
    if guessable:
        await throttle.check(connection)  # an address that failed too often: 429, token unread
    principal = await service(connection).authenticate(secret, connection.path_params.get("ns"))
    if principal is None:
        if guessable:
            await throttle.count_failure(connection)
        raise UnauthorizedError("unknown, expired or revoked token")
    limiter = runtime(connection).rate_limiter
    if limiter is not None:
        await limiter.check(principal)
    await token_limits.check(connection, service(connection), principal)
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
    # What this request looks up (its token, its queue) may come from the process's memory: a
    # view of the catalogue records it, so that the request's statements apply nothing once a
    # change has made it out of date; the service then calls ``authorize`` again, against the
    # database, and runs the operation again (app/core/catalogue.py).
    catalogue.open_view(renew=lambda: authorize(connection, again=True))
    await authorize(connection)


async def authorize(connection: ASGIConnection[Any, Any, Any, Any], *, again: bool = False) -> None:
    """The admin, or a token of the path's namespace ``{ns}``, may act on the request
    (``again``: once more within the request, which the rate limits have already counted,
    unless the token's own limit is new to the request).

    Raises:
        UnauthorizedError: no valid token.
        ForbiddenError: a token of another namespace.
    """
    namespace: str = connection.path_params["ns"]
    if again:
        found = await service(connection).authenticate(bearer_token(connection), namespace)
        if found is None:
            raise UnauthorizedError("unknown, expired or revoked token")
        principal = found
        # A limit the request's first lookup did not know of (set since): counted now.
        await token_limits.check(connection, service(connection), principal)
    else:
        principal = await authenticate(connection)
    if not principal.may_access(namespace):
        raise ForbiddenError(
            f"this token may not access namespace {namespace!r}", namespace=namespace
        )
