"""Periodic (cron) jobs of a namespace (namespace token of that namespace, or the admin token)."""

from __future__ import annotations

from typing import Annotated

from litestar import Response, Router, delete, get, patch, post, put
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import QueryParameter

from app.api.auth import require_namespace
from app.api.body import read
from app.api.openapi import SECURITY, with_body
from app.api.schemas.periodic import (
    PeriodicList,
    PeriodicOut,
    PeriodicPatch,
    PeriodicPut,
    Triggered,
)
from app.web.errors import error_specs
from app.web.runtime import AnyRequest, PathStr, service

_AUTH = (401, 403, 429)
_CREATED = {201: ResponseSpec(PeriodicOut, description="The periodic job was created")}


@put(
    "/{name:str}",
    operation_class=with_body(PeriodicPut),
    responses={**_CREATED, **error_specs(400, *_AUTH, 404, 413)},
)
async def put_periodic(request: AnyRequest, ns: PathStr, name: PathStr) -> Response[PeriodicOut]:
    """Create a periodic job (201), or bring it to this definition (200). Its queue must exist
    (404). Its next run is the first tick after now when it is new, when its schedule or time
    zone changed, or when it is resumed; otherwise it keeps its place."""
    body = await read(request, PeriodicPut)
    job, created = await service(request).put_periodic(ns, name, body.to_model())
    return Response(PeriodicOut.of(job), status_code=201 if created else 200)


@get("/", responses=error_specs(400, *_AUTH, 404))
async def list_periodic(
    request: AnyRequest,
    ns: PathStr,
    queue: Annotated[str | None, QueryParameter(description="only the jobs of this queue")] = None,
) -> PeriodicList:
    """The namespace's periodic jobs, by name."""
    jobs = await service(request).list_periodic(ns, queue)
    return PeriodicList([PeriodicOut.of(job) for job in jobs])


@get("/{name:str}", responses=error_specs(*_AUTH, 404))
async def get_periodic(request: AnyRequest, ns: PathStr, name: PathStr) -> PeriodicOut:
    """A periodic job, with its next and last run."""
    return PeriodicOut.of(await service(request).get_periodic(ns, name))


@patch(
    "/{name:str}",
    operation_class=with_body(PeriodicPatch),
    responses=error_specs(400, *_AUTH, 404, 409, 413),
)
async def patch_periodic(request: AnyRequest, ns: PathStr, name: PathStr) -> PeriodicOut:
    """Change some fields of a periodic job; `paused` pauses or resumes it."""
    body = await read(request, PeriodicPatch)
    return PeriodicOut.of(await service(request).update_periodic(ns, name, body.to_changes()))


@delete("/{name:str}", responses=error_specs(*_AUTH, 404))
async def delete_periodic(request: AnyRequest, ns: PathStr, name: PathStr) -> None:
    """Delete a periodic job (the messages it enqueued stay)."""
    await service(request).delete_periodic(ns, name)


@post("/{name:str}/trigger", status_code=201, responses=error_specs(400, *_AUTH, 404, 409))
async def trigger_periodic(request: AnyRequest, ns: PathStr, name: PathStr) -> Triggered:
    """Enqueue the job's message now, once (paused or not); its schedule does not change. 404
    when its queue does not exist, 409 `queue_paused` when the queue is paused for enqueue."""
    return Triggered(await service(request).trigger_periodic(ns, name))


router = Router(
    "/v1/namespaces/{ns:str}/periodic",
    route_handlers=[
        put_periodic,
        list_periodic,
        get_periodic,
        patch_periodic,
        delete_periodic,
        trigger_periodic,
    ],
    before_request=require_namespace,
    security=SECURITY,
    tags=["periodic"],
)
