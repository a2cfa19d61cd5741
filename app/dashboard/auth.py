"""Signing in with the admin token, and signing out.

A refused sign-in counts against the client's address like a failed API authentication
(:mod:`app.web.throttle`): past the limit, the sign-in form answers 429 without checking the
token.
"""

from __future__ import annotations

import logging

from litestar import get, post
from litestar.response import Redirect, Template

from app.dashboard.common import page, see_other, service
from app.dashboard.security import (
    LOGIN_PATH,
    SESSION_ID_KEY,
    safe_next,
    session_id,
    sessions,
    signed_in,
)
from app.web import throttle
from app.web.ratelimit import RateLimitedError
from app.web.runtime import AnyRequest

log = logging.getLogger("sundial.dashboard")


@get("/login")
async def login_page(request: AnyRequest) -> Template | Redirect:
    """The sign-in form (or straight on, when already signed in)."""
    target = safe_next(request.query_params.get("next"))
    if await signed_in(request):
        return see_other(target)
    notice = "You are signed out." if request.query_params.get("signed_out") else None
    return page(request, "login.html", next=target, error=None, notice=notice)


@post("/login")
async def login(request: AnyRequest) -> Template | Redirect:
    """Check the admin token; on success start a session, else show the form again (401; 429
    with ``Retry-After`` while the address has failed too often)."""
    form = await request.form()
    token = str(form.get("token") or "").strip()
    target = safe_next(str(form.get("next") or ""))
    try:
        await throttle.check(request)
    except RateLimitedError as error:
        refusal = page(
            request, "login.html", status_code=429, next=target, error=error.message, notice=None
        )
        refusal.headers["Retry-After"] = str(error.retry_after)
        return refusal
    principal = await service(request).authenticate(token) if token else None
    if principal is None or not principal.is_admin:
        address = request.client.host if request.client else "?"
        log.warning("dashboard sign-in refused from %s", address)
        if token:
            await throttle.count_failure(request)
        message = "Enter the admin token." if not token else "That is not the admin token."
        return page(request, "login.html", status_code=401, next=target, error=message, notice=None)
    if (previous := session_id(request)) is not None:
        await sessions(request).end(previous)  # signing in again: one live session, not two
    request.set_session({SESSION_ID_KEY: await sessions(request).start()})
    return see_other(target)


@post("/logout")
async def logout(request: AnyRequest) -> Redirect:
    """End the session, on the server (so that no copy of the cookie works any more) and in
    this browser."""
    current = session_id(request)
    if current is not None:
        await sessions(request).end(current)
    request.clear_session()
    return see_other(f"{LOGIN_PATH}?signed_out=1")


HANDLERS = [login_page, login, logout]
