"""Long polling: a dequeue that waits up to ``wait_seconds`` for a message (the REST API's
``POST …/dequeue`` and the SQS door's ``ReceiveMessage``).

A waiting request holds no database connection. It tries to dequeue; when nothing is ready it
parks on its :class:`Waiter` until one of:

- a notification for its queue (enqueue, promotion, lease release: see
  :mod:`app.store.notifications`): the :class:`WaiterRegistry` wakes one waiter of the queue
  per notification, and a waiter that leases all it asked for wakes the next;
- the moment the next delayed message of its queue becomes visible (the claim takes a due
  message at once, without waiting for the scheduler to promote it and notify);
- the fallback timer (:attr:`WaiterRegistry.fallback_seconds`, 1 s): covers notifications lost
  while the listener reconnects;
- its deadline, after which it tries a last time and answers, possibly with nothing;
- the client going away, or the server shutting down: it answers at once without dequeueing,
  so no message is leased to a consumer that can no longer receive it.

It answers as soon as it has at least one message (it does not wait to fill ``count``). A
woken waiter that finds nothing parks again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from litestar.types import Receive

from app.core import validation
from app.core.models import FilterValue, LeasedMessage, Queue
from app.core.service import QueueService
from app.web.waiters import Waiter, WaiterRegistry


class WaitingDequeue(Protocol):
    """What a waiting dequeue asks for."""

    @property
    def count(self) -> int: ...
    @property
    def lease_seconds(self) -> int | None: ...
    @property
    def wait_seconds(self) -> int: ...
    @property
    def metadata(self) -> Mapping[str, FilterValue]: ...


T = TypeVar("T")

DUE_RETRY_SECONDS = 0.05
"""How soon a request looks again when a delayed message is due but was not its to take."""


async def watch_disconnect(receive: Receive, waiter: Waiter) -> None:
    """Close ``waiter`` when the client goes away (the request then leases nothing)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    waiter.close()


def check_wait(request: WaitingDequeue, field: str = "wait_seconds") -> int:
    """The request's ``wait_seconds``, checked (``field`` names it in the error)."""
    return validation.integer(field, request.wait_seconds, 0, validation.MAX_WAIT_SECONDS)


def park_seconds(registry: WaiterRegistry, due: float | None, remaining: float) -> float:
    """How long to park: until the fallback timer, the deadline or ``due``, the moment the next
    delayed message of the request's queues becomes visible, whichever comes first (a message
    already due that this request did not take, another filter's, is promoted within a
    scheduler tick: look again after :data:`DUE_RETRY_SECONDS`)."""
    wait = min(registry.fallback_seconds, remaining)
    if due is not None:
        wait = min(wait, due if due > 0 else DUE_RETRY_SECONDS)
    return wait


async def dequeue(
    service: QueueService,
    waiters_of: Callable[[Queue], WaiterRegistry],
    namespace: str,
    queue_name: str,
    request: WaitingDequeue,
    receive: Receive | None = None,
) -> list[LeasedMessage]:
    """Dequeue, waiting up to ``request.wait_seconds`` for a message to become ready.

    Args:
        service: the queue service.
        waiters_of: this process's waiters on the pool of a queue.
        namespace: the queue's namespace.
        queue_name: the queue's name.
        request: the dequeue body.
        receive: the ASGI receive channel, to notice a client that goes away while waiting.
    """
    wait = check_wait(request)
    count, lease, metadata = request.count, request.lease_seconds, request.metadata
    if wait == 0:
        return await service.dequeue(
            namespace, queue_name, count=count, lease_seconds=lease, metadata=metadata
        )
    plan = await service.plan_dequeue(
        namespace, queue_name, count=count, lease_seconds=lease, metadata=metadata
    )
    registry = waiters_of(plan.queue)
    # Each look after waking checks that the queue is still as planned (paused, resumed,
    # reconfigured or deleted meanwhile: see QueueService.dequeue_planned).
    return await wait_and_lease(
        registry,
        (plan.queue.id,),
        look=lambda: service.dequeue_planned(plan),
        next_due=lambda: service.next_due_in(plan),
        count=plan.count,
        wait=wait,
        moved=lambda: waiters_of(plan.queue) is not registry,
        receive=receive,
    )


async def wait_and_lease(
    registry: WaiterRegistry,
    queue_ids: Sequence[int],
    *,
    look: Callable[[], Awaitable[list[T]]],
    next_due: Callable[[], Awaitable[float | None]],
    count: int,
    wait: int,
    moved: Callable[[], bool],
    receive: Receive | None,
) -> list[T]:
    """The waiting loop of a long poll on ``queue_ids`` (one queue, or several of one pool):
    ``look`` (lease what is ready) until it leases something, the ``wait`` seconds are up, the
    client leaves, the server shuts down, or the queues' namespace ``moved`` to another pool
    (whose notifications the client's next long poll waits for); between looks, park until
    woken or until ``next_due`` (seconds until a delayed message becomes visible)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    watcher: asyncio.Task[None] | None = None
    leased: list[T] = []
    pass_on = False  # wake the next waiters, once this request has left the queues' waiters
    with registry.subscribe_many(queue_ids) as waiter:
        try:
            while not waiter.closed:
                leased = await look()
                remaining = deadline - loop.time()
                if leased or remaining <= 0 or moved():
                    # A full batch means more may be ready; a wake-up that came during the
                    # look may be for what it did not see.
                    pass_on = len(leased) == count or waiter.woken
                    break
                registered = [await registry.before_park(queue_id) for queue_id in queue_ids]
                if any(registered):
                    continue  # just registered: look once more before parking
                if watcher is None and receive is not None:
                    watcher = asyncio.create_task(watch_disconnect(receive, waiter))
                await waiter.wait(park_seconds(registry, await next_due(), remaining))
            else:
                pass_on = waiter.woken  # leaving without looking: others look
        finally:
            if watcher is not None:
                watcher.cancel()
    # Passed on while this request was still one of the queues' waiters, the wake-up could
    # wake this request itself (the next in line when no other is parked) and be lost until
    # the fallback timer.
    if pass_on:
        for queue_id in queue_ids:
            registry.pass_on(queue_id)
    return leased
