"""Messages of a queue: enqueue, dequeue (long poll), leases, batch ack, query, dead letters
(namespace token of that namespace, or the admin token)."""

from __future__ import annotations

from typing import Annotated

from litestar import Router, delete, get, patch, post
from litestar.params import QueryParameter

from app.api import hot_calls
from app.api.auth import require_namespace
from app.api.body import read
from app.api.openapi import SECURITY, with_body
from app.api.query import message_filter
from app.api.schemas.consuming import Dequeue, DequeueOut, LeaseById, LeasedOut
from app.api.schemas.leases import Ack, AckOut, Complete, Extend, Fail
from app.api.schemas.messages import (
    Cancel,
    DeletedDeadLetters,
    DeleteDeadLetters,
    MessageOut,
    MessagePageOut,
    MessagePatch,
    Requeue,
    Requeued,
    RequeueDeadLetters,
)
from app.api.schemas.producing import Enqueue, EnqueueOut
from app.web.errors import error_specs
from app.web.runtime import AnyRequest, PathStr, runtime, service

_AUTH = (401, 403, 429)
_ONE = "/messages/{message_id:str}"
_STATE = "message state; repeat it or separate states with commas"
_ORDER = "enqueued_at (newest first, the default) or priority (lowest first)"


@post(
    "/messages",
    status_code=201,
    operation_class=with_body(Enqueue),
    responses=error_specs(400, *_AUTH, 404, 409, 413),
)
async def enqueue(request: AnyRequest, ns: PathStr, queue: PathStr) -> EnqueueOut:
    """Enqueue 1-1000 messages, all or nothing. An id already in the queue is not enqueued
    again: it is reported with `created: false` and its current state; with `on_conflict:
    replace`, its message is replaced while it still waits (`replaced: true`). With
    `create_queue: true`, a queue that does not exist is created with the default
    configuration first."""
    return await hot_calls.enqueue(runtime(request), ns, queue, await request.body())


@get("/messages", responses=error_specs(400, *_AUTH, 404))
async def query_messages(
    request: AnyRequest,
    ns: PathStr,
    queue: PathStr,
    states: Annotated[list[str] | None, QueryParameter(name="state", description=_STATE)] = None,
    priority_lt: Annotated[str | None, QueryParameter(description="exclusive bound")] = None,
    priority_gte: Annotated[str | None, QueryParameter(description="inclusive bound")] = None,
    limit: Annotated[str | None, QueryParameter(description="1-1000, default 100")] = None,
    cursor: Annotated[str | None, QueryParameter(description="the last next_cursor")] = None,
    order: Annotated[str | None, QueryParameter(description=_ORDER)] = None,
) -> MessagePageOut:
    """List messages by state, `metadata.<key>=<value>` and priority range, a page at a time."""
    spec = message_filter(
        request.query_params.multi_items(),
        state=states,
        priority_lt=priority_lt,
        priority_gte=priority_gte,
        limit=limit,
        cursor=cursor,
        order=order,
    )
    return MessagePageOut.of(await service(request).query_messages(ns, queue, spec))


@post(
    "/dequeue",
    status_code=200,
    operation_class=with_body(Dequeue),
    responses=error_specs(400, *_AUTH, 404, 413),
)
async def dequeue(request: AnyRequest, ns: PathStr, queue: PathStr) -> DequeueOut:
    """Lease up to `count` messages, waiting up to `wait_seconds` for one to be ready."""
    return await hot_calls.dequeue(
        runtime(request), ns, queue, await request.body(), request.receive
    )


@post(
    "/ack",
    status_code=200,
    operation_class=with_body(Ack),
    responses=error_specs(400, *_AUTH, 404, 413),
)
async def ack(request: AnyRequest, ns: PathStr, queue: PathStr) -> AckOut:
    """Complete and fail up to 1000 messages; each item succeeds or fails on its own. With
    `dequeue`, then lease messages as a dequeue does, in the same transaction on a simple queue
    (a long poll, if it asks for one, begins once the acknowledgement is committed)."""
    return await hot_calls.ack(runtime(request), ns, queue, await request.body(), request.receive)


@post(
    "/requeue",
    status_code=200,
    operation_class=with_body(RequeueDeadLetters),
    responses=error_specs(400, *_AUTH, 404, 413),
)
async def requeue_dead_letters(request: AnyRequest, ns: PathStr, queue: PathStr) -> Requeued:
    """Send up to `limit` dead letters (errored or canceled), oldest finished first, back to
    pending (or invisible for `delay_seconds`), attempts reset; they expire after `ttl_seconds`
    or at `expires_at` (neither: never)."""
    body = await read(request, RequeueDeadLetters)
    count = await service(request).requeue_dead_letters(
        ns,
        queue,
        body.states,
        body.ids,
        body.limit,
        delay_seconds=body.delay_seconds,
        ttl_seconds=body.ttl_seconds,
        expires_at=body.expires_at,
    )
    return Requeued(count)


@post(
    "/dead-letters/delete",
    status_code=200,
    operation_class=with_body(DeleteDeadLetters),
    responses=error_specs(400, *_AUTH, 404, 413),
)
async def delete_dead_letters(
    request: AnyRequest, ns: PathStr, queue: PathStr
) -> DeletedDeadLetters:
    """Delete up to `limit` dead letters (errored or canceled), oldest finished first: the ones
    `…/requeue` would take."""
    body = await read(request, DeleteDeadLetters)
    count = await service(request).delete_dead_letters(ns, queue, body.states, body.ids, body.limit)
    return DeletedDeadLetters(count)


