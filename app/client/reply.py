"""The sync reply pattern (from lmstfy): a request message whose handler's return value is sent
back to the caller through a reply queue.

The caller enqueues the request with metadata ``sundial.reply_to`` naming the reply queue (the
request's queue name + ``.replies``, same namespace) and a TTL equal to its timeout, then
long-polls the reply queue for the message whose ``sundial.request_id`` is the request's id.
The worker, when a handler returns for such a request, enqueues ``{"ok": true, "result": …}``
there under the request's id (an idempotent enqueue, so a redelivered request never produces a
second reply); when the request fails on its last attempt it sends ``{"ok": false, "error": …}``.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from app.client.calls import split_queue
from app.client.errors import CallFailed
from app.client.models import Leased, NewMessage

REPLY_TO = "sundial.reply_to"
"""Metadata key of a request: the name of its reply queue (same namespace)."""
REQUEST_ID = "sundial.request_id"
"""Metadata key of a reply: the id of the request it answers."""
REPLY_TTL_SECONDS = 3600
"""How long a reply nobody collects stays pending before it expires."""
REPLY_QUEUE_CONFIG = {"retention_seconds": 3600, "max_attempts": 1000, "filter_key": REQUEST_ID}
"""Configuration of a reply queue created by the caller. Callers wait for their own reply with a
filter on ``sundial.request_id``: the filter key indexes it, so finding one reply among many
waiting ones does not test them one by one."""


def reply_queue(queue: str) -> str:
    """The reply queue (``namespace/name``) of requests sent to ``queue``."""
    namespace, name = split_queue(queue)
    return f"{namespace}/{name}.replies"


def request_message(
    queue: str, payload: Any, timeout: float, metadata: dict[str, str] | None = None
) -> NewMessage:
    """A request to ``queue`` that expires (canceled, never run) if not leased in ``timeout``."""
    return NewMessage(
        id=f"call-{uuid.uuid4().hex}",
        payload=payload,
        metadata={**(metadata or {}), REPLY_TO: split_queue(reply_queue(queue))[1]},
        ttl_seconds=max(1, math.ceil(timeout)),
    )


def reply_address(queue: str, message: Leased) -> str | None:
    """Where to send the reply to ``message`` of ``queue``, if it is a request."""
    name = message.metadata.get(REPLY_TO)
    if name is None:
        return None
    return f"{split_queue(queue)[0]}/{name}"


def reply_message(request_id: str, *, result: Any = None, error: str | None = None) -> NewMessage:
    """The reply to ``request_id``: its result, or the error of its last attempt."""
    body = {"ok": False, "error": error} if error is not None else {"ok": True, "result": result}
    return NewMessage(
        id=request_id,
        payload=body,
        metadata={REQUEST_ID: request_id},
        ttl_seconds=REPLY_TTL_SECONDS,
    )


def reply_filter(request_id: str) -> dict[str, str]:
    """The dequeue filter that finds the reply to ``request_id``."""
    return {REQUEST_ID: request_id}


def reply_result(reply: Leased) -> Any:
    """The handler's return value carried by ``reply`` (CallFailed if it carries an error)."""
    body = reply.payload
    if isinstance(body, dict) and body.get("ok") is False:
        raise CallFailed(str(body.get("error")))
    return body.get("result") if isinstance(body, dict) else None
