"""The worker loop: lease messages in batches, run a handler on each with bounded concurrency,
heartbeat while it runs, complete or fail it, and shut down gracefully.

::

    ┌────────── while not stopping ───────────┐
    │ free slots? ── dequeue(count=free,       │    each message, in its own task:
    │                wait_seconds=20) ─────────┼──► handler(message) ── returns ──► complete (*)
    └──────────────────────────────────────────┘        │ every lease/3: extend  └ raises ──► fail
    stop() / SIGTERM: stop leasing; wait up to shutdown_timeout for running handlers; release
    (fail with retry delay 0) what is still running; a second signal releases at once.

(*) A handler's slot is free once it returns; its completion travels meanwhile, gathered with
the others that finish while an acknowledgement is on its way (:mod:`app.client.acks`). What the
worker tells the server about each message is :mod:`app.client.outcomes`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import inspect
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx

from app.client.async_client import AsyncClient
from app.client.calls import MAX_WAIT_SECONDS
from app.client.errors import (
    ApiError,
    InvalidState,
    LeaseMismatch,
    NotFound,
    RateLimited,
    Unavailable,
)
from app.client.models import Leased
from app.client.outcomes import Outcomes

log = logging.getLogger("sundial.worker")

Handler = Callable[[Leased], Any]
"""Takes the leased message; returns (or, if async, resolves to) the reply, if any."""


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


class Worker:
    """Consumes one queue with a handler.

    Args:
        queue: ``"namespace/queue"``.
        handler: a function or coroutine function taking a :class:`~app.client.models.Leased`
            message. Returning completes the message (the value is the reply to a
            :meth:`~app.client.Client.call`); raising fails the attempt with the exception's
            text (raise :class:`Retry` to choose the retry delay).
        client: the client to use (the caller closes it); default a new :class:`AsyncClient`
            for ``url`` and ``token`` (default ``$SUNDIAL_URL``, ``$SUNDIAL_TOKEN``).
        concurrency: handlers running at once (sync handlers run in a thread pool that size).
        batch_size: most messages leased per request (default: the free slots, ≤ 100).
        wait_seconds: long-poll wait per dequeue (≤ 20).
        lease_seconds: the lease each dequeue asks for; default the queue's. Heartbeats extend
            it every third of it.
        metadata: only lease messages whose metadata has all these pairs.
        shutdown_timeout: seconds running handlers get to finish after stop() before their
            messages are released.
        burst: stop once nothing is ready and no handler is running (for scripts and tests).
    """

    def __init__(
        self,
        queue: str,
        handler: Handler,
        *,
        client: AsyncClient | None = None,
        url: str | None = None,
        token: str | None = None,
        concurrency: int = 1,
        batch_size: int | None = None,
        wait_seconds: int = MAX_WAIT_SECONDS,
        lease_seconds: int | None = None,
        metadata: dict[str, str] | None = None,
        shutdown_timeout: float = 30.0,
        burst: bool = False,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.batch_size = min(batch_size or 100, 100)
        self.wait_seconds = max(0, min(wait_seconds, MAX_WAIT_SECONDS))
        self.lease_seconds = lease_seconds
        self.metadata = metadata
        self.shutdown_timeout = shutdown_timeout
        self.burst = burst
        self._client = client
        self._url, self._token = url, token
        self._owns_client = client is None
        self._stats = WorkerStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = asyncio.Event()
        self._changed = asyncio.Event()
        self._stop_requests = 0
        self._tasks: set[asyncio.Task[None]] = set()
        """One per message whose handler runs (or whose failure is being reported)."""
        self._settling: set[asyncio.Task[None]] = set()
        """Completions on their way to the server: they no longer hold a slot."""

    # --- control ---------------------------------------------------------------------------------

    @property
    def stats(self) -> WorkerStats:
        """A snapshot of the counters."""
        return replace(self._stats, running=len(self._tasks))

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
        if self._stop_requests > 1:
            log.warning("second stop request: releasing %d running messages", len(self._tasks))
            for task in self._tasks:
                task.cancel()

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
        """Run in the current event loop until :meth:`stop` (or, in burst mode, until idle)."""
        self._loop = asyncio.get_running_loop()
        client = self._client or AsyncClient(self._url, self._token)
        self._outcomes = Outcomes(client, self.queue, self._count)
        executor = concurrent.futures.ThreadPoolExecutor(
            self.concurrency, thread_name_prefix="sundial-handler"
        )
        try:
            lease = self.lease_seconds or (await client.get_queue(self.queue)).lease_seconds
            log.info(
                "worker on %s: concurrency %d, lease %d s", self.queue, self.concurrency, lease
            )
            await self._lease_loop(client, executor, lease)
            await self._drain()
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
            if self._owns_client:
                await client.aclose()
        log.info("worker on %s stopped: %s", self.queue, self.stats)
        return self.stats

    async def _lease_loop(
        self, client: AsyncClient, executor: concurrent.futures.Executor, lease: int
    ) -> None:
        stop = asyncio.create_task(self._stopping.wait())
        failures = 0
        try:
            while not self._stopping.is_set():
                free = self._free_slots()
                if free <= 0:
                    busy = {stop, *self._tasks, *self._settling}
                    await asyncio.wait(busy, return_when=asyncio.FIRST_COMPLETED)
                    continue
                poll = asyncio.create_task(
                    client.dequeue(
                        self.queue,
                        min(free, self.batch_size),
                        wait_seconds=0 if self.burst else self.wait_seconds,
                        lease_seconds=lease,
                        metadata=self.metadata,
                    )
                )
                await asyncio.wait({stop, poll}, return_when=asyncio.FIRST_COMPLETED)
                if not poll.done():
                    # Stopping: the server answers a long poll whose client left without
                    # leasing anything, so nothing is lost by going away.
                    poll.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await poll
                    return
                try:
                    messages = poll.result()
                except (httpx.TransportError, Unavailable, RateLimited) as error:
                    failures += 1
                    delay = min(0.5 * 2**failures, 10.0)
                    log.warning("dequeue failed (%s); again in %.1f s", error, delay)
                    await asyncio.wait({stop}, timeout=delay)
                    continue
                failures = 0
                for message in messages:
                    self._start(client, executor, message, lease)
                if not messages and self.burst:
                    if not self._tasks:
                        return
                    await asyncio.wait({stop, *self._tasks}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()

    def _free_slots(self) -> int:
        """Messages the worker may lease now: one per idle handler, less any completions on
        their way beyond ``concurrency`` (so a slow server bounds what the worker holds)."""
        overflow = max(0, len(self._settling) - self.concurrency)
        return self.concurrency - len(self._tasks) - overflow

    def _start(
        self,
        client: AsyncClient,
        executor: concurrent.futures.Executor,
        message: Leased,
        lease: int,
    ) -> None:
        task = asyncio.create_task(self._process(client, executor, message, lease))
        self._tasks.add(task)
        self._count(leased=1)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._log_crash(task)

    def _settled(self, task: asyncio.Task[None]) -> None:
        self._settling.discard(task)
        self._log_crash(task)

    def _log_crash(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("worker task crashed", exc_info=error)
        self._changed.set()

    async def _drain(self) -> None:
        if self._tasks:
            log.info(
                "stopping: waiting up to %.0f s for %d handlers",
                self.shutdown_timeout,
                len(self._tasks),
            )
            await self._wait_or_cancel(self._tasks)
        # Then the completions still on their way (a cancelled one leaves its lease to expire:
        # the message comes back, as after a crash).
        await self._wait_or_cancel(self._settling)

    async def _wait_or_cancel(self, tasks: set[asyncio.Task[None]]) -> None:
        if not tasks:
            return
        _, pending = await asyncio.wait(set(tasks), timeout=self.shutdown_timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    # --- one message -----------------------------------------------------------------------------

    async def _process(
        self,
        client: AsyncClient,
        executor: concurrent.futures.Executor,
        message: Leased,
        lease: int,
    ) -> None:
        work = asyncio.ensure_future(self._call_handler(executor, message))
        try:
            await self._heartbeat_until_done(client, message, work, lease)
        except asyncio.CancelledError:
            work.cancel()
            await self._outcomes.release(message)
            raise
        error = work.exception()
        if error is None:
            # The handler is done: its slot is free for the next message while the completion
            # travels (pipelined, and gathered with others into one acknowledgement).
            settle = asyncio.create_task(self._outcomes.complete(message, work.result()))
            self._settling.add(settle)
            settle.add_done_callback(self._settled)
        else:
            await self._outcomes.fail(message, error)

    async def _call_handler(self, executor: concurrent.futures.Executor, message: Leased) -> Any:
        if inspect.iscoroutinefunction(self.handler) or inspect.iscoroutinefunction(
            getattr(self.handler, "__call__", None)  # noqa: B004 - an async callable object
        ):
            return await self.handler(message)
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(executor, functools.partial(self.handler, message))
        if inspect.isawaitable(result):
            return await result
        return result

    async def _heartbeat_until_done(
        self, client: AsyncClient, message: Leased, work: asyncio.Future[Any], lease: int
    ) -> None:
        interval, held = lease / 3, True
        while True:
            done, _ = await asyncio.wait({work}, timeout=interval)
            if done:
                return
            if not held:
                continue
            try:
                await client.extend(self.queue, message.id, message.lease_id, lease)
                self._count(heartbeats=1)
            except (LeaseMismatch, InvalidState, NotFound) as error:
                held = False
                log.warning("lease of %s lost while its handler runs: %s", message.id, error)
            except (httpx.TransportError, ApiError) as error:
                log.warning("heartbeat of %s failed: %s", message.id, error)

    # --- stats -----------------------------------------------------------------------------------

    def _count(self, **increments: int) -> None:
        self._stats = replace(
            self._stats,
            **{key: getattr(self._stats, key) + n for key, n in increments.items()},
        )
        self._changed.set()
