"""Queues of a namespace (namespace token of that namespace, or the admin token)."""

from __future__ import annotations

from litestar import Response, Router, delete, get, patch, post, put
from litestar.openapi.datastructures import ResponseSpec

from app.api.auth import require_namespace
from app.api.body import read
from app.api.openapi import SECURITY, with_body
from app.api.schemas.queues import (
    Purge,
    Purged,
    QueueDetailOut,
    QueueList,
    QueueListItem,
    QueueOut,
    QueuePatch,
    QueuePut,
)
from app.web.errors import error_specs
from app.web.runtime import AnyRequest, PathStr, service

_AUTH = (401, 403, 429)
_CREATED = {201: ResponseSpec(QueueOut, description="The queue was created")}


@put(
    "/{queue:str}",
    operation_class=with_body(QueuePut),
    responses={**_CREATED, **error_specs(400, *_AUTH, 404, 409, 413)},
)
async def put_queue(request: AnyRequest, ns: PathStr, queue: PathStr) -> Response[QueueOut]:
    """Create a queue (201), or bring it to this configuration (200; the same configuration
    again changes nothing). Changing `kind` or `exclusive_key` is a 409 `conflict`."""
    body = await read(request, QueuePut)
    found, created = await service(request).put_queue(ns, queue, body.to_model())
    return Response(QueueOut.of(found), status_code=201 if created else 200)


@get("/", responses=error_specs(*_AUTH, 404))
async def list_queues(request: AnyRequest, ns: PathStr) -> QueueList:
    """The namespace's queues, each with its message counts per state."""
    found = await service(request).list_queues(ns)
    return QueueList([QueueListItem.of_counts(q, counts) for q, counts in found])


@get("/{queue:str}", responses=error_specs(*_AUTH, 404))
async def get_queue(request: AnyRequest, ns: PathStr, queue: PathStr) -> QueueDetailOut:
    """A queue's configuration, message counts per state and oldest pending age."""
    return QueueDetailOut.of_detail(await service(request).queue_detail(ns, queue))


@patch(
    "/{queue:str}",
    operation_class=with_body(QueuePatch),
    responses=error_specs(400, *_AUTH, 404, 413),
)
async def patch_queue(request: AnyRequest, ns: PathStr, queue: PathStr) -> QueueOut:
    """Change some mutable settings (pause switches included); `kind` and `exclusive_key`
    cannot change."""
    body = await read(request, QueuePatch)
    return QueueOut.of(await service(request).update_queue(ns, queue, body.to_changes()))


@delete("/{queue:str}", responses=error_specs(*_AUTH, 404))
async def delete_queue(request: AnyRequest, ns: PathStr, queue: PathStr) -> None:
    """Delete a queue and its messages."""
    await service(request).delete_queue(ns, queue)


@post(
    "/{queue:str}/purge",
    status_code=200,
    operation_class=with_body(Purge),
    responses=error_specs(400, *_AUTH, 404, 413),
)
async def purge_queue(request: AnyRequest, ns: PathStr, queue: PathStr) -> Purged:
    """Delete the queue's messages in `states` (every state by default)."""
    body = await read(request, Purge)
    return Purged(await service(request).purge_queue(ns, queue, body.states))


router = Router(
    "/v1/namespaces/{ns:str}/queues",
    route_handlers=[put_queue, list_queues, get_queue, patch_queue, delete_queue, purge_queue],
    before_request=require_namespace,
    security=SECURITY,
    tags=["queues"],
)
