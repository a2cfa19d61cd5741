"""Every endpoint of API v1 as a :class:`Call`: method, path, body, how to decode the answer,
and whether repeating it is safe. The sync and async clients only send calls.

A call is *safe to retry* when sending it twice has the effect of sending it once: reads,
``PUT``/``PATCH``/``DELETE`` (they set a state), ``extend`` (it sets the expiry from now), a
complete (repeated with its lease, it answers 200 again) and an enqueue in which every message
carries its own id (the server never duplicates an id).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar, cast
from urllib.parse import quote

import msgspec

from app.client.models import (
    Acknowledged,
    AckResult,
    Enqueued,
    Health,
    IssuedToken,
    Leased,
    LeasedFrom,
    Message,
    MessagePage,
    Namespace,
    NewMessage,
    Queue,
    Token,
)

T = TypeVar("T")

MAX_WAIT_SECONDS = 20
"""The longest long poll the server grants (``wait_seconds``)."""


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its answer."""

    method: str
    path: str
    decode: Callable[[bytes], T]
    body: Any = None
    params: list[tuple[str, str]] = field(default_factory=list)
    safe: bool = False
    """Safe to send again after a failure whose outcome is unknown."""
    wait_seconds: float = 0
    """How long the server may hold the request on purpose (long poll)."""


def decoder(kind: type[T], key: str | None = None) -> Callable[[bytes], T]:
    """How to read an answer of type ``kind``, or the field ``key`` of an object holding one
    (``decoder(list[Queue], "queues")``). Built once for each ``kind`` and ``key``: a call is
    made for every request."""
    return _built_decoder(cast("Hashable", kind), key)  # list[X] is hashable too


@functools.cache
def _built_decoder(kind: Any, key: str | None) -> Callable[[bytes], Any]:
    if key is None:
        return msgspec.json.Decoder(kind).decode
    wrapper = msgspec.defstruct("Wrapper", [(key, kind)])
    decode_wrapper = msgspec.json.Decoder(wrapper).decode

    def decode(content: bytes) -> Any:
        return getattr(decode_wrapper(content), key)

    return decode


def nothing(content: bytes) -> None:
    """The decoder of an answer without a body."""


def split_queue(queue: str) -> tuple[str, str]:
    """``"namespace/queue"`` as its two parts (ValueError if it is not of that form)."""
    namespace, _, name = queue.partition("/")
    if not namespace or not name or "/" in name:
        raise ValueError(f"queue must be 'namespace/queue', got {queue!r}")
    return namespace, name


def segment(value: str) -> str:
    """``value`` as one segment of a path (``/`` and the rest quoted)."""
    return quote(value, safe="")


def namespace_path(namespace: str) -> str:
    """``v1/namespaces/{ns}``."""
    return f"v1/namespaces/{segment(namespace)}"


def _queue(queue: str) -> str:
    namespace, name = split_queue(queue)
    return f"{namespace_path(namespace)}/queues/{segment(name)}"


def _message(queue: str, message_id: str) -> str:
    return f"{_queue(queue)}/messages/{segment(message_id)}"


def identified(messages: Iterable[NewMessage]) -> bool:
    """Whether every message carries its own id: sending them again then enqueues none twice."""
    return all(m.id is not None for m in messages)


def _given(**fields: Any) -> dict[str, Any]:
    """The fields that are not ``None``."""
    return {key: value for key, value in fields.items() if value is not None}


_MESSAGE = decoder(Message)
_QUEUE = decoder(Queue)

# --- operations ----------------------------------------------------------------------------------


def health() -> Call[Health]:
    """``GET /healthz``."""
    return Call("GET", "healthz", decoder(Health), safe=True)


def ready() -> Call[Health]:
    """``GET /readyz`` (503 raises :class:`~app.client.errors.Unavailable`)."""
    return Call("GET", "readyz", decoder(Health), safe=True)


def metrics() -> Call[str]:
    """``GET /metrics``: the Prometheus text exposition of the process that answers."""
    return Call("GET", "metrics", _text, safe=True)


def schema() -> Call[dict[str, Any]]:
    """``GET /schema/openapi.json``: the OpenAPI document the server serves."""
    return Call("GET", "schema/openapi.json", decoder(dict[str, Any]), safe=True)


def _text(content: bytes) -> str:
    return content.decode()


# --- admin plane ---------------------------------------------------------------------------------


def create_namespace(name: str, description: str = "") -> Call[Namespace]:
    """``POST /v1/namespaces``."""
    body = {"name": name, "description": description}
    return Call("POST", "v1/namespaces", decoder(Namespace), body)


def list_namespaces() -> Call[list[Namespace]]:
    """``GET /v1/namespaces``."""
    return Call("GET", "v1/namespaces", decoder(list[Namespace], "namespaces"), safe=True)