@get(_ONE, responses=error_specs(*_AUTH, 404))
async def get_message(
    request: AnyRequest, ns: PathStr, queue: PathStr, message_id: PathStr
) -> MessageOut:
    """One message, in any state."""
    return MessageOut.of(await service(request).get_message(ns, queue, message_id))


@patch(
    _ONE, operation_class=with_body(MessagePatch), responses=error_specs(400, *_AUTH, 404, 409, 413)
)
async def patch_message(
    request: AnyRequest, ns: PathStr, queue: PathStr, message_id: PathStr
) -> MessageOut:
    """Change a waiting (invisible or pending) message; any other state is 409 `invalid_state`."""
    changes = (await read(request, MessagePatch)).to_model()
    return MessageOut.of(await service(request).update_message(ns, queue, message_id, changes))


@delete(_ONE, responses=error_specs(*_AUTH, 404))
async def delete_message(
    request: AnyRequest, ns: PathStr, queue: PathStr, message_id: PathStr
) -> None:
    """Remove a message in any state (a running lease becomes invalid)."""
    await service(request).delete_message(ns, queue, message_id)


@post(
    f"{_ONE}/lease",
    status_code=200,
    operation_class=with_body(LeaseById),
    responses=error_specs(400, *_AUTH, 404, 409, 413),
)
async def lease_message(
    request: AnyRequest, ns: PathStr, queue: PathStr, message_id: PathStr
) -> LeasedOut:
    """Lease this message as a dequeue would, if it is ready (pending, or invisible and due, not
    expired): the leased message, as a dequeue answers it. 409 `invalid_state` when it is not
    ready, or its exclusive value is running; 409 `queue_paused` while the queue is
    dequeue-paused."""
    body = await read(request, LeaseById)
    leased = await service(request).lease_message(
        ns, queue, message_id, lease_seconds=body.lease_seconds
    )
    return LeasedOut.of(leased)  # exactly a dequeue's item


@post(
    f"{_ONE}/complete",
    status_code=200,
    operation_class=with_body(Complete),
    responses=error_specs(400, *_AUTH, 404, 409, 413),
)
async def complete(
    request: AnyRequest, ns: PathStr, queue: PathStr, message_id: PathStr
) -> MessageOut:
    """Complete a running message with its current lease (409 `lease_mismatch` otherwise)."""
    rt, body = runtime(request), await request.body()
    return await hot_calls.complete(rt, ns, queue, message_id, body)


@post(
    f"{_ONE}/fail",
    status_code=200,
    operation_class=with_body(Fail),
    responses=error_specs(400, *_AUTH, 404, 409, 413),
)
async def fail(request: AnyRequest, ns: PathStr, queue: PathStr, message_id: PathStr) -> MessageOut:
    """Fail an attempt: retried (after the retry delay) while attempts remain, else errored."""
    return await hot_calls.fail(runtime(request), ns, queue, message_id, await request.body())


@post(
    f"{_ONE}/extend",
    status_code=200,
    operation_class=with_body(Extend),
    responses=error_specs(400, *_AUTH, 404, 409, 413),
)
async def extend(
    request: AnyRequest, ns: PathStr, queue: PathStr, message_id: PathStr
) -> MessageOut:
    """Heartbeat: the lease now expires `lease_seconds` from now."""
    rt, body = runtime(request), await request.body()
    return await hot_calls.extend(rt, ns, queue, message_id, body)


@post(
    f"{_ONE}/cancel",
    status_code=200,
    operation_class=with_body(Cancel),
    responses=error_specs(400, *_AUTH, 404, 409, 413),
)
async def cancel(
    request: AnyRequest, ns: PathStr, queue: PathStr, message_id: PathStr
) -> MessageOut:
    """Cancel a live message; a running one needs its `lease_id` or `force`."""
    body = await read(request, Cancel)
    canceled = await service(request).cancel(
        ns, queue, message_id, lease_id=body.lease_id, force=body.force, reason=body.reason
    )
    return MessageOut.of(canceled)


@post(
    f"{_ONE}/requeue",
    status_code=200,
    operation_class=with_body(Requeue),
    responses=error_specs(400, *_AUTH, 404, 409, 413),
)
async def requeue(
    request: AnyRequest, ns: PathStr, queue: PathStr, message_id: PathStr
) -> MessageOut:
    """Send an errored or canceled message back to the queue, attempts reset; it expires after
    `ttl_seconds` or at `expires_at` (neither: never)."""
    body = await read(request, Requeue)
    requeued = await service(request).requeue(
        ns,
        queue,
        message_id,
        body.delay_seconds,
        ttl_seconds=body.ttl_seconds,
        expires_at=body.expires_at,
    )
    return MessageOut.of(requeued)


router = Router(
    "/v1/namespaces/{ns:str}/queues/{queue:str}",
    route_handlers=[
        enqueue,
        query_messages,
        dequeue,
        ack,
        requeue_dead_letters,
        delete_dead_letters,
        get_message,
        patch_message,
        lease_message,
        delete_message,
        complete,
        fail,
        extend,
        cancel,
        requeue,
    ],
    before_request=require_namespace,
    security=SECURITY,
    tags=["messages"],
)
