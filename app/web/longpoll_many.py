"""Long polling over several queues: a dequeue that waits up to ``wait_seconds`` for a message
in any of the queues it names (``POST /v1/namespaces/{ns}/dequeue``).

It waits as the single-queue long poll does (:mod:`app.web.longpoll`: no database connection
held; woken by a notification, the next delayed message becoming visible, the fallback timer,
its deadline, or its client leaving), with one :class:`~app.web.waiters.Waiter` subscribed to
every queue it names, so a notification of any of them wakes it. Each look takes the queues in
their order (:meth:`QueueService.dequeue_planned_many`), so a message of the first queue is
leased before one of the second, whichever woke it. Its queues are of one namespace, hence of
one pool: one registry holds its waiter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

from litestar.types import Receive

from app.core.models import Queue
from app.core.service import QueueService
from app.core.service.consuming_many import LeasedFrom
from app.web.longpoll import WaitingDequeue, check_wait, park_seconds, watch_disconnect
from app.web.waiters import WaiterRegistry


class WaitingManyDequeue(WaitingDequeue, Protocol):
    """What a waiting dequeue of several queues asks for: a queue's, and the queues."""

    @property
    def queues(self) -> Sequence[str]: ...


def _pass_on(registry: WaiterRegistry, queue_ids: Sequence[int]) -> None:
    """More may be ready in any of the queues (the wake-up this request took may have been
    one of them, and it looked at the first ones only): wake the next waiter of each."""
    for queue_id in queue_ids:
        registry.pass_on(queue_id)


async def dequeue_many(
    service: QueueService,
    waiters_of: Callable[[Queue], WaiterRegistry],
    namespace: str,
    request: WaitingManyDequeue,
    receive: Receive | None = None,
) -> list[LeasedFrom]:
    """Dequeue from ``request.queues`` in their order, waiting up to ``request.wait_seconds``
    for a message in any of them.

    Args:
        service: the queue service.
        waiters_of: this process's waiters on the pool of a queue.
        namespace: the queues' namespace.
        request: the dequeue body.
        receive: the ASGI receive channel, to notice a client that goes away while waiting.
    """
    wait = check_wait(request)
    plan = await service.plan_dequeue_many(
        namespace,
        request.queues,
        count=request.count,
        lease_seconds=request.lease_seconds,
        metadata=request.metadata,
    )
    if wait == 0:
        return await service.dequeue_planned_many(plan)
    registry = waiters_of(plan.queues[0])
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    watcher: asyncio.Task[None] | None = None
    queue_ids = plan.queue_ids
    leased: list[LeasedFrom] = []
    pass_on = False
    with registry.subscribe_many(queue_ids) as waiter:
        try:
            while not waiter.closed:
                leased = await service.dequeue_planned_many(plan)
                remaining = deadline - loop.time()
                if leased or remaining <= 0 or waiters_of(plan.queues[0]) is not registry:
                    # (The last: its namespace moved to another pool, whose notifications the
                    # client's next long poll waits for.) A full batch means more may be ready;
                    # a wake-up that came during the look may be for what it did not see.
                    pass_on = len(leased) == plan.count or waiter.woken
                    break
                registered = [await registry.before_park(queue_id) for queue_id in queue_ids]
                if any(registered):
                    continue  # just registered: look once more before parking
                if watcher is None and receive is not None:
                    watcher = asyncio.create_task(watch_disconnect(receive, waiter))
                due = await service.next_due_in_many(plan)
                await waiter.wait(park_seconds(registry, due, remaining))
            else:
                pass_on = waiter.woken  # leaving without looking: others look
        finally:
            if watcher is not None:
                watcher.cancel()
    if pass_on:
        # Once it no longer waits: passed on while it still waited on those queues, the
        # wake-up could wake this request again rather than another.
        _pass_on(registry, queue_ids)
    return leased
