"""The data plane's hot calls — enqueue, dequeue, ack, and a message's complete, fail and
extend — from the bytes of the request body to the answer, whichever way the request came in:
through Litestar's routes (:mod:`app.api.routes.messages`) or the express lane
(:mod:`app.api.express`). The caller has authorized the request and read its body; each call
decodes the body strictly (:mod:`app.api.body`) and runs the service.
"""

from __future__ import annotations

from litestar.types import Receive

from app.api.body import decode
from app.api.schemas.consuming import Dequeue, DequeueOut
from app.api.schemas.leases import Ack, AckOut, Complete, Extend, Fail
from app.api.schemas.messages import MessageOut
from app.api.schemas.producing import Enqueue, EnqueueOut
from app.web import longpoll
from app.web.runtime import Runtime


async def enqueue(rt: Runtime, ns: str, queue: str, body: bytes) -> EnqueueOut:
    """``POST …/messages``."""
    request = decode(body, Enqueue)
    replace = request.on_conflict == "replace"
    outcomes = await rt.service.enqueue(
        ns,
        queue,
        request.to_models(),
        on_conflict=request.on_conflict,
        create_queue=request.create_queue,
    )
    return EnqueueOut.of(outcomes, replace=replace)


async def dequeue(rt: Runtime, ns: str, queue: str, body: bytes, receive: Receive) -> DequeueOut:
    """``POST …/dequeue`` (``receive``: to notice a long-polling client that goes away)."""
    request = decode(body, Dequeue)
    leased = await longpoll.dequeue(rt.service, rt.waiters_of, ns, queue, request, receive)
    return DequeueOut.of(leased)


async def ack(rt: Runtime, ns: str, queue: str, body: bytes, receive: Receive) -> AckOut:
    """``POST …/ack``, with or without ``dequeue``."""
    request = decode(body, Ack)
    complete, fail = request.refs()
    then = request.dequeue
    if then is None:
        return AckOut.of(await rt.service.ack(ns, queue, complete, fail))
    longpoll.check_wait(then, "dequeue.wait_seconds")
    results, leased = await rt.service.ack_and_dequeue(ns, queue, complete, fail, then.next_lease())
    if not leased and then.wait_seconds:
        leased = await longpoll.dequeue(rt.service, rt.waiters_of, ns, queue, then, receive)
    return AckOut.of(results, leased)


async def complete(rt: Runtime, ns: str, queue: str, message_id: str, body: bytes) -> MessageOut:
    """``POST …/messages/{message_id}/complete``."""
    request = decode(body, Complete)
    return MessageOut.of(await rt.service.complete(ns, queue, message_id, request.lease_id))


async def fail(rt: Runtime, ns: str, queue: str, message_id: str, body: bytes) -> MessageOut:
    """``POST …/messages/{message_id}/fail``."""
    request = decode(body, Fail)
    failed = await rt.service.fail(
        ns,
        queue,
        message_id,
        request.lease_id,
        error=request.error,
        retry_delay_seconds=request.retry_delay_seconds,
    )
    return MessageOut.of(failed)


async def extend(rt: Runtime, ns: str, queue: str, message_id: str, body: bytes) -> MessageOut:
    """``POST …/messages/{message_id}/extend``."""
    request = decode(body, Extend)
    extended = await rt.service.extend(
        ns, queue, message_id, request.lease_id, request.lease_seconds
    )
    return MessageOut.of(extended)
