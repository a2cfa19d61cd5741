"""The worker loop: lease messages in batches, run a handler on each with bounded concurrency,
heartbeat while it holds them, complete or fail them, and shut down gracefully.

::

    ┌──────────── a turn (up to four on their way), while not stopping ─────────────┐
    │ handlers returned since the last turn? ── POST …/ack {complete: [those],        │
    │                                            dequeue: {count: what is wanted}}   │
    │ none? ── POST …/dequeue {count: what is wanted, wait_seconds: 20 if idle}       │
    └─────────────┬──────────────────────────────────────────────────────────────────┘
                  └──► each leased message: handler(message) as soon as a handler is free
                       (a task on the loop; a thread for a sync handler), its lease extended
                       every third of it while the worker holds it;
                       returns ──► completed in the next turn's acknowledgement
                       raises  ──► fail (its own request, with the handler's error)

A busy worker thus sends one request per turn for all the messages that finished since the last,
and leases their successors in the same request (one transaction on the server). What a turn
asks for is :mod:`app.client.lease_ahead`'s; the turns themselves are :mod:`app.client.turns`;
the messages held, with their heartbeats, :mod:`app.client.held`; what the worker tells the
server about each message, :mod:`app.client.outcomes`.

At-least-once: a message is acknowledged only after its handler returned; if the worker dies
before the acknowledgement is answered, the lease expires and the message is delivered again.

stop() / SIGTERM: stop leasing; give back at once what was leased ahead and not started; wait up
to shutdown_timeout for running handlers; release (fail with retry delay 0) what is still
running; a second signal releases at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import logging
import signal
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, fields
from typing import Any

from app.client.async_client import AsyncClient
from app.client.calls import MAX_WAIT_SECONDS, DequeueFilter
from app.client.held import Held, Holdings
from app.client.lease_ahead import LeaseAhead
from app.client.models import Leased
from app.client.outcomes import Outcomes
from app.client.turns import Turns

log = logging.getLogger("sundial.worker")

Handler = Callable[[Leased], Any]
"""Takes the leased message; returns (or, if async, resolves to) the reply, if any."""

DEFAULT_PREFETCH = 300
"""Most messages a worker leases ahead of free handlers unless told (three full requests'
worth: only handlers that finish faster than a round trip ever get that far). A drain is bound
by the messages on their way over the time an answer takes; with no-op handlers 300 drained
about a third faster than 100 (bench `worker`)."""


@dataclass(frozen=True)
class WorkerStats:
    """What a worker has done so far."""

    leased: int = 0
    completed: int = 0
    failed: int = 0
    """Attempts failed (on the server) because the handler raised."""
    released: int = 0
    """Messages given back at shutdown, their handler unfinished."""
    lost: int = 0
    """Results refused because the lease was no longer the message's (it expired)."""
    heartbeats: int = 0
    running: int = 0
    """Handlers running now."""