def delete_namespace(name: str) -> Call[None]:
    """``DELETE /v1/namespaces/{ns}``."""
    return Call("DELETE", namespace_path(name), nothing, safe=True)


def issue_token(
    namespace: str,
    label: str = "",
    expires_at: datetime | None = None,
    *,
    kind: str = "bearer",
    read_rate: float | None = None,
    write_rate: float | None = None,
) -> Call[IssuedToken]:
    """``POST /v1/namespaces/{ns}/tokens``: a bearer token, or with ``kind="sqs"`` an SQS access
    key (``kind`` is sent only then, so that servers without SQS access keys still issue), with
    its own rate limits when given."""
    body = _given(
        label=label,
        expires_at=expires_at,
        kind=None if kind == "bearer" else kind,
        read_rate=read_rate,
        write_rate=write_rate,
    )
    return Call("POST", f"{namespace_path(namespace)}/tokens", decoder(IssuedToken), body)


def set_token_limits(
    namespace: str, token_id: str, limits: Mapping[str, float | None]
) -> Call[Token]:
    """``PATCH /v1/namespaces/{ns}/tokens/{id}``: ``read_rate`` and/or ``write_rate`` (None:
    no limit)."""
    path = f"{namespace_path(namespace)}/tokens/{segment(token_id)}"
    return Call("PATCH", path, decoder(Token), dict(limits), safe=True)


def list_tokens(namespace: str) -> Call[list[Token]]:
    """``GET /v1/namespaces/{ns}/tokens``."""
    path = f"{namespace_path(namespace)}/tokens"
    return Call("GET", path, decoder(list[Token], "tokens"), safe=True)


def revoke_token(namespace: str, token_id: str) -> Call[None]:
    """``DELETE /v1/namespaces/{ns}/tokens/{id}``."""
    path = f"{namespace_path(namespace)}/tokens/{segment(token_id)}"
    return Call("DELETE", path, nothing, safe=True)


# --- queues --------------------------------------------------------------------------------------


def put_queue(queue: str, config: Mapping[str, Any]) -> Call[Queue]:
    """``PUT …/queues/{queue}``: the whole configuration (absent fields: defaults)."""
    return Call("PUT", _queue(queue), _QUEUE, dict(config), safe=True)


def list_queues(namespace: str) -> Call[list[Queue]]:
    """``GET /v1/namespaces/{ns}/queues``."""
    path = f"{namespace_path(namespace)}/queues"
    return Call("GET", path, decoder(list[Queue], "queues"), safe=True)


def get_queue(queue: str) -> Call[Queue]:
    """``GET …/queues/{queue}``."""
    return Call("GET", _queue(queue), _QUEUE, safe=True)


def update_queue(queue: str, changes: Mapping[str, Any]) -> Call[Queue]:
    """``PATCH …/queues/{queue}``."""
    return Call("PATCH", _queue(queue), _QUEUE, dict(changes), safe=True)


def delete_queue(queue: str) -> Call[None]:
    """``DELETE …/queues/{queue}``."""
    return Call("DELETE", _queue(queue), nothing, safe=True)


def purge(queue: str, states: Iterable[str] | None = None) -> Call[int]:
    """``POST …/purge``: deletes messages (in ``states``, or all); the number deleted."""
    body = _given(states=None if states is None else list(states))
    # Not safe: a repeated purge would also delete what was enqueued since the first one.
    return Call("POST", f"{_queue(queue)}/purge", decoder(int, "deleted"), body)


# --- messages ------------------------------------------------------------------------------------


def enqueue(
    queue: str,
    messages: Iterable[NewMessage],
    *,
    on_conflict: str | None = None,
    create_queue: bool = False,
) -> Call[list[Enqueued]]:
    """``POST …/messages``: 1 to 1000 messages, all or nothing. ``on_conflict``: ``"keep"``
    (the server's default) or ``"replace"`` (a waiting message of an id already there becomes
    the new one); ``create_queue``: make the queue, with the default configuration, if it does
    not exist. Safe to repeat when every message has an id (a repeated replace sets the same
    message again, or leaves one that has started running alone)."""
    items = list(messages)
    decode = decoder(list[Enqueued], "messages")
    body: dict[str, Any] = {"messages": items}
    if on_conflict is not None:
        body["on_conflict"] = on_conflict
    if create_queue:
        body["create_queue"] = True
    return Call("POST", f"{_queue(queue)}/messages", decode, body, safe=identified(items))


DequeueFilter = Mapping[str, str | Sequence[str]]
"""A dequeue's metadata filter: pairs that must all match; a list of values matches any of
them (``{"tag": ["A", "B"]}``: tag A or tag B)."""


