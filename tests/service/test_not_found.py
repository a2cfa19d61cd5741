"""Every operation refuses an unknown namespace, queue or message with NotFoundError."""

from __future__ import annotations

import uuid

from app.core.errors import (
    NotFoundError,
)
from app.core.models import (
    LeaseRef,
    MessageChanges,
    MessageFilter,
    NewMessage,
    QueueConfig,
)
from app.core.states import State
from tests.helpers import (
    count_messages,
    make_queue,
)
from tests.service.helpers import NS, Q, new

LEASE = str(uuid.uuid4())
QUEUE_OPERATIONS = {
    "enqueue": lambda s, ns, q: s.enqueue(ns, q, [NewMessage()]),
    "dequeue": lambda s, ns, q: s.dequeue(ns, q),
    "complete": lambda s, ns, q: s.complete(ns, q, "m", LEASE),
    "fail": lambda s, ns, q: s.fail(ns, q, "m", LEASE),
    "extend": lambda s, ns, q: s.extend(ns, q, "m", LEASE, 10),
    "ack": lambda s, ns, q: s.ack(ns, q, [LeaseRef("m", LEASE)], []),
    "get_message": lambda s, ns, q: s.get_message(ns, q, "m"),
    "update_message": lambda s, ns, q: s.update_message(ns, q, "m", MessageChanges(priority=1)),
    "delete_message": lambda s, ns, q: s.delete_message(ns, q, "m"),
    "cancel": lambda s, ns, q: s.cancel(ns, q, "m", force=True),
    "requeue": lambda s, ns, q: s.requeue(ns, q, "m"),
    "requeue_dead_letters": lambda s, ns, q: s.requeue_dead_letters(ns, q),
    "query_messages": lambda s, ns, q: s.query_messages(ns, q, MessageFilter()),
    "queue_detail": lambda s, ns, q: s.queue_detail(ns, q),
    "update_queue": lambda s, ns, q: s.update_queue(ns, q, {"lease_seconds": 5}),
    "delete_queue": lambda s, ns, q: s.delete_queue(ns, q),
    "purge_queue": lambda s, ns, q: s.purge_queue(ns, q),
}
MESSAGE_OPERATIONS = [
    "complete",
    "fail",
    "extend",
    "get_message",
    "update_message",
    "delete_message",
    "cancel",
    "requeue",
]


async def test_unknown_namespace_or_queue_is_not_found(service):
    await make_queue(service, NS, Q)
    await make_queue(service, "other", "elsewhere")
    not_raised = []
    for operation, call in sorted(QUEUE_OPERATIONS.items()):
        for namespace, queue_name in [("nowhere", Q), (NS, "nowhere"), (NS, "elsewhere")]:
            try:
                await call(service, namespace, queue_name)
            except NotFoundError:
                continue
            not_raised.append((operation, namespace, queue_name))
    assert not_raised == []
    assert (await service.get_queue_or_404(NS, Q)).config == QueueConfig()


async def test_unknown_message_is_not_found(service, engine):
    queue = await make_queue(service, NS, Q)
    await make_queue(service, NS, "other")
    await service.enqueue(NS, "other", [new("m")])  # same id, another queue
    not_raised = []
    for operation in MESSAGE_OPERATIONS:
        try:
            await QUEUE_OPERATIONS[operation](service, NS, Q)
        except NotFoundError:
            continue
        not_raised.append(operation)
    assert not_raised == []
    (result,) = await service.ack(NS, Q, [LeaseRef("m", LEASE)], [])
    assert (result.ok, result.error) == (False, "not_found")
    assert await count_messages(engine, queue.id) == 0
    assert (await service.get_message(NS, "other", "m")).state is State.PENDING
