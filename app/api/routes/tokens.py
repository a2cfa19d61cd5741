"""Admin plane: namespace tokens (admin token)."""

from __future__ import annotations

from litestar import Router, delete, get, patch, post

from app.api.auth import require_admin
from app.api.body import read
from app.api.openapi import SECURITY, with_body
from app.api.schemas.tokens import (
    IssuedTokenOut,
    TokenIssue,
    TokenLimitsPatch,
    TokenList,
    TokenOut,
)
from app.web.errors import error_specs
from app.web.runtime import AnyRequest, PathStr, service

_AUTH = (401, 403, 429)


@post(
    "/",
    status_code=201,
    operation_class=with_body(TokenIssue),
    responses=error_specs(400, *_AUTH, 404, 413),
)
async def issue_token(request: AnyRequest, ns: PathStr) -> IssuedTokenOut:
    """Issue a namespace token, or with `kind: sqs` an SQS access key. Its secret (`token`: the
    bearer token, or the secret access key) is in this answer and never again."""
    body = await read(request, TokenIssue)
    issue = service(request).issue_token
    if body.kind == "sqs":
        issue = service(request).issue_access_key
    issued = await issue(
        ns, body.label, body.expires_at, read_rate=body.read_rate, write_rate=body.write_rate
    )
    return IssuedTokenOut.of(issued)


@get("/", responses=error_specs(*_AUTH, 404))
async def list_tokens(request: AnyRequest, ns: PathStr) -> TokenList:
    """A namespace's tokens, without their secrets."""
    return TokenList([TokenOut.of(t) for t in await service(request).list_tokens(ns)])


@patch(
    "/{token_id:str}",
    operation_class=with_body(TokenLimitsPatch),
    responses=error_specs(400, *_AUTH, 404, 413),
)
async def set_token_limits(request: AnyRequest, ns: PathStr, token_id: PathStr) -> TokenOut:
    """Change a token's rate limits (`read_rate`, `write_rate`: requests per second, `null` for
    none; a field left out stays). Applies to every request sent after this answer, in every
    server process."""
    body = await read(request, TokenLimitsPatch)
    return TokenOut.of(await service(request).set_token_limits(ns, token_id, body.to_changes()))


@delete("/{token_id:str}", responses=error_specs(*_AUTH, 404))
async def revoke_token(request: AnyRequest, ns: PathStr, token_id: PathStr) -> None:
    """Revoke a token: it stops working at once."""
    await service(request).revoke_token(ns, token_id)


router = Router(
    "/v1/namespaces/{ns:str}/tokens",
    route_handlers=[issue_token, list_tokens, set_token_limits, revoke_token],
    before_request=require_admin,
    security=SECURITY,
    tags=["admin"],
)
