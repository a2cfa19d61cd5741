"""Periodic (cron) jobs: every namespace's, or one namespace's or queue's, with their schedule,
next and last run and last error; each paused or resumed by a form (POST with the CSRF token)."""

from __future__ import annotations

from urllib.parse import urlencode

from litestar import get, post
from litestar.response import Redirect, Template

from app.core.errors import NotFoundError
from app.core.periodic import PeriodicJob
from app.dashboard.common import flash, page, see_other, service
from app.dashboard.forms import FormError
from app.dashboard.security import PREFIX
from app.web.runtime import AnyRequest, PathStr


@get("/periodic")
async def periodic_jobs(request: AnyRequest) -> Template:
    """The periodic jobs of every namespace (``?ns=`` one namespace, ``&queue=`` one queue)."""
    ns = request.query_params.get("ns") or None
    queue = request.query_params.get("queue") or None
    names = [ns] if ns else [n.name for n in await service(request).list_namespaces()]
    jobs: list[PeriodicJob] = []
    for name in names:
        try:
            jobs.extend(await service(request).list_periodic(name, queue))
        except NotFoundError:
            if ns:
                raise
    return page(request, "periodic.html", jobs=jobs, ns=ns, queue=queue, nav="periodic")


@post("/periodic/{ns:str}/{name:str}/paused")
async def set_paused(request: AnyRequest, ns: PathStr, name: PathStr) -> Redirect:
    """Pause or resume a job (resumed, it fires from its next tick after now)."""
    form = await request.form()
    value = str(form.get("paused") or "")
    if value not in ("true", "false"):
        raise FormError("paused", "must be true or false")
    paused = value == "true"
    await service(request).update_periodic(ns, name, {"paused": paused})
    flash(request, f"Periodic job {ns}/{name} {'paused' if paused else 'resumed'}.")
    back = {key: str(form.get(key)) for key in ("ns", "queue") if form.get(key)}
    return see_other(f"{PREFIX}/periodic" + (f"?{urlencode(back)}" if back else ""))


HANDLERS = [periodic_jobs, set_paused]
