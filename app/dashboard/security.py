"""Signing in to the dashboard: an encrypted session cookie, CSRF-checked forms, and headers.

- The session is Litestar's client-side cookie session (AES-GCM, ``HttpOnly``,
  ``SameSite=Strict``, path ``/dashboard``), so every server worker process accepts every
  session without shared state. It only says "signed in as the admin".
- Forms carry Litestar's CSRF token (double submit: a signed cookie and a hidden field that
  must match); a POST without it is refused with 403.
- Both secrets are derived from the admin token (HMAC-SHA256 with a fixed label each), which
  every worker already shares: no new setting, and changing the admin token signs everyone out.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any
from urllib.parse import urlsplit

from litestar import Response
from litestar.config.csrf import CSRFConfig
from litestar.connection import ASGIConnection
from litestar.middleware import DefineMiddleware
from litestar.middleware.csrf import CSRFMiddleware
from litestar.middleware.session.client_side import CookieBackendConfig
from litestar.response import Redirect
from litestar.types import ASGIApp

PREFIX = "/dashboard"
LOGIN_PATH = f"{PREFIX}/login"
SESSION_COOKIE = "sundial_session"
CSRF_COOKIE = "sundial_csrf"
SESSION_IDLE_SECONDS = 8 * 3600
"""A session unused this long expires (each page view renews it)."""

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


def signed_in(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    """Whether the connection carries a live admin session."""
    session = connection.scope.get("session")
    return isinstance(session, dict) and session.get("admin") is True


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
    if signed_in(connection):
        return None
    target = connection.url.path + (f"?{connection.url.query}" if connection.url.query else "")
    return Redirect(LOGIN_PATH, query_params={"next": target}, status_code=303)


async def require_api_login(connection: ASGIConnection[Any, Any, Any, Any]) -> Response[Any] | None:
    """``before_request`` of the live JSON endpoints: 401 unless signed in."""
    if signed_in(connection):
        return None
    return Response(
        {"error": {"code": "unauthorized", "message": "sign in to the dashboard", "details": {}}},
        status_code=401,
    )


def security_headers(response: Response[Any]) -> Response[Any]:
    """``after_request`` of every dashboard response: no caching, no framing, strict CSP."""
    response.headers["Cache-Control"] = "no-store"
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    return response
