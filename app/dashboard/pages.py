"""The overview, a queue's page with its pause switches, and the list of queues with dead
letters."""

from __future__ import annotations

from litestar import get, post
from litestar.response import Redirect, Template

from app.core.states import State
from app.dashboard.common import flash, insights, page, queue_path, see_other, service
from app.dashboard.format import LIVE_ORDER, STATE_ORDER
from app.dashboard.forms import FormError
from app.dashboard.topics import queue_topics
from app.web.runtime import AnyRequest, PathStr

SWITCHES = {"enqueue_paused": "Enqueue", "dequeue_paused": "Dequeue"}


@get("/")
async def overview(request: AnyRequest) -> Template:
    """Namespaces and queues with their depth, oldest pending age and the last hour's rates."""
    found = await insights(request).overview()
    return page(
        request,
        "overview.html",
        overview=found,
        states=STATE_ORDER,
        live_states=LIVE_ORDER,
        nav="overview",
    )


@get("/queues/{ns:str}/{queue:str}")
async def queue_page(request: AnyRequest, ns: PathStr, queue: PathStr) -> Template:
    """A queue: configuration, switches, counts, charts and exclusive values."""
    activity = await insights(request).queue_activity(ns, queue)
    return page(
        request,
        "queue.html",
        activity=activity,
        queue=activity.detail.queue,
        topics=await queue_topics(service(request), ns, queue),
        states=STATE_ORDER,
        live_states=LIVE_ORDER,
        switches=SWITCHES,
        nav="overview",
    )


@post("/queues/{ns:str}/{queue:str}/switches")
async def set_switch(request: AnyRequest, ns: PathStr, queue: PathStr) -> Redirect:
    """Pause or resume enqueue or dequeue."""
    form = await request.form()
    switch = str(form.get("switch") or "")
    value = str(form.get("paused") or "")
    if switch not in SWITCHES:
        raise FormError("switch", "must be enqueue_paused or dequeue_paused")
    if value not in ("true", "false"):
        raise FormError("paused", "must be true or false")
    paused = value == "true"
    await service(request).update_queue(ns, queue, {switch: paused})
    verb = "paused" if paused else "resumed"
    flash(request, f"{SWITCHES[switch]} {verb} on {ns}/{queue}.")
    return see_other(queue_path(ns, queue))


@get("/dead-letters")
async def dead_letter_index(request: AnyRequest) -> Template:
    """Queues holding errored or canceled messages."""
    found = await insights(request).overview()
    holding = [
        s for s in found.queues if s.counts.get(State.ERRORED, 0) or s.counts.get(State.CANCELED, 0)
    ]
    holding.sort(key=lambda s: -(s.counts.get(State.ERRORED, 0) + s.counts.get(State.CANCELED, 0)))
    return page(request, "dead_letter_index.html", queues=holding, nav="dead")


HANDLERS = [overview, queue_page, set_switch, dead_letter_index]
