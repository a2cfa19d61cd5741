"""Admin plane: namespaces (admin token)."""

from __future__ import annotations

from litestar import Router, delete, get, post

from app.api.auth import require_admin
from app.api.body import read
from app.api.openapi import SECURITY, with_body
from app.api.schemas.namespaces import NamespaceCreate, NamespaceList, NamespaceOut
from app.web.errors import error_specs
from app.web.runtime import AnyRequest, PathStr, service

_AUTH = (401, 403, 429)


@post(
    "/",
    status_code=201,
    operation_class=with_body(NamespaceCreate),
    responses=error_specs(400, *_AUTH, 409, 413),
)
async def create_namespace(request: AnyRequest) -> NamespaceOut:
    """Create a namespace, on the named pool or the least loaded one (409 `conflict` if it
    exists)."""
    body = await read(request, NamespaceCreate)
    created = await service(request).create_namespace(body.name, body.description, body.pool)
    return NamespaceOut.of(created)


@get("/", responses=error_specs(*_AUTH))
async def list_namespaces(request: AnyRequest) -> NamespaceList:
    """Every namespace."""
    found = await service(request).list_namespaces()
    return NamespaceList([NamespaceOut.of(n) for n in found])


@delete("/{ns:str}", responses=error_specs(*_AUTH, 404))
async def delete_namespace(request: AnyRequest, ns: PathStr) -> None:
    """Delete a namespace with its tokens, queues and messages."""
    await service(request).delete_namespace(ns)


router = Router(
    "/v1/namespaces",
    route_handlers=[create_namespace, list_namespaces, delete_namespace],
    before_request=require_admin,
    security=SECURITY,
    tags=["admin"],
)
