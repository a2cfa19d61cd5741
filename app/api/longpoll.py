"""Long polling for ``POST …/dequeue`` with ``wait_seconds`` > 0.

A waiting request holds no database connection. It tries to dequeue; when nothing is ready it
parks on its :class:`Waiter` until one of:

- a notification for its queue (enqueue, promotion, lease release: see
  :mod:`app.store.notifications`), fanned out by the :class:`WaiterRegistry`;
- the fallback timer (:attr:`WaiterRegistry.fallback_seconds`, 1 s): covers notifications lost
  while the listener reconnects;
- its deadline, after which it tries a last time and answers, possibly with nothing;
- the client going away, or the server shutting down: it answers at once without dequeueing,
  so no message is leased to a consumer that can no longer receive it.

It answers as soon as it has at least one message (it does not wait to fill ``count``). A
notification wakes every waiter of the queue; the ones that find nothing park again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Protocol

from litestar.types import Receive

from app.api.schemas import Dequeue
from app.core import validation
from app.core.models import LeasedMessage
from app.core.service import QueueService

log = logging.getLogger("sundial.longpoll")

FALLBACK_SECONDS = 1.0
IDLE_SECONDS = 30.0
"""How long a queue stays registered for notifications after its last waiting request."""


class Waiter:
    """One long-polling request's wake-up signal."""

    __slots__ = ("_event", "_on_park", "closed", "parked")

    def __init__(self, on_park: Callable[[], None]) -> None:
        self._event = asyncio.Event()
        self._on_park = on_park
        self.closed = False
        """Set when the request should answer now without dequeueing (client gone, shutdown)."""
        self.parked = False

    def wake(self) -> None:
        """Make the next (or current) :meth:`wait` return at once."""
        self._event.set()

    def close(self) -> None:
        """Wake the request for good: it answers without dequeueing again."""
        self.closed = True
        self._event.set()

    async def wait(self, seconds: float) -> bool:
        """Wait for a wake-up, at most ``seconds``; whether one came."""
        if not self._event.is_set():
            self.parked = True
            self._on_park()
            try:
                async with asyncio.timeout(seconds):
                    await self._event.wait()
            except TimeoutError:
                return False
            finally:
                self.parked = False
                self._on_park()
        self._event.clear()
        return True


class Registrar(Protocol):
    """Where a process registers the queues it wants notifications for."""

    @property
    def pid(self) -> int | None:
        """The LISTEN connection registrations are made for now (None while it is down)."""

    async def register(self, queue_id: int) -> int | None: ...
    async def unregister(self, queue_id: int) -> None: ...


