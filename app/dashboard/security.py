"""Signing in to the dashboard: an encrypted session cookie backed by a server-side session,
CSRF-checked forms, and security headers.

- The session cookie is Litestar's client-side cookie session (AES-GCM, ``HttpOnly``,
  ``SameSite=Strict``, path ``/dashboard``). It carries only a random session id; the session is
  live while the database has it (table ``dashboard_sessions``, through :class:`Sessions`), so
  signing out ends it in every server worker process and every server on the database, and a
  copy of the cookie stops working at once.
- Forms carry Litestar's CSRF token (double submit: a signed cookie and a hidden field that
  must match); a POST without it is refused with 403.
- Both secrets are derived from the admin token (HMAC-SHA256 with a fixed label each), which
  every worker already shares: no new setting, and changing the admin token signs everyone out.
- Every answer under ``/dashboard`` (pages, redirects, static files, error pages, the 404 of a
  path that matches nothing) carries the security headers (:func:`add_security_headers`).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, Protocol
from urllib.parse import urlsplit

from litestar import Response
from litestar.config.csrf import CSRFConfig
from litestar.connection import ASGIConnection
from litestar.middleware import DefineMiddleware
from litestar.middleware.csrf import CSRFMiddleware
from litestar.middleware.session.client_side import CookieBackendConfig
from litestar.response import Redirect
from litestar.types import ASGIApp, Message, Scope

PREFIX = "/dashboard"
LOGIN_PATH = f"{PREFIX}/login"
SESSION_COOKIE = "sundial_session"
CSRF_COOKIE = "sundial_csrf"
SESSION_IDLE_SECONDS = 8 * 3600
"""A session unused this long expires (each page view renews it)."""
SESSION_ID_KEY = "sid"
"""The key of the session id in the session cookie's data."""
SESSIONS_STATE_KEY = "dashboard_sessions"
"""Where the app keeps its :class:`Sessions` (made at startup)."""


class Sessions(Protocol):
    """The server-side sessions: the database holds every live one, so signing out (or an
    idle timeout) ends a session in every server process at once."""

    async def start(self) -> str:
        """A new session's id."""
        ...

    async def touch(self, session_id: str) -> bool:
        """Renew a live session; False when it has ended or expired."""
        ...

    async def end(self, session_id: str) -> None:
        """End a session (sign-out)."""
        ...


CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; "
    "base-uri 'none'; object-src 'none'"
)  # uPlot sizes its elements with inline styles; every script is a file under /static


def derive_secret(admin_token: str, label: str) -> bytes:
    """A 32-byte key for ``label``, derived from the admin token."""
    return hmac.new(
        admin_token.encode(), f"sundial dashboard {label}".encode(), hashlib.sha256
    ).digest()


def session_config(admin_token: str) -> CookieBackendConfig:
    """The session cookie: encrypted, ``HttpOnly``, ``SameSite=Strict``, dashboard paths only."""
    return CookieBackendConfig(
        secret=derive_secret(admin_token, "session"),
        key=SESSION_COOKIE,
        max_age=SESSION_IDLE_SECONDS,
        path=PREFIX,
        httponly=True,
        samesite="strict",
    )


def _session_middleware(app: ASGIApp, admin_token: str) -> ASGIApp:
    """Litestar's session middleware, built when the route is (Litestar deep-copies routers on
    registration, and the cookie backend's cipher cannot be copied)."""
    return session_config(admin_token).middleware(app)


def middleware(admin_token: str) -> list[DefineMiddleware]:
    """The session and CSRF middleware of the dashboard's pages (session first: the CSRF
    check runs inside it, so a refused form leaves the session as it was)."""
    csrf = CSRFConfig(
        secret=derive_secret(admin_token, "csrf").hex(),
        cookie_name=CSRF_COOKIE,
        cookie_path=PREFIX,
        cookie_httponly=True,
        cookie_samesite="strict",
    )
    return [
        DefineMiddleware(_session_middleware, admin_token=admin_token),
        DefineMiddleware(CSRFMiddleware, config=csrf),
    ]


def sessions(connection: ASGIConnection[Any, Any, Any, Any]) -> Sessions:
    """The server-side sessions of the app serving ``connection``."""
    value: Sessions = connection.app.state[SESSIONS_STATE_KEY]
    return value


def session_id(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """The session id the connection's cookie carries, if any."""
    session = connection.scope.get("session")
    value = session.get(SESSION_ID_KEY) if isinstance(session, dict) else None
    return value if isinstance(value, str) and value else None


async def signed_in(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    """Whether the connection carries a live admin session. A cookie whose session has ended
    (signed out, expired) is dropped: the answer deletes it."""
    current = session_id(connection)
    if current is None:
        return False
    if await sessions(connection).touch(current):
        return True
    connection.clear_session()
    return False


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a dashboard path only (never another site)."""
    if not target:
        return f"{PREFIX}/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith(f"{PREFIX}/"):
        return f"{PREFIX}/"
    if parts.path.startswith(LOGIN_PATH) or "\\" in target:
        return f"{PREFIX}/"
    return parts.path + (f"?{parts.query}" if parts.query else "")


async def require_page_login(connection: ASGIConnection[Any, Any, Any, Any]) -> Redirect | None:
    """``before_request`` of the pages: to the sign-in page unless signed in."""
    if await signed_in(connection):
        return None
    target = connection.url.path + (f"?{connection.url.query}" if connection.url.query else "")
    return Redirect(LOGIN_PATH, query_params={"next": target}, status_code=303)


async def require_api_login(connection: ASGIConnection[Any, Any, Any, Any]) -> Response[Any] | None:
    """``before_request`` of the live JSON endpoints: 401 unless signed in."""
    if await signed_in(connection):
        return None
    return Response(
        {"error": {"code": "unauthorized", "message": "sign in to the dashboard", "details": {}}},
        status_code=401,
    )


def is_dashboard_path(path: str) -> bool:
    """Whether ``path`` is the dashboard's (anything under ``/dashboard``)."""
    return path == PREFIX or path.startswith(f"{PREFIX}/")


SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)
_REPLACED = {name for name, _ in SECURITY_HEADERS}


async def add_security_headers(message: Message, scope: Scope) -> None:
    """``before_send`` hook of the app: every answer under ``/dashboard``, whatever made it (a
    page, a redirect, a static file, an error handler, the router's 404 or 405), gets the
    security headers: a strict CSP, no framing, no sniffing, no referrer to other sites, and
    ``Cache-Control: no-store`` unless it says how to cache (static files do)."""
    if message["type"] != "http.response.start" or not is_dashboard_path(scope["path"]):
        return
    headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() not in _REPLACED]
    if not any(k.lower() == b"cache-control" for k, _ in headers):
        headers.append((b"cache-control", b"no-store"))
    headers.extend(SECURITY_HEADERS)
    message["headers"] = headers