class Worker(Turns):
    """Consumes a queue, or several of one namespace, with a handler.

    Args:
        queue: ``"namespace/queue"``, or a list of queues of one namespace, consumed in their
            order: the first's messages first, the next one's when the first has none ready
            (:meth:`~app.client.Client.dequeue_many`). Each message is completed, failed and
            extended on the queue it came from.
        handler: a function or coroutine function taking a :class:`~app.client.models.Leased`
            message. Returning completes the message (the value is the reply to a
            :meth:`~app.client.Client.call`); raising fails the attempt with the exception's
            text (raise :class:`Retry` to choose the retry delay). A coroutine function runs on
            the worker's event loop; a plain function runs in a thread pool.
        client: the client to use (the caller closes it); default a new :class:`AsyncClient`
            for ``url`` and ``token`` (default ``$SUNDIAL_URL``, ``$SUNDIAL_TOKEN``).
        concurrency: handlers running at once (sync handlers run in a thread pool that size).
        batch_size: most messages leased per request (default: the free slots, ≤ 100).
        wait_seconds: long-poll wait per dequeue (≤ 20).
        lease_seconds: the lease each dequeue asks for; default the queue's (of several, the
            shortest). Heartbeats extend it every third of it.
        metadata: only lease messages whose metadata has all these pairs (a list of values:
            any of them).
        shutdown_timeout: seconds running handlers get to finish after stop() before their
            messages are released.
        burst: stop once nothing is ready and no handler is running (for scripts and tests).
        prefetch: most messages leased ahead of free handlers (default 300).
            The worker leases ahead only as far as its handlers go idle waiting for the next
            answer: fast handlers then never wait for a round trip, and nothing is leased ahead
            of slow ones. A message leased ahead holds its lease (with heartbeats) and counts an
            attempt, like any lease; ``prefetch=0`` leases only for free handlers.
    """

    def __init__(
        self,
        queue: str | Sequence[str],
        handler: Handler,
        *,
        client: AsyncClient | None = None,
        url: str | None = None,
        token: str | None = None,
        concurrency: int = 1,
        batch_size: int | None = None,
        wait_seconds: int = MAX_WAIT_SECONDS,
        lease_seconds: int | None = None,
        metadata: DequeueFilter | None = None,
        shutdown_timeout: float = 30.0,
        burst: bool = False,
        prefetch: int | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.queues = [queue] if isinstance(queue, str) else list(queue)
        if not self.queues:
            raise ValueError("a worker needs at least one queue")
        self.handler = handler
        self.concurrency = concurrency
        self.batch_size = min(batch_size or 100, 100)
        self.wait_seconds = max(0, min(wait_seconds, MAX_WAIT_SECONDS))
        self.lease_seconds = lease_seconds
        self.metadata = metadata
        self.shutdown_timeout = shutdown_timeout
        self.burst = burst
        self.prefetch = DEFAULT_PREFETCH if prefetch is None else max(0, prefetch)
        self._lease_ahead = LeaseAhead(concurrency, self.prefetch)
        self._client = client
        self._url, self._token = url, token
        self._owns_client = client is None
        self._counts = dict.fromkeys((f.name for f in fields(WorkerStats)), 0)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = asyncio.Event()
        self._changed = asyncio.Event()
        """Set on every change of the stats or of the running set (for wait_for)."""
        self._turn = asyncio.Event()
        """Set when the loop may have something to do: a handler ended, or stop()."""
        self._stop_requests = 0
        self._finished: list[Leased] = []
        """Messages whose handler returned, their completion not yet sent."""
        self._init_turns()
        self._background: set[asyncio.Task[None]] = set()
        """Failures, releases, replies, heartbeats and lone acknowledgements on their way."""
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._held = Holdings(self._queue_of, self._spawn, self._count)
        self._is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            getattr(handler, "__call__", None)  # noqa: B004 - an async callable object
        )

    def __str__(self) -> str:
        return ", ".join(self.queues)

    # --- control ---------------------------------------------------------------------------------

    @property
    def stats(self) -> WorkerStats:
        """A snapshot of the counters."""
        return WorkerStats(**{**self._counts, "running": len(self._held.running)})

    def stop(self) -> None:
        """Stop leasing and shut down gracefully; a second call releases running messages at
        once. Safe to call from a signal handler or another thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self._stopping.set()
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._request_stop()
        else:
            loop.call_soon_threadsafe(self._request_stop)

    def _request_stop(self) -> None:
        self._stop_requests += 1
        self._stopping.set()
        self._turn.set()
        if self._stop_requests > 1:
            running = self._held.running
            log.warning("second stop request: releasing %d running messages", len(running))
            for work in list(running):
                work.cancel()

    async def wait_for(
        self,
        predicate: Callable[[WorkerStats], bool],
        timeout: float | None = None,  # noqa: ASYNC109 - applied with asyncio.timeout
    ) -> WorkerStats:
        """Wait until ``predicate(stats)`` holds (from a task in the worker's event loop)."""
        async with asyncio.timeout(timeout):
            while not predicate(self.stats):
                self._changed.clear()
                await self._changed.wait()
        return self.stats

    def run(self, *, handle_signals: bool = True) -> WorkerStats:
        """Run until stopped (by SIGTERM or SIGINT when ``handle_signals``) in a new event loop."""
        return asyncio.run(self._run_with_signals(handle_signals))

    async def _run_with_signals(self, handle_signals: bool) -> WorkerStats:
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT) if handle_signals else ()
        for signum in signals:
            loop.add_signal_handler(signum, self.stop)
        try:
            return await self.run_async()
        finally:
            for signum in signals:
                loop.remove_signal_handler(signum)

    # --- the loop --------------------------------------------------------------------------------

    async def run_async(self) -> WorkerStats:
        """Run in the current event loop until :meth:`stop` (or, in burst mode, until idle).

        Raises:
            ApiError: the server refused to go on leasing (the queue was deleted, the token
                revoked): raised once the running handlers have finished, as after stop().
        """
        self._loop = asyncio.get_running_loop()
        client = self._client or AsyncClient(self._url, self._token)
        self._outcomes = Outcomes(client, self._queue_of, self._count)
        if not self._is_async:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                self.concurrency, thread_name_prefix="sundial-handler"
            )
        try:
            lease = self.lease_seconds or min(
                [(await client.get_queue(queue)).lease_seconds for queue in self.queues]
            )
            self._lease = lease
            self._held.attach(client, lease)
            log.info("worker on %s: concurrency %d, lease %d s", self, self.concurrency, lease)
            await self._lease_loop(client)
            await self._drain(client)
            if self._fatal is not None:
                raise self._fatal
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)
            if self._owns_client:
                await client.aclose()
        log.info("worker on %s stopped: %s", self, self.stats)
        return self.stats

    async def _drain(self, client: AsyncClient) -> None:
        while self._held.waiting:  # leased ahead, never started: given back at once
            self._release(self._held.waiting.popleft())
        running = self._held.running
        if running:
            log.info(
                "stopping: waiting up to %.0f s for %d handlers",
                self.shutdown_timeout,
                len(running),
            )
            _, late = await asyncio.wait(set(running), timeout=self.shutdown_timeout)
            for work in late:
                work.cancel()  # released by _ended
            if late:
                await asyncio.wait(late)
        while acks := self._take_finished():
            await self._acknowledge(client, acks)
        # Then failures, releases and replies still on their way (a cancelled one leaves its
        # lease to expire: the message comes back, as after a crash).
        while self._background:
            _, late_reports = await asyncio.wait(
                set(self._background), timeout=self.shutdown_timeout
            )
            for task in late_reports:
                task.cancel()
            if late_reports:
                await asyncio.wait(late_reports)
            while acks := self._take_finished():
                await self._acknowledge(client, acks)

    # --- one message -----------------------------------------------------------------------------

    def _take_on(self, client: AsyncClient, message: Leased) -> None:
        """A message just leased: run it if a handler is free, else it waits for one."""
        held = self._held.hold(message)
        self._count(leased=1)
        if len(self._held.running) < self.concurrency:
            self._start(client, held)
        else:
            self._held.waiting.append(held)

    def _start(self, client: AsyncClient, held: Held) -> None:
        work: asyncio.Future[Any]
        if self._is_async:
            work = asyncio.ensure_future(self.handler(held.message))
        else:
            work = asyncio.ensure_future(self._call_sync_handler(held.message))
        self._held.running[work] = held
        work.add_done_callback(functools.partial(self._ended, client))

    async def _call_sync_handler(self, message: Leased) -> Any:
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._executor, self.handler, message)
        if inspect.isawaitable(result):
            return await result
        return result

    def _ended(self, client: AsyncClient, work: asyncio.Future[Any]) -> None:
        """A handler returned, raised or was cancelled: its outcome goes on its way, and a
        message waiting for a handler takes its place."""
        held = self._held.running.pop(work)
        message = held.message
        if work.cancelled():
            self._release(held)
        else:
            self._held.let_go(held)
            if (error := work.exception()) is not None:
                self._spawn(self._outcomes.fail(message, error))
            elif self._outcomes.wants_reply(message):
                self._spawn(self._reply_then_complete(client, message, work.result()))
            else:
                self._completed(message)
        if self._held.waiting and not self._stopping.is_set():
            self._start(client, self._held.waiting.popleft())
        else:
            self._lease_ahead.handler_idle()
        self._turn.set()
        self._changed.set()

    def _release(self, held: Held) -> None:
        self._held.let_go(held)
        self._spawn(self._outcomes.release(held.message))

    def _completed(self, message: Leased) -> None:
        self._finished.append(message)

    async def _reply_then_complete(self, client: AsyncClient, message: Leased, result: Any) -> None:
        if await self._outcomes.send_reply(message, result):
            self._completed(message)
            self._turn.set()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background_done)
        return task

    def _background_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("worker task crashed", exc_info=error)
        self._changed.set()

    # --- stats -----------------------------------------------------------------------------------

    def _count(self, **increments: int) -> None:
        for key, n in increments.items():
            self._counts[key] += n
        self._changed.set()
