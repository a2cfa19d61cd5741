"""The SQS door on the wire: ``POST /sqs`` (and any path under it, such as a queue URL's) in the
AWS JSON 1.0 protocol (``X-Amz-Target: AmazonSQS.<Action>``, what current SDKs send) or the query
protocol (form-encoded ``Action=…``, answered in XML, what older SDKs send; also as a GET).

Each request is signed with Signature Version 4 by an access key of a namespace; the door checks
the signature with the key's secret, then runs the action as that namespace. Errors come out as
SQS's, in the request's protocol. Like the REST API's, a request's lookups rest on the catalogue
version (:mod:`app.core.catalogue`): a key revoked is refused from the next request on.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, cast
from urllib.parse import parse_qsl

from litestar import Request, Response, Router, post, route
from litestar.exceptions import HTTPException
from sqlalchemy import exc as sa_exc

from app.core import catalogue
from app.core.errors import UnavailableError
from app.core.models import Principal
from app.core.token_limits import Kind
from app.sqs import messages, query_protocol, signing
from app.sqs.actions import ACTIONS, Actions, Caller
from app.sqs.errors import (
    INTERNAL_FAILURE,
    INVALID_CLIENT_TOKEN_ID,
    REQUEST_THROTTLED,
    SERVICE_UNAVAILABLE,
    SqsError,
    invalid_parameter,
)
from app.sqs.names import PATH_PREFIX
from app.web import token_limits
from app.web.ratelimit import RateLimitedError
from app.web.runtime import ROUTE_LABEL, runtime

log = logging.getLogger("sundial.sqs")

JSON_CONTENT_TYPE: Final = "application/x-amz-json-1.0"
TARGET_PREFIX: Final = "AmazonSQS."
_PRINCIPAL: Final = "sundial.sqs_principal"
_KIND: Final = "sundial.sqs_kind"
"""Scope keys: the request's access key as last looked up, and its action's kind (read, write)."""


class _Exchange:
    """One request's protocol: how its action and parameters are read, and how it is answered."""

    def __init__(self, request: Request[Any, Any, Any], body: bytes) -> None:
        self.request = request
        self.body = body
        self.request_id = str(uuid.uuid4())
        self.target = request.headers.get("x-amz-target")
        self.action = ""

    @property
    def is_json(self) -> bool:
        return self.target is not None

    def read(self) -> tuple[str, dict[str, Any]]:
        """The action and its parameters in the JSON protocol's shape."""
        if self.target is not None:
            if not self.target.startswith(TARGET_PREFIX):
                raise SqsError("UnknownOperationException", f"Unknown target {self.target}.")
            self.action = self.target.removeprefix(TARGET_PREFIX)
            try:
                params = json.loads(self.body or b"{}")
            except ValueError:
                raise invalid_parameter("body", "The request body is not JSON.") from None
            if not isinstance(params, dict):
                raise invalid_parameter("body", "The request body is not a JSON object.")
            return self.action, params
        pairs = parse_qsl(self.request.scope["query_string"].decode(), keep_blank_values=True)
        content_type = self.request.headers.get("content-type", "")
        if self.body and content_type.startswith("application/x-www-form-urlencoded"):
            pairs += parse_qsl(self.body.decode(errors="replace"), keep_blank_values=True)
        try:
            self.action, params = query_protocol.read_request(pairs)
        except query_protocol.QueryProtocolError as error:
            raise SqsError(error.code, error.message) from None
        path = self.request.scope["path"]
        if "QueueUrl" not in params and path.rstrip("/") not in ("", PATH_PREFIX):
            params["QueueUrl"] = f"{_endpoint(self.request)}{path}"  # sent to the queue's URL
        return self.action, params

    def answer(self, result: Mapping[str, Any]) -> Response[bytes]:
        if self.is_json:
            return Response(
                json.dumps(result).encode(),
                media_type=JSON_CONTENT_TYPE,
                headers={"x-amzn-RequestId": self.request_id},
            )
        if "Messages" in result:  # a REST client's message may hold what XML cannot carry
            result = {**result, "Messages": [messages.xml_safe(m) for m in result["Messages"]]}
        return Response(
            query_protocol.render_result(self.action, result, self.request_id),
            media_type="text/xml",
            headers={"x-amzn-RequestId": self.request_id},
        )

    def refuse(self, error: SqsError) -> Response[bytes]:
        fault = "Sender" if error.sender_fault else "Receiver"
        if self.is_json:
            body = {"__type": f"com.amazonaws.sqs#{error.shape}", "message": error.message}
            return Response(
                json.dumps(body).encode(),
                status_code=error.status,
                media_type=JSON_CONTENT_TYPE,
                headers={
                    "x-amzn-RequestId": self.request_id,
                    "x-amzn-query-error": f"{error.code};{fault}",
                },
            )
        return Response(
            query_protocol.render_error(
                error.code,
                error.message,
                sender_fault=error.sender_fault,
                request_id=self.request_id,
            ),
            status_code=error.status,
            media_type="text/xml",
            headers={"x-amzn-RequestId": self.request_id},
        )


