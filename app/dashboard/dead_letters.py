"""Dead letters (errored and canceled messages) of a queue: requeue (optionally with a new TTL)
or delete them, one, a selection, all, or the oldest finished up to a limit, always through a
confirmation page.

The confirmation is a page of its own (``/confirm`` changes nothing); only its form, posted
to ``/apply``, acts. Both are POSTs carrying the CSRF token.
"""

from __future__ import annotations

from litestar import get, post
from litestar.datastructures import FormMultiDict
from litestar.response import Redirect, Template

from app.core.models import MessageFilter
from app.core.states import State
from app.dashboard.common import flash, insights, page, queue_path, see_other, service
from app.dashboard.forms import (
    DEAD_LETTER_STATE_NAMES,
    DeadLetterAction,
    dead_letter_action,
    parse_states,
)
from app.web.runtime import AnyRequest, PathStr

PAGE_SIZE = 50
BULK_LIMIT = 100_000
"""At most this many messages are requeued by one "requeue all"."""


def _form_dict(form: FormMultiDict) -> dict[str, list[str]]:
    return {key: [str(v) for v in form.getall(key)] for key in form}


@get("/queues/{ns:str}/{queue:str}/dead-letters")
async def dead_letters(request: AnyRequest, ns: PathStr, queue: PathStr) -> Template:
    """The queue's dead letters, newest first, with selection checkboxes."""
    found = await service(request).get_queue_or_404(ns, queue)
    states = parse_states(request.query_params.getall("state", [])) or (
        State.ERRORED,
        State.CANCELED,
    )
    states = tuple(s for s in states if s.value in DEAD_LETTER_STATE_NAMES) or (State.ERRORED,)
    cursor = request.query_params.get("cursor") or None
    result = await service(request).query_messages(
        ns, queue, MessageFilter(states=states, limit=PAGE_SIZE, cursor=cursor)
    )
    detail = await service(request).queue_detail(ns, queue)
    return page(
        request,
        "dead_letters.html",
        queue=found,
        counts=detail.stats.counts,
        result=result,
        shown_states=[s.value for s in states],
        nav="dead",
    )


@post("/queues/{ns:str}/{queue:str}/dead-letters/confirm")
async def confirm(request: AnyRequest, ns: PathStr, queue: PathStr) -> Template:
    """The confirmation step: says exactly what will happen; changes nothing."""
    found = await service(request).get_queue_or_404(ns, queue)
    action = dead_letter_action(_form_dict(await request.form()))
    detail = await service(request).queue_detail(ns, queue)
    affected = (
        sum(detail.stats.counts.get(State(s), 0) for s in action.states)
        if action.every
        else len(action.ids)
    )
    if action.limit is not None:
        affected = min(affected, action.limit)
    return page(request, "confirm.html", queue=found, action=action, affected=affected, nav="dead")


@post("/queues/{ns:str}/{queue:str}/dead-letters/apply")
async def apply(request: AnyRequest, ns: PathStr, queue: PathStr) -> Redirect:
    """Requeue or delete, as confirmed."""
    action = dead_letter_action(_form_dict(await request.form()))
    done = await _apply(request, ns, queue, action)
    verb = "Requeued" if action.action == "requeue" else "Deleted"
    noun = "message" if done == 1 else "messages"
    flash(request, f"{verb} {done} {noun} of {ns}/{queue}.")
    wanted = len(action.ids) if not action.every else None
    if wanted is not None and done < wanted:
        flash(
            request,
            f"{wanted - done} of the chosen messages were no longer dead letters"
            " (requeued, deleted or cleaned up meanwhile) and were left alone.",
            "error",
        )
    return see_other(queue_path(ns, queue, "dead-letters"))


async def _apply(request: AnyRequest, ns: str, queue: str, action: DeadLetterAction) -> int:
    core = service(request)
    if action.action == "requeue":
        if action.every:
            return await core.requeue_dead_letters(
                ns,
                queue,
                action.states,
                limit=action.limit or BULK_LIMIT,
                ttl_seconds=action.ttl_seconds,
            )
        return await core.requeue_dead_letters(
            ns,
            queue,
            DEAD_LETTER_STATE_NAMES,
            ids=action.ids,
            limit=len(action.ids),
            ttl_seconds=action.ttl_seconds,
        )
    if action.every and action.limit is not None:
        return await core.delete_dead_letters(ns, queue, action.states, limit=action.limit)
    if action.every:
        return await core.purge_queue(ns, queue, action.states)
    return await insights(request).delete_dead_letters(ns, queue, action.ids)


HANDLERS = [dead_letters, confirm, apply]
