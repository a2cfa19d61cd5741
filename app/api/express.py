"""The express lane: the data plane's hot calls answered without Litestar's per-request
machinery.

A one-message enqueue, dequeue or complete costs the server about 0.65 ms of CPU through
Litestar, a third of it in the framework's layers for the request (routing, the handler's
signature model, the ``Request`` and ``Response`` objects, the hook and middleware stacks) and
not in Sundial's work. The lane takes the app's ASGI handler's place, inside Litestar's own
entry point (so the scope, the app's state and its ``before_send`` hooks are Litestar's), and
recognises the hot calls by method and path:

=====  ==========================================================
POST   ``/v1/namespaces/{ns}/queues/{queue}/messages`` (enqueue)
POST   ``/v1/namespaces/{ns}/queues/{queue}/dequeue``
POST   ``/v1/namespaces/{ns}/queues/{queue}/ack``
POST   ``/v1/namespaces/{ns}/queues/{queue}/messages/{message_id}/complete``, ``…/fail``,
       ``…/extend``
=====  ==========================================================

For those it does what their routes do, with the same pieces: the routes' ``before_request``
hook (authentication, rate limits, the request's catalogue view), the body read within
``max_body_bytes``, the same call (:mod:`app.api.hot_calls`), the answer encoded by Litestar's
own JSON encoder and sent as one start and one body message, errors answered by the app's
exception handlers, all inside the HTTP metrics middleware with the route's template. Every
other request goes to Litestar's router untouched; so does every request when the lane is off
(``SUNDIAL_EXPRESS_LANE=false``). tests/api/test_express_lane.py holds both ways to the same
answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from litestar import Request
from litestar.enums import ScopeType
from litestar.exceptions import InternalServerException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.serialization import encode_json
from litestar.types import (
    ASGIApp,
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    Receive,
    Scope,
    Send,
)

from app.api import hot_calls
from app.api.auth import require_namespace
from app.web.errors import EXCEPTION_HANDLERS
from app.web.runtime import Runtime, runtime

Middleware = Callable[[ASGIApp], ASGIApp]
"""An ASGI middleware factory (the HTTP metrics)."""

_QUEUE_PREFIX: Final = "/v1/namespaces/{ns}/queues/{queue}"
_JSON_HEADER: Final = (b"content-type", b"application/json")
_CLIENT_GONE: Final = "client disconnected prematurely"  # Litestar's words, for the same answer

QueueCall = Callable[[Runtime, str, str, bytes, Receive], Awaitable[Any]]
MessageCall = Callable[[Runtime, str, str, str, bytes], Awaitable[Any]]


async def _enqueue(rt: Runtime, ns: str, queue: str, body: bytes, _: Receive) -> Any:
    return await hot_calls.enqueue(rt, ns, queue, body)


@dataclass(frozen=True, slots=True)
class _Route:
    """A hot call: its route template (the metrics' ``path`` label, as Litestar names it), its
    success status and what runs it from the path's parts."""

    template: str
    status: int
    run: Callable[[Runtime, list[str], bytes, Receive], Awaitable[Any]]


def _queue_route(suffix: str, status: int, call: QueueCall) -> tuple[str, _Route]:
    async def run(rt: Runtime, parts: list[str], body: bytes, receive: Receive) -> Any:
        return await call(rt, parts[3], parts[5], body, receive)

    return suffix, _Route(f"{_QUEUE_PREFIX}/{suffix}", status, run)


def _message_route(action: str, call: MessageCall) -> tuple[str, _Route]:
    async def run(rt: Runtime, parts: list[str], body: bytes, _: Receive) -> Any:
        return await call(rt, parts[3], parts[5], parts[7], body)

    return action, _Route(f"{_QUEUE_PREFIX}/messages/{{message_id}}/{action}", 200, run)


_QUEUE_CALLS: Final = dict(
    [
        _queue_route("messages", 201, _enqueue),
        _queue_route("dequeue", 200, hot_calls.dequeue),
        _queue_route("ack", 200, hot_calls.ack),
    ]
)
"""``POST /v1/namespaces/{ns}/queues/{queue}/<suffix>``."""

_MESSAGE_CALLS: Final = dict(
    [
        _message_route("complete", hot_calls.complete),
        _message_route("fail", hot_calls.fail),
        _message_route("extend", hot_calls.extend),
    ]
)
"""``POST /v1/namespaces/{ns}/queues/{queue}/messages/{message_id}/<action>``."""


def route_of(method: str, path: str) -> tuple[_Route, list[str]] | None:
    """The hot call a request is, with its path split at ``/``; None for any other request
    (a path with an empty segment or a trailing slash included: Litestar answers those)."""
    if method != "POST" or not path.startswith("/v1/namespaces/"):
        return None
    parts = path.split("/")
    # ["", "v1", "namespaces", ns, "queues", queue, <suffix>] or
    # ["", "v1", "namespaces", ns, "queues", queue, "messages", message_id, <action>]
    if len(parts) == 7:
        route = _QUEUE_CALLS.get(parts[6])
    elif len(parts) == 9 and parts[6] == "messages" and parts[7]:
        route = _MESSAGE_CALLS.get(parts[8])
    else:
        return None
    if route is None or parts[4] != "queues" or not parts[3] or not parts[5]:
        return None
    return route, parts


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The request body, as Litestar reads it for a route.

    Raises:
        RequestEntityTooLarge: the body (or its announced ``Content-Length``) is over ``limit``.
        InternalServerException: the client went away before sending all of it.
    """
    for name, value in scope["headers"]:
        if name == b"content-length":
            if value.isdigit() and int(value) > limit:
                raise RequestEntityTooLarge
            break
    chunks: list[bytes] = []
    size = 0
    while True:
        event = await receive()
        if event["type"] == "http.disconnect":
            raise InternalServerException(_CLIENT_GONE)
        chunk = event.get("body", b"")
        assert isinstance(chunk, bytes)
        if chunk:
            size += len(chunk)
            if size > limit:
                raise RequestEntityTooLarge
            chunks.append(chunk)
        if not event.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class ExpressLane:
    """The app's ASGI handler: hot calls answered here, the rest by ``router``."""

    def __init__(self, router: ASGIApp, *, max_body_bytes: int, metrics: Middleware) -> None:
        """
        Args:
            router: the ASGI handler Litestar built (its router, inside its exception handling).
            max_body_bytes: the largest request body (the app's ``request_max_body_size``).
            metrics: the HTTP metrics middleware the routes have.
        """
        self.router = router
        self._max_body_bytes = max_body_bytes
        self._answer_timed = metrics(self._answer)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = None
        if scope["type"] == ScopeType.HTTP:
            found = route_of(scope["method"], scope["path"])
        if found is None:
            await self.router(scope, receive, send)
            return
        route, parts = found
        scope["path_template"] = route.template
        scope["path_params"] = {"ns": parts[3], "queue": parts[5]}
        scope["express_route"] = found  # type: ignore[typeddict-unknown-key]
        await self._answer_timed(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        route, parts = scope["express_route"]  # type: ignore[typeddict-item]
        request: Request[Any, Any, Any] = Request(scope, receive, send)
        try:
            await require_namespace(request)
            body = await read_body(scope, receive, self._max_body_bytes)
            answer = encode_json(await route.run(runtime(request), parts, body, receive))
        except Exception as error:  # noqa: BLE001 — answered as the routes answer it
            await _answer_error(request, error, scope, receive, send)
            return
        start: HTTPResponseStartEvent = {
            "type": "http.response.start",
            "status": route.status,
            "headers": [_JSON_HEADER, (b"content-length", str(len(answer)).encode())],
        }
        end: HTTPResponseBodyEvent = {
            "type": "http.response.body",
            "body": answer,
            "more_body": False,
        }
        await send(start)
        await send(end)


async def _answer_error(
    request: Request[Any, Any, Any], error: Exception, scope: Scope, receive: Receive, send: Send
) -> None:
    """Answer ``error`` with the app's exception handler for it (the most specific class)."""
    handler = next(EXCEPTION_HANDLERS[c] for c in type(error).__mro__ if c in EXCEPTION_HANDLERS)
    response = handler(request, error)
    await response.to_asgi_response(app=None, request=request)(scope, receive, send)