@route([PATH_PREFIX, f"{PATH_PREFIX}/{{rest:path}}"], http_method=["POST", "GET"], status_code=200)
async def sqs_door(request: Request[Any, Any, Any]) -> Response[bytes]:
    """An SQS request, in either protocol."""
    return await serve(request)


@post("/", status_code=200)
async def sqs_door_at_root(request: Request[Any, Any, Any]) -> Response[bytes]:
    """An SQS request POSTed to the server's root: for clients whose endpoint can only be a host
    and port (Celery's SQS transport builds it so). Nothing else answers a POST there."""
    return await serve(request)


async def serve(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Read, authenticate and run one SQS request, and answer it in its protocol."""
    try:
        body = await request.body()
    except HTTPException as error:
        exchange = _Exchange(request, b"")
        return exchange.refuse(SqsError("RequestEntityTooLarge", error.detail, status=413))
    exchange = _Exchange(request, body)
    try:
        caller = await _authenticate(request, body)  # before anything of the request is read
        action, params = exchange.read()
        if action in ACTIONS:  # the metrics' route label: the door's own, per action
            request.scope[ROUTE_LABEL] = f"{PATH_PREFIX}:{action}"  # type: ignore[literal-required]
        await _count_for_token(request, token_limits.sqs_kind(action))
        rt = runtime(request)
        actions = Actions(rt.service, rt.waiters_of)
        result = await actions.run(action, params, caller, request.receive)
    except SqsError as error:
        return exchange.refuse(error)
    except (UnavailableError, sa_exc.TimeoutError, sa_exc.OperationalError) as error:
        log.warning("SQS %s unavailable: %s", exchange.action, error)
        return exchange.refuse(
            SqsError(SERVICE_UNAVAILABLE, str(error), status=503, sender_fault=False)
        )
    except Exception:
        log.exception("SQS %s failed", exchange.action)
        return exchange.refuse(
            SqsError(INTERNAL_FAILURE, "internal server error", status=500, sender_fault=False)
        )
    return exchange.answer(result)


async def _authenticate(request: Request[Any, Any, Any], body: bytes) -> Caller:
    """The caller of a signed request: its signature checked with its access key's secret."""
    signed = signing.SignedRequest(
        method=request.method,
        path=request.scope.get("raw_path", request.scope["path"].encode())
        .decode("utf-8", errors="replace")
        .split("?", 1)[0],
        query_string=request.scope["query_string"].decode("latin-1"),
        headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.scope["headers"]],
        body=body,
    )
    try:
        claim = signing.read_claim(signed)
    except signing.SigningError as error:
        raise SqsError(error.code, error.message, status=error.status) from None
    service = runtime(request).service

    async def look_up() -> tuple[Principal, str]:
        found = await service.access_key_secret(claim.access_key_id)
        if found is None:
            raise SqsError(
                INVALID_CLIENT_TOKEN_ID,
                "The security token included in the request is invalid.",
                status=403,
            )
        return found

    async def renew() -> None:
        _scope(request)[_PRINCIPAL] = (await look_up())[0]
        await _count_for_token(request)  # a limit new to the request

    catalogue.open_view(renew=renew)
    principal, secret = await look_up()
    _scope(request)[_PRINCIPAL] = principal
    try:
        signing.verify(signed, claim, secret, datetime.now(UTC))
    except signing.SigningError as error:
        raise SqsError(error.code, error.message, status=error.status) from None
    limiter = runtime(request).rate_limiter
    if limiter is not None:
        try:
            await limiter.check(principal)
        except RateLimitedError as error:
            raise SqsError(REQUEST_THROTTLED, error.message) from None
    assert principal.namespace is not None  # an access key is a namespace's
    return Caller(namespace=principal.namespace, endpoint=_endpoint(request), region=claim.region)


async def _count_for_token(request: Request[Any, Any, Any], kind: Kind | None = None) -> None:
    """Count the request against its access key's own rate limit of ``kind`` (once; the kind
    is known once the action is read: app/web/token_limits.py)."""
    scope = _scope(request)
    if kind is not None:
        scope[_KIND] = kind
    kind = scope.get(_KIND)
    principal: Principal | None = scope.get(_PRINCIPAL)
    if kind is None or principal is None:
        return
    try:
        await token_limits.check(request, runtime(request).service, principal, kind)
    except RateLimitedError as error:
        raise SqsError(REQUEST_THROTTLED, error.message) from None


def _scope(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """The request's ASGI scope, for the door's own keys."""
    return cast("dict[str, Any]", request.scope)


def _endpoint(request: Request[Any, Any, Any]) -> str:
    """The endpoint the client called: its scheme and host."""
    host = request.headers.get("host") or f"{request.url.hostname}:{request.url.port}"
    return f"{request.url.scheme}://{host}"


ROUTER: Final = Router(
    path="/", route_handlers=[sqs_door, sqs_door_at_root], include_in_schema=False
)
"""The door, for the application's route handlers."""
