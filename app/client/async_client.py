"""A Sundial client, one method per endpoint of API v1.

Queues are named ``"namespace/queue"``. Connections are pooled and reused (one httpx client);
close the client, or use it as a context manager, when done. Failed requests are retried by
:mod:`app.client.retry`'s rules.

``async_client.py`` (:class:`AsyncClient`, for asyncio) is the source. ``sync_client.py``
(:class:`Client`, blocking) is generated from it by ``scripts/generate_sync_client.py``
(unasync: ``async``/``await`` removed, a few names swapped): edit the asyncio one, then run it.

One module though over 400 lines: one class whose methods each send one call built by
:mod:`app.client.calls`, and the single input the generator turns into the blocking client.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
from msgspec import UNSET

from app.client import calls, periodic, reply, topics
from app.client.calls import Call, DequeueFilter
from app.client.errors import CallTimeout, InvalidState, LeaseMismatch, NotFound
from app.client.http import (
    DEFAULT_TIMEOUT,
    auth_headers,
    read_answer,
    request_arguments,
)
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
from app.client.periodic import PeriodicJob
from app.client.retry import RetryPolicy
from app.client.servers import AsyncFailoverTransport, Servers, server_urls
from app.client.topics import Published, Topic

T = TypeVar("T")


class AsyncClient:
    """A Sundial client (:class:`~app.client.AsyncClient` awaits, :class:`~app.client.Client`
    blocks; their methods are the same).

    Args:
        url: the server's root URL, or several servers' (a list, or comma-separated: requests
            move to the next server when one fails in transit, :mod:`app.client.servers`);
            default ``$SUNDIAL_URL`` or ``http://127.0.0.1:8080``.
        token: a namespace or admin token; default ``$SUNDIAL_TOKEN``.
        timeout: seconds to wait for an answer (long polls get their wait on top).
        retry: the retry policy (``RetryPolicy(attempts=1)`` never retries).
        transport: an httpx transport, e.g. for tests or a proxy.
    """

    def __init__(
        self,
        url: str | Sequence[str] | None = None,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._timeout = timeout
        self._retry = retry or RetryPolicy()
        urls = server_urls(url)
        self._servers = Servers(urls)
        if len(urls) > 1:
            transport = AsyncFailoverTransport(self._servers, transport)
        self._http = httpx.AsyncClient(
            base_url=urls[0], headers=auth_headers(token), transport=transport
        )
        self._reply_queues: set[str] = set()

    @property
    def url(self) -> str:
        """The root URL of the server requests go to now."""
        return str(self._servers.current)

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def send(self, call: Call[T]) -> T:
        """Send one call (retried if its failure allows) and return its decoded answer."""
        async for attempt in self._retry.asynchronous(call.safe):
            with attempt:
                response = await self._http.request(**request_arguments(call, self._timeout))
                return read_answer(call, response)
        raise AssertionError("unreachable: tenacity re-raises the last error")

    # --- operations ------------------------------------------------------------------------------

    async def health(self) -> Health:
        """``GET /healthz``: the server process is up."""
        return await self.send(calls.health())

    async def ready(self) -> Health:
        """``GET /readyz``: the database is reachable and migrated (else Unavailable)."""
        return await self.send(calls.ready())

    async def metrics(self) -> str:
        """``GET /metrics``: Prometheus metrics (text format) of the worker that answers."""
        return await self.send(calls.metrics())

    async def schema(self) -> dict[str, Any]:
        """``GET /schema``: the server's OpenAPI document."""
        return await self.send(calls.schema())

    # --- admin plane (admin token) ---------------------------------------------------------------

    async def create_namespace(self, name: str, description: str = "") -> Namespace:
        """Create a namespace (Conflict if it exists)."""
        return await self.send(calls.create_namespace(name, description))

    async def list_namespaces(self) -> list[Namespace]:
        """All namespaces."""
        return await self.send(calls.list_namespaces())

    async def delete_namespace(self, name: str) -> None:
        """Delete a namespace with its queues and messages."""
        await self.send(calls.delete_namespace(name))

    async def issue_token(
        self,
        namespace: str,
        label: str = "",
        expires_at: datetime | None = None,
        *,
        kind: str = "bearer",
        read_rate: float | None = None,
        write_rate: float | None = None,
    ) -> IssuedToken:
        """Issue a namespace token, or with ``kind="sqs"`` an SQS access key (``.access_key_id``),
        with its own rate limits if given (requests per second of reads, of writes); its secret
        (``.token``: the bearer token, or the secret access key) is shown only now."""
        call = calls.issue_token(
            namespace, label, expires_at, kind=kind, read_rate=read_rate, write_rate=write_rate
        )
        return await self.send(call)

    async def set_token_limits(
        self, namespace: str, token_id: str, **limits: float | None
    ) -> Token:
        """Change a token's rate limits: ``read_rate=``, ``write_rate=`` (requests per second;
        None: no limit); those not given stay. Applies to the token's next request everywhere."""
        return await self.send(calls.set_token_limits(namespace, token_id, limits))

    async def list_tokens(self, namespace: str) -> list[Token]:
        """A namespace's tokens, without secrets."""
        return await self.send(calls.list_tokens(namespace))

    async def revoke_token(self, namespace: str, token_id: str) -> None:
        """Revoke a token (or an SQS access key) at once."""
        await self.send(calls.revoke_token(namespace, token_id))

    # --- queues ----------------------------------------------------------------------------------

    async def put_queue(self, queue: str, **config: Any) -> Queue:
        """Create ``queue`` or set its whole configuration (absent fields take defaults)."""
        return await self.send(calls.put_queue(queue, config))

    async def list_queues(self, namespace: str) -> list[Queue]:
        """A namespace's queues, with message counts per state."""
        return await self.send(calls.list_queues(namespace))

    async def get_queue(self, queue: str) -> Queue:
        """A queue's configuration, counts and oldest pending age."""
        return await self.send(calls.get_queue(queue))

    async def update_queue(self, queue: str, **changes: Any) -> Queue:
        """Change some of a queue's configuration (e.g. ``dequeue_paused=True``)."""
        return await self.send(calls.update_queue(queue, changes))

    async def delete_queue(self, queue: str) -> None:
        """Delete a queue and its messages."""
        await self.send(calls.delete_queue(queue))

    async def purge(self, queue: str, states: Iterable[str] | None = None) -> int:
        """Delete a queue's messages (in ``states``, or all); how many were deleted."""
        return await self.send(calls.purge(queue, states))

    # --- topics (fan-out) -------------------------------------------------------------------------

    async def put_topic(
        self, topic: str, subscriptions: Iterable[topics.SubscriptionSpec]
    ) -> Topic:
        """Create ``topic`` (``"namespace/name"``) or bring it to exactly these subscriptions:
        queue names, or ``(queue, tag_key, tags)`` for a queue that takes only the messages
        whose ``metadata[tag_key]`` is one of ``tags``."""
        return await self.send(topics.put_topic(topic, subscriptions))

    async def list_topics(self, namespace: str) -> list[Topic]:
        """A namespace's topics, each with its subscriptions."""
        return await self.send(topics.list_topics(namespace))

    async def get_topic(self, topic: str) -> Topic:
        """A topic and its subscriptions."""
        return await self.send(topics.get_topic(topic))

    async def delete_topic(self, topic: str) -> None:
        """Delete a topic and its subscriptions (the queues stay)."""
        await self.send(topics.delete_topic(topic))

    async def subscribe(
        self,
        topic: str,
        queue: str,
        *,
        tag_key: str | None = None,
        tags: Sequence[str] | None = None,
    ) -> Topic:
        """Subscribe ``queue`` (a queue name of the topic's namespace) to ``topic``, creating
        the topic if need be, or set its tag filter."""
        return await self.send(topics.subscribe(topic, queue, tag_key, tags))

    async def unsubscribe(self, topic: str, queue: str) -> None:
        """Unsubscribe ``queue``: publishes answered after this no longer reach it."""
        await self.send(topics.unsubscribe(topic, queue))

    async def publish(self, topic: str, messages: Iterable[NewMessage]) -> list[Published]:
        """Publish 1 to 1000 messages: each goes into every subscribed queue whose filter
        accepts it, all in one transaction (one refusing queue refuses the whole publish). A
        message keeps one id in every queue, so a retried publish creates nothing twice."""
        return await self.send(topics.publish(topic, messages))

    # --- periodic (cron) jobs ---------------------------------------------------------------------

    async def put_periodic(
        self,
        job: str,
        *,
        queue: str,
        schedule: str,
        timezone: str = "UTC",
        payload: Any = UNSET,
        metadata: Mapping[str, str] | None = None,
        priority: int | None = None,
        ttl_seconds: int | None = None,
        max_attempts: int | None = None,
        lease_seconds: int | None = None,
        paused: bool = False,
    ) -> PeriodicJob:
        """Create the periodic job ``job`` (``"namespace/name"``) or set its whole definition:
        at every tick of ``schedule`` (5-field cron or ``@hourly``/``@daily``/…, read in
        ``timezone``) it enqueues a message with these fields into ``queue`` (of its
        namespace)."""
        definition: dict[str, Any] = {
            "queue": queue,
            "schedule": schedule,
            "timezone": timezone,
            "metadata": dict(metadata or {}),
            "priority": priority,
            "ttl_seconds": ttl_seconds,
            "max_attempts": max_attempts,
            "lease_seconds": lease_seconds,
            "paused": paused,
        }
        if payload is not UNSET:
            definition["payload"] = payload
        return await self.send(periodic.put_periodic(job, definition))

    async def list_periodic(self, namespace: str, queue: str | None = None) -> list[PeriodicJob]:
        """A namespace's periodic jobs (only those of ``queue``, when given)."""
        return await self.send(periodic.list_periodic(namespace, queue))

    async def get_periodic(self, job: str) -> PeriodicJob:
        """A periodic job, with its next and last run."""
        return await self.send(periodic.get_periodic(job))

    async def update_periodic(self, job: str, **changes: Any) -> PeriodicJob:
        """Change some fields of a periodic job (e.g. ``paused=True``, ``schedule="@daily"``)."""
        return await self.send(periodic.update_periodic(job, changes))

    async def delete_periodic(self, job: str) -> None:
        """Delete a periodic job (the messages it enqueued stay)."""
        await self.send(periodic.delete_periodic(job))

    async def trigger_periodic(self, job: str) -> str:
        """Enqueue the job's message now, once; the id of that message."""
        return await self.send(periodic.trigger_periodic(job))

    # --- producing -------------------------------------------------------------------------------

    async def enqueue(
        self,
        queue: str,
        payload: Any = UNSET,
        *,
        id: str | None = None,
        priority: int | None = None,
        metadata: Mapping[str, str] | None = None,
        delay_seconds: int | None = None,
        visible_at: datetime | None = None,
        max_attempts: int | None = None,
        lease_seconds: int | None = None,
        ttl_seconds: int | None = None,
        expires_at: datetime | None = None,
        on_conflict: str | None = None,
        create_queue: bool = False,
    ) -> Enqueued:
        """Enqueue one message. With an ``id`` it is idempotent (and retried on failure).
        ``on_conflict="replace"``: if the id is taken by a message still waiting (invisible or
        pending), that message becomes this one (``replaced`` says so; a running or finished
        one is left alone). ``create_queue``: make the queue, with the default configuration,
        if it does not exist."""
        message = NewMessage(
            id=id,
            payload=payload,
            priority=priority,
            metadata=None if metadata is None else dict(metadata),
            delay_seconds=delay_seconds,
            visible_at=visible_at,
            max_attempts=max_attempts,
            lease_seconds=lease_seconds,
            ttl_seconds=ttl_seconds,
            expires_at=expires_at,
        )
        call = calls.enqueue(queue, [message], on_conflict=on_conflict, create_queue=create_queue)
        [outcome] = await self.send(call)
        return outcome

    async def enqueue_many(
        self,
        queue: str,
        messages: Iterable[NewMessage],
        *,
        on_conflict: str | None = None,
        create_queue: bool = False,
    ) -> list[Enqueued]:
        """Enqueue 1 to 1000 messages, all or nothing; the outcomes in order
        (``on_conflict`` and ``create_queue`` as for :meth:`enqueue`)."""
        call = calls.enqueue(queue, messages, on_conflict=on_conflict, create_queue=create_queue)
        return await self.send(call)

    async def lease_message(
        self, queue: str, message_id: str, *, lease_seconds: int | None = None
    ) -> Leased:
        """Lease this message as a dequeue would, if it is ready: pending, or delayed and due,
        not expired, and in an exclusive queue no message of its value running (else
        InvalidState; QueuePaused while the queue is dequeue-paused)."""
        return await self.send(calls.lease_message(queue, message_id, lease_seconds=lease_seconds))

    # --- consuming -------------------------------------------------------------------------------

    async def dequeue(
        self,
        queue: str,
        count: int = 1,
        *,
        wait_seconds: int = 0,
        lease_seconds: int | None = None,
        metadata: DequeueFilter | None = None,
    ) -> list[Leased]:
        """Lease up to ``count`` messages, waiting up to ``wait_seconds`` (≤ 20) for one."""
        call = calls.dequeue(
            queue, count, wait_seconds=wait_seconds, lease_seconds=lease_seconds, metadata=metadata
        )
        return await self.send(call)

    async def dequeue_many(
        self,
        queues: Sequence[str],
        count: int = 1,
        *,
        wait_seconds: int = 0,
        lease_seconds: int | None = None,
        metadata: DequeueFilter | None = None,
    ) -> list[LeasedFrom]:
        """Lease up to ``count`` messages from several queues of one namespace
        (``["shop/urgent", "shop/bulk"]``), in their order: the first queue's first, the rest
        from the next ones; waiting up to ``wait_seconds`` (≤ 20) for one in any of them. Each
        message's ``queue`` says where to complete it."""
        call = calls.dequeue_many(
            queues, count, wait_seconds=wait_seconds, lease_seconds=lease_seconds, metadata=metadata
        )
        return await self.send(call)

    async def complete(self, queue: str, message_id: str, lease_id: str) -> Message:
        """Complete a leased message (LeaseMismatch if the lease is not current)."""
        return await self.send(calls.complete(queue, message_id, lease_id))

    async def fail(
        self,
        queue: str,
        message_id: str,
        lease_id: str,
        error: str | None = None,
        retry_delay_seconds: int | None = None,
    ) -> Message:
        """Fail an attempt: retried after the retry delay while attempts remain, else errored."""
        return await self.send(calls.fail(queue, message_id, lease_id, error, retry_delay_seconds))

    async def extend(
        self, queue: str, message_id: str, lease_id: str, lease_seconds: int
    ) -> Message:
        """Heartbeat: the lease now ends ``lease_seconds`` from now."""
        return await self.send(calls.extend(queue, message_id, lease_id, lease_seconds))

    async def ack(
        self,
        queue: str,
        complete: Iterable[tuple[str, str]] = (),
        fail: Iterable[tuple[str, str, str | None]] = (),
    ) -> list[AckResult]:
        """Complete ``(id, lease_id)`` and fail ``(id, lease_id, error)`` items, each on its own."""
        return await self.send(calls.ack(queue, complete, fail))

    async def ack_and_dequeue(
        self,
        queue: str,
        complete: Iterable[tuple[str, str]] = (),
        fail: Iterable[tuple[str, str, str | None]] = (),
        *,
        count: int = 1,
        wait_seconds: int = 0,
        lease_seconds: int | None = None,
        metadata: DequeueFilter | None = None,
    ) -> Acknowledged:
        """Acknowledge as :meth:`ack` does, then lease up to ``count`` messages, waiting up to
        ``wait_seconds`` for one: a worker's cycle in one request (never retried)."""
        call = calls.ack_and_dequeue(
            queue,
            complete,
            fail,
            count=count,
            wait_seconds=wait_seconds,
            lease_seconds=lease_seconds,
            metadata=metadata,
        )
        return await self.send(call)

    # --- managing messages -----------------------------------------------------------------------

    async def get_message(self, queue: str, message_id: str) -> Message:
        """One message, in any state."""
        return await self.send(calls.get_message(queue, message_id))

    async def update_message(self, queue: str, message_id: str, **changes: Any) -> Message:
        """Change ``priority``, ``payload``, ``metadata`` or ``visible_at`` of a waiting message."""
        return await self.send(calls.update_message(queue, message_id, changes))

    async def delete_message(self, queue: str, message_id: str) -> None:
        """Remove a message in any state."""
        await self.send(calls.delete_message(queue, message_id))

    async def cancel(
        self,
        queue: str,
        message_id: str,
        *,
        lease_id: str | None = None,
        force: bool = False,
        reason: str | None = None,
    ) -> Message:
        """Cancel a live message; a running one needs its ``lease_id`` or ``force``."""
        return await self.send(
            calls.cancel(queue, message_id, lease_id=lease_id, force=force, reason=reason)
        )

    async def requeue(
        self,
        queue: str,
        message_id: str,
        delay_seconds: int = 0,
        *,
        ttl_seconds: int | None = None,
        expires_at: datetime | None = None,
    ) -> Message:
        """Send a dead letter back (attempts reset), visible after ``delay_seconds``; it
        expires ``ttl_seconds`` after the requeue or at ``expires_at`` (neither: never)."""
        call = calls.requeue(
            queue, message_id, delay_seconds, ttl_seconds=ttl_seconds, expires_at=expires_at
        )
        return await self.send(call)

    async def requeue_dead_letters(
        self,
        queue: str,
        states: Iterable[str] = ("errored",),
        ids: Iterable[str] | None = None,
        limit: int | None = None,
        *,
        delay_seconds: int | None = None,
        ttl_seconds: int | None = None,
        expires_at: datetime | None = None,
    ) -> int:
        """Send up to ``limit`` dead letters back (default 1000), oldest finished first, as
        :meth:`requeue` does one; how many were requeued."""
        call = calls.requeue_dead_letters(
            queue,
            states,
            ids,
            limit,
            delay_seconds=delay_seconds,
            ttl_seconds=ttl_seconds,
            expires_at=expires_at,
        )
        return await self.send(call)

    async def delete_dead_letters(
        self,
        queue: str,
        states: Iterable[str] = ("errored",),
        ids: Iterable[str] | None = None,
        limit: int | None = None,
    ) -> int:
        """Delete up to ``limit`` dead letters (default 1000), oldest finished first: the ones
        :meth:`requeue_dead_letters` would take; how many were deleted."""
        return await self.send(calls.delete_dead_letters(queue, states, ids, limit))

    async def query_messages(
        self,
        queue: str,
        *,
        states: Iterable[str] = (),
        metadata: Mapping[str, str] | None = None,
        priority_lt: int | None = None,
        priority_gte: int | None = None,
        order: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> MessagePage:
        """One page of messages matching the filters (see :meth:`messages` for all pages)."""
        call = calls.query_messages(
            queue,
            states=states,
            metadata=metadata,
            priority_lt=priority_lt,
            priority_gte=priority_gte,
            order=order,
            limit=limit,
            cursor=cursor,
        )
        return await self.send(call)

    async def messages(
        self,
        queue: str,
        *,
        states: Iterable[str] = (),
        metadata: Mapping[str, str] | None = None,
        order: str | None = None,
        page_size: int = 100,
    ) -> AsyncIterator[Message]:
        """Every message matching the filters, fetched a page at a time."""
        states, cursor = list(states), None
        while True:
            page = await self.query_messages(
                queue,
                states=states,
                metadata=metadata,
                order=order,
                limit=page_size,
                cursor=cursor,
            )
            for message in page.messages:
                yield message
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    # --- sync reply pattern ----------------------------------------------------------------------

    async def call(
        self,
        queue: str,
        payload: Any = None,
        *,
        timeout: float = 30.0,  # noqa: ASYNC109 - a deadline for the reply, not an I/O timeout
        metadata: dict[str, str] | None = None,
    ) -> Any:
        """Enqueue a request to ``queue`` and wait for the value its worker's handler returns.

        Raises:
            CallTimeout: no reply within ``timeout`` seconds (a request not yet leased by then
                expires and is never run; one being run may still complete).
            CallFailed: the request failed on its last attempt (the handler's error).
        """
        deadline = time.monotonic() + timeout
        replies = reply.reply_queue(queue)
        await self._ensure_reply_queue(replies)
        request = reply.request_message(queue, payload, timeout, metadata)
        assert request.id is not None
        await self.enqueue_many(queue, [request])
        while (remaining := deadline - time.monotonic()) > 0:
            wait = min(calls.MAX_WAIT_SECONDS, math.ceil(remaining))
            got = await self.dequeue(
                replies, wait_seconds=wait, metadata=reply.reply_filter(request.id)
            )
            if got:
                await self.complete(replies, got[0].id, got[0].lease_id)
                return reply.reply_result(got[0])
        await self._abandon(queue, request.id)
        raise CallTimeout(f"no reply to {request.id} within {timeout} s")

    async def _ensure_reply_queue(self, replies: str) -> None:
        if replies in self._reply_queues:
            return
        try:
            await self.get_queue(replies)
        except NotFound:
            await self.put_queue(replies, **reply.REPLY_QUEUE_CONFIG)
        self._reply_queues.add(replies)

    async def _abandon(self, queue: str, request_id: str) -> None:
        """Cancel a timed-out request that nobody has leased yet."""
        with contextlib.suppress(InvalidState, LeaseMismatch, NotFound):
            await self.cancel(queue, request_id, reason="caller timed out")