def _dequeue_filter(metadata: DequeueFilter | None) -> dict[str, str | list[str]] | None:
    if metadata is None:
        return None
    return {k: v if isinstance(v, str) else list(v) for k, v in metadata.items()}


def dequeue(
    queue: str,
    count: int = 1,
    *,
    wait_seconds: int = 0,
    lease_seconds: int | None = None,
    metadata: DequeueFilter | None = None,
) -> Call[list[Leased]]:
    """``POST …/dequeue``: lease up to ``count`` messages, long-polling ``wait_seconds``."""
    body = _given(
        count=count,
        wait_seconds=wait_seconds,
        lease_seconds=lease_seconds,
        metadata=_dequeue_filter(metadata),
    )
    decode = decoder(list[Leased], "messages")
    return Call("POST", f"{_queue(queue)}/dequeue", decode, body, wait_seconds=wait_seconds)


def dequeue_many(
    queues: Sequence[str],
    count: int = 1,
    *,
    wait_seconds: int = 0,
    lease_seconds: int | None = None,
    metadata: DequeueFilter | None = None,
) -> Call[list[LeasedFrom]]:
    """``POST /v1/namespaces/{ns}/dequeue``: lease up to ``count`` messages from ``queues``
    (``"namespace/queue"``, all of one namespace), the first queue's first, long-polling
    ``wait_seconds``; each leased message's ``queue`` is ``"namespace/queue"``."""
    names = [split_queue(queue) for queue in queues]
    namespaces = {namespace for namespace, _ in names}
    if len(namespaces) != 1:
        raise ValueError(f"queues must be of one namespace, got {sorted(namespaces)}")
    (namespace,) = namespaces
    body = _given(
        queues=[name for _, name in names],
        count=count,
        wait_seconds=wait_seconds,
        lease_seconds=lease_seconds,
        metadata=_dequeue_filter(metadata),
    )
    leased = decoder(list[LeasedFrom], "messages")

    def decode(content: bytes) -> list[LeasedFrom]:
        # The server names each message's queue within the namespace; the client's methods
        # take "namespace/queue".
        return [msgspec.structs.replace(m, queue=f"{namespace}/{m.queue}") for m in leased(content)]

    path = f"{namespace_path(namespace)}/dequeue"
    return Call("POST", path, decode, body, wait_seconds=wait_seconds)


def lease_message(queue: str, message_id: str, *, lease_seconds: int | None = None) -> Call[Leased]:
    """``POST …/messages/{id}/lease``: lease this message as a dequeue would, if it is ready
    (not safe to repeat: a repeat after a lost answer is refused, the message then running)."""
    body = _given(lease_seconds=lease_seconds)
    return Call("POST", f"{_message(queue, message_id)}/lease", decoder(Leased), body)


def get_message(queue: str, message_id: str) -> Call[Message]:
    """``GET …/messages/{id}``."""
    return Call("GET", _message(queue, message_id), _MESSAGE, safe=True)


def update_message(queue: str, message_id: str, changes: Mapping[str, Any]) -> Call[Message]:
    """``PATCH …/messages/{id}`` (only while invisible or pending)."""
    return Call("PATCH", _message(queue, message_id), _MESSAGE, dict(changes), safe=True)


def delete_message(queue: str, message_id: str) -> Call[None]:
    """``DELETE …/messages/{id}``."""
    return Call("DELETE", _message(queue, message_id), nothing, safe=True)


def complete(queue: str, message_id: str, lease_id: str) -> Call[Message]:
    """``POST …/messages/{id}/complete``. Safe to repeat: a complete repeated with the lease
    that completed the message answers 200 again (docs/api.md, Idempotency)."""
    path = f"{_message(queue, message_id)}/complete"
    return Call("POST", path, _MESSAGE, {"lease_id": lease_id}, safe=True)


def fail(
    queue: str,
    message_id: str,
    lease_id: str,
    error: str | None = None,
    retry_delay_seconds: int | None = None,
) -> Call[Message]:
    """``POST …/messages/{id}/fail``."""
    body = _given(lease_id=lease_id, error=error, retry_delay_seconds=retry_delay_seconds)
    return Call("POST", f"{_message(queue, message_id)}/fail", _MESSAGE, body)


def extend(queue: str, message_id: str, lease_id: str, lease_seconds: int) -> Call[Message]:
    """``POST …/messages/{id}/extend``: the lease now ends ``lease_seconds`` from now."""
    body = {"lease_id": lease_id, "lease_seconds": lease_seconds}
    return Call("POST", f"{_message(queue, message_id)}/extend", _MESSAGE, body, safe=True)