class WaiterRegistry:
    """The long-polling requests of this process, by queue id.

    Statements notify a queue only while some process has registered interest in it, so busy
    consumers (which find messages without waiting) cost producers nothing. A request registers
    its queue just before it parks (:meth:`before_park`); queues nobody has waited on for
    :attr:`idle_seconds` are unregistered by :meth:`sweep`.
    """

    def __init__(
        self,
        fallback_seconds: float = FALLBACK_SECONDS,
        registrar: Registrar | None = None,
        idle_seconds: float = IDLE_SECONDS,
    ) -> None:
        self.fallback_seconds = fallback_seconds
        self.idle_seconds = idle_seconds
        self.registrar = registrar
        """Where queues are registered for notifications (None: every statement notifies)."""
        self._by_queue: dict[int, set[Waiter]] = {}
        self._closed = False
        self._changed = asyncio.Event()
        self._registered: set[int] = set()
        self._last_park: dict[int, float] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def before_park(self, queue_id: int) -> bool:
        """Make sure notifications for ``queue_id`` reach this process before a request parks.

        Returns True when it registered just now: the caller must then look for a message
        once more, since one may have been committed by a producer that checked for listeners
        before the registration was visible.
        """
        self._last_park[queue_id] = asyncio.get_running_loop().time()
        if self.registrar is None or queue_id in self._registered:
            return False
        async with self._locks.setdefault(queue_id, asyncio.Lock()):
            if queue_id in self._registered:
                return False
            pid = await self.registrar.register(queue_id)
            if pid is None:
                return False  # the listener is down: the fallback timer covers the wait
            if pid == self.registrar.pid:
                self._registered.add(queue_id)
            # Otherwise the LISTEN connection was replaced while registering: that row names a
            # connection that is gone (the leader prunes it), so this one is not taken as
            # registered; the caller looks again and registers anew before it parks.
            return True

    async def sweep(self) -> None:
        """Unregister queues nobody in this process has waited on for ``idle_seconds``."""
        if self.registrar is None:
            return
        now = asyncio.get_running_loop().time()
        for queue_id in list(self._registered):
            idle = now - self._last_park.get(queue_id, now) > self.idle_seconds
            if not idle or self._by_queue.get(queue_id):
                continue
            async with self._locks.setdefault(queue_id, asyncio.Lock()):
                if queue_id in self._registered and not self._by_queue.get(queue_id):
                    self._registered.discard(queue_id)
                    await self.registrar.unregister(queue_id)

    async def run_sweeper(self) -> None:
        """Sweep every half ``idle_seconds``, forever (a background task of the server)."""
        while True:
            await asyncio.sleep(self.idle_seconds / 2)
            try:
                await self.sweep()
            except Exception:  # a failed sweep retries at the next round
                log.warning("could not unregister idle queues", exc_info=True)

    def reconnected(self) -> None:
        """The LISTEN connection is new (new pid): register again, and look again now."""
        self._registered.clear()
        self.notify_all()

    def notify(self, queue_id: int) -> None:
        """Wake the requests waiting on ``queue_id`` (something may be ready there)."""
        for waiter in self._by_queue.get(queue_id, ()):
            waiter.wake()

    def notify_all(self) -> None:
        """Wake every waiting request (notifications may have been missed)."""
        for waiters in self._by_queue.values():
            for waiter in waiters:
                waiter.wake()

    def close(self) -> None:
        """Shutting down: every waiting request answers now, and new ones do not wait."""
        self._closed = True
        for waiters in self._by_queue.values():
            for waiter in waiters:
                waiter.close()

    @contextlib.contextmanager
    def subscribe(self, queue_id: int) -> Iterator[Waiter]:
        """A waiter that notifications for ``queue_id`` wake, for the duration of the block."""
        waiter = Waiter(self._park_changed)
        if self._closed:
            waiter.close()
        waiters = self._by_queue.setdefault(queue_id, set())
        waiters.add(waiter)
        try:
            yield waiter
        finally:
            waiters.discard(waiter)
            if not waiters:
                self._by_queue.pop(queue_id, None)

    def waiting(self, queue_id: int) -> int:
        """How many requests are parked waiting for ``queue_id`` now."""
        return sum(w.parked for w in self._by_queue.get(queue_id, ()))

    def waiting_anywhere(self) -> int:
        """How many requests are parked now, over every queue (the waiters gauge)."""
        return sum(w.parked for waiters in self._by_queue.values() for w in waiters)

    async def wait_for_waiting(self, queue_id: int, count: int) -> None:
        """Wait until at least ``count`` requests are parked on ``queue_id`` (for tests)."""
        while self.waiting(queue_id) < count:
            await self._changed.wait()

    def _park_changed(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


async def _watch_disconnect(receive: Receive, waiter: Waiter) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    waiter.close()


async def dequeue(
    service: QueueService,
    registry: WaiterRegistry,
    namespace: str,
    queue_name: str,
    request: Dequeue,
    receive: Receive | None = None,
) -> list[LeasedMessage]:
    """Dequeue, waiting up to ``request.wait_seconds`` for a message to become ready.

    Args:
        service: the queue service.
        registry: this process's waiters.
        namespace: the queue's namespace.
        queue_name: the queue's name.
        request: the dequeue body.
        receive: the ASGI receive channel, to notice a client that goes away while waiting.
    """
    wait = validation.integer("wait_seconds", request.wait_seconds, 0, validation.MAX_WAIT_SECONDS)
    count, lease, metadata = request.count, request.lease_seconds, request.metadata
    if wait == 0:
        return await service.dequeue(
            namespace, queue_name, count=count, lease_seconds=lease, metadata=metadata
        )
    plan = await service.plan_dequeue(
        namespace, queue_name, count=count, lease_seconds=lease, metadata=metadata
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    watcher: asyncio.Task[None] | None = None
    with registry.subscribe(plan.queue.id) as waiter:
        try:
            while not waiter.closed:
                leased = await service.dequeue_planned(plan)
                remaining = deadline - loop.time()
                if leased or remaining <= 0:
                    return leased
                if await registry.before_park(plan.queue.id):
                    continue  # just registered: look once more before parking
                if watcher is None and receive is not None:
                    watcher = asyncio.create_task(_watch_disconnect(receive, waiter))
                # Each look after waking checks that the queue is still as planned (paused,
                # resumed, reconfigured or deleted meanwhile: see QueueService.dequeue_planned).
                await waiter.wait(min(registry.fallback_seconds, remaining))
            return []
        finally:
            if watcher is not None:
                watcher.cancel()
