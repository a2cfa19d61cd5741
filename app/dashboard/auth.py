"""Signing in with the admin token, and signing out."""

from __future__ import annotations

import logging

from litestar import get, post
from litestar.response import Redirect, Template

from app.api.runtime import AnyRequest
from app.dashboard.common import page, see_other, service
from app.dashboard.security import LOGIN_PATH, safe_next, signed_in

log = logging.getLogger("sundial.dashboard")


@get("/login")
async def login_page(request: AnyRequest) -> Template | Redirect:
    """The sign-in form (or straight on, when already signed in)."""
    target = safe_next(request.query_params.get("next"))
    if signed_in(request):
        return see_other(target)
    notice = "You are signed out." if request.query_params.get("signed_out") else None
    return page(request, "login.html", next=target, error=None, notice=notice)


@post("/login")
async def login(request: AnyRequest) -> Template | Redirect:
    """Check the admin token; on success start a session, else show the form again (401)."""
    form = await request.form()
    token = str(form.get("token") or "").strip()
    target = safe_next(str(form.get("next") or ""))
    principal = await service(request).authenticate(token) if token else None
    if principal is None or not principal.is_admin:
        log.warning(
            "dashboard sign-in refused from %s", request.client.host if request.client else "?"
        )
        message = "Enter the admin token." if not token else "That is not the admin token."
        return page(request, "login.html", status_code=401, next=target, error=message, notice=None)
    request.set_session({"admin": True})
    return see_other(target)


@post("/logout")
async def logout(request: AnyRequest) -> Redirect:
    """End the session."""
    request.clear_session()
    return see_other(f"{LOGIN_PATH}?signed_out=1")


HANDLERS = [login_page, login, logout]