def cancel(
    queue: str,
    message_id: str,
    *,
    lease_id: str | None = None,
    force: bool = False,
    reason: str | None = None,
) -> Call[Message]:
    """``POST …/messages/{id}/cancel``."""
    body = _given(lease_id=lease_id, force=force or None, reason=reason)
    return Call("POST", f"{_message(queue, message_id)}/cancel", _MESSAGE, body)


def requeue(
    queue: str,
    message_id: str,
    delay_seconds: int = 0,
    *,
    ttl_seconds: int | None = None,
    expires_at: datetime | None = None,
) -> Call[Message]:
    """``POST …/messages/{id}/requeue`` (errored or canceled only); it expires ``ttl_seconds``
    after the requeue or at ``expires_at`` (neither: never)."""
    body = {
        "delay_seconds": delay_seconds,
        **_given(ttl_seconds=ttl_seconds, expires_at=expires_at),
    }
    return Call("POST", f"{_message(queue, message_id)}/requeue", _MESSAGE, body)


def ack(
    queue: str,
    complete: Iterable[tuple[str, str]] = (),
    fail: Iterable[tuple[str, str, str | None]] = (),
) -> Call[list[AckResult]]:
    """``POST …/ack``: complete ``(id, lease_id)`` and fail ``(id, lease_id, error)`` items.
    Safe to repeat when it only completes (a fail's repeat would be refused)."""
    body = {
        "complete": [{"id": i, "lease_id": lease} for i, lease in complete],
        "fail": [_given(id=i, lease_id=lease, error=error) for i, lease, error in fail],
    }
    decode = decoder(list[AckResult], "results")
    return Call("POST", f"{_queue(queue)}/ack", decode, body, safe=not body["fail"])


def ack_and_dequeue(
    queue: str,
    complete: Iterable[tuple[str, str]] = (),
    fail: Iterable[tuple[str, str, str | None]] = (),
    *,
    count: int = 1,
    wait_seconds: int = 0,
    lease_seconds: int | None = None,
    metadata: DequeueFilter | None = None,
) -> Call[Acknowledged]:
    """``POST …/ack`` with ``dequeue``: acknowledge, then lease up to ``count`` messages (one
    transaction on a simple queue), long-polling ``wait_seconds`` if none is ready. Like a
    dequeue, never safe to repeat."""
    body: dict[str, Any] = ack(queue, complete, fail).body
    body["dequeue"] = _given(
        count=count,
        wait_seconds=wait_seconds,
        lease_seconds=lease_seconds,
        metadata=_dequeue_filter(metadata),
    )
    decode = decoder(Acknowledged)
    return Call("POST", f"{_queue(queue)}/ack", decode, body, wait_seconds=wait_seconds)


def query_messages(
    queue: str,
    *,
    states: Iterable[str] = (),
    metadata: Mapping[str, str] | None = None,
    priority_lt: int | None = None,
    priority_gte: int | None = None,
    order: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[MessagePage]:
    """``GET …/messages``: one page of a filtered listing."""
    params = [("state", state) for state in states]
    params += [(f"metadata.{key}", value) for key, value in (metadata or {}).items()]
    given = _given(
        priority_lt=priority_lt,
        priority_gte=priority_gte,
        order=order,
        limit=limit,
        cursor=cursor,
    )
    params += [(key, str(value)) for key, value in given.items()]
    decode = decoder(MessagePage)
    return Call("GET", f"{_queue(queue)}/messages", decode, params=params, safe=True)


def requeue_dead_letters(
    queue: str,
    states: Iterable[str] = ("errored",),
    ids: Iterable[str] | None = None,
    limit: int | None = None,
    *,
    delay_seconds: int | None = None,
    ttl_seconds: int | None = None,
    expires_at: datetime | None = None,
) -> Call[int]:
    """``POST …/requeue``: send up to ``limit`` dead letters back, oldest finished first, with
    a new TTL or expiry (neither: never expiring); the number requeued."""
    body = _given(
        states=list(states),
        ids=None if ids is None else list(ids),
        limit=limit,
        delay_seconds=delay_seconds,
        ttl_seconds=ttl_seconds,
        expires_at=expires_at,
    )
    return Call("POST", f"{_queue(queue)}/requeue", decoder(int, "requeued"), body)


def delete_dead_letters(
    queue: str,
    states: Iterable[str] = ("errored",),
    ids: Iterable[str] | None = None,
    limit: int | None = None,
) -> Call[int]:
    """``POST …/dead-letters/delete``: delete up to ``limit`` dead letters (default 1000),
    oldest finished first; the number deleted."""
    body = _given(states=list(states), ids=None if ids is None else list(ids), limit=limit)
    # Not safe: a repeat would delete the next ones.
    return Call("POST", f"{_queue(queue)}/dead-letters/delete", decoder(int, "deleted"), body)
