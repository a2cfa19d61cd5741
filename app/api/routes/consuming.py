"""Consuming from several queues of a namespace at once (namespace token of that namespace,
or the admin token): ``POST /v1/namespaces/{ns}/dequeue``."""

from __future__ import annotations

from litestar import Router, post

from app.api.auth import require_namespace
from app.api.body import decode
from app.api.openapi import SECURITY, with_body
from app.api.schemas.consuming_many import DequeueMany, DequeueManyOut
from app.web import longpoll_many
from app.web.errors import error_specs
from app.web.runtime import AnyRequest, PathStr, runtime


@post(
    "/dequeue",
    status_code=200,
    operation_class=with_body(DequeueMany),
    responses=error_specs(400, 401, 403, 429, 404, 413),
)
async def dequeue_many(request: AnyRequest, ns: PathStr) -> DequeueManyOut:
    """Lease up to `count` messages from the `queues` of the namespace, in their order of
    priority: the first queue's, then the rest of `count` from the next queues in order
    (dequeue-paused queues are passed over); each message names its `queue`. Waits up to
    `wait_seconds` for a message in any of them."""
    body = decode(await request.body(), DequeueMany)
    rt = runtime(request)
    leased = await longpoll_many.dequeue_many(rt.service, rt.waiters_of, ns, body, request.receive)
    return DequeueManyOut.of(leased)


router = Router(
    "/v1/namespaces/{ns:str}",
    route_handlers=[dequeue_many],
    before_request=require_namespace,
    security=SECURITY,
    tags=["messages"],
)
