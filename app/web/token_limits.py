"""Per-token rate limits at the edge: which requests are reads and which writes, and the check
that counts a request of a limited token (docs/security.md, "Per-token rate limits").

The classification, in one place:

- **read**: ``GET`` and ``HEAD`` (get, list, query a queue's messages, a message) and
  ``POST …/dequeue`` (consuming); through the SQS door, ``ReceiveMessage`` and the actions that
  only read (:data:`SQS_READS`);
- **write**: everything else: enqueue, ack (with or without its ``dequeue``), complete, fail,
  extend, cancel, requeue, a message's change or delete, a queue's create, change, delete or
  purge; through the SQS door, every other action.

A request of a token whose lookup says it has no limit of the request's kind costs nothing
more: no statement. A limited one runs one (``QueueService.count_request``), which reads the
token's current limit and counts in PostgreSQL, so the limit holds across every server process.
The lookup may be remembered from before a change of the token's limits; such a change moves the
catalogue version, so the request's own statements find it and authenticate the caller again,
and this check then counts the request if it has not yet (:func:`check`, called
again). A request is counted once at most.
"""

from __future__ import annotations

import math
from typing import Any, Final, cast

from litestar.connection import ASGIConnection

from app.core.models import Principal
from app.core.service import QueueService
from app.core.token_limits import Kind
from app.web.ratelimit import RateLimitedError

COUNTED: Final = "sundial.token_rate_counted"
"""The scope key that records that a request was counted against its token's limit."""

SQS_READS: Final = frozenset(
    {
        "ReceiveMessage",
        "GetQueueUrl",
        "GetQueueAttributes",
        "ListQueues",
        "ListQueueTags",
        "ListDeadLetterSourceQueues",
        "ListMessageMoveTasks",
    }
)
"""The SQS door's actions that count as reads; every other action is a write."""


def request_kind(method: str, path: str) -> Kind:
    """Whether an HTTP API request is a read or a write (see the module's docstring)."""
    if method in ("GET", "HEAD") or (method == "POST" and path.endswith("/dequeue")):
        return "read"
    return "write"


def sqs_kind(action: str) -> Kind:
    """Whether an SQS action is a read or a write."""
    return "read" if action in SQS_READS else "write"


async def check(
    connection: ASGIConnection[Any, Any, Any, Any],
    service: QueueService,
    principal: Principal,
    kind: Kind | None = None,
) -> None:
    """Count the request against ``principal``'s limit of its kind, once per request; nothing
    when the token has no such limit (nor for the admin). ``kind``: the request's, when the
    HTTP method and path do not tell it (the SQS door).

    Raises:
        RateLimitedError: the token is over its limit (429 ``rate_limited``, ``Retry-After``).
    """
    if principal.is_admin or (principal.read_rate is None and principal.write_rate is None):
        return  # no limit at all: no need to tell the request's kind
    scope = cast("dict[str, Any]", connection.scope)
    if scope.get(COUNTED):
        return
    if kind is None:
        kind = request_kind(scope["method"], scope["path"])
    limit = principal.rate(kind)
    if limit is None:
        return
    scope[COUNTED] = True
    retry_after = await service.count_request(principal, kind)
    if retry_after is not None:
        raise RateLimitedError(
            f"this token's {kind} rate limit of {limit:g} requests per second is exceeded;"
            " retry later",
            max(1, math.ceil(retry_after)),
        )
