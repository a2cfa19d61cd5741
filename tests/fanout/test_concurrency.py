"""Fan-out under concurrency, against a real PostgreSQL: publishes racing pauses, unsubscribes
and a queue's deletion never leave a partial publish. Every message is in all the queues its
publish reached or in none, and each answer says exactly where its messages are."""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict

from app.core.errors import CatalogueChangedError, QueuePausedError
from app.core.models import MessageFilter, NewMessage, QueueConfig
from app.core.service import QueueService
from app.core.topics import SubscriptionSpec

NS = "shop"
PUBLISHERS = 8
CHANGES = 8
BATCH = 3
WAIT_SECONDS = 10
"""Longest a change waits for the publishes to meet what it made (then the test fails)."""


class Observed:
    """What the publishers met, awaited by the changes: each change waits until a publish has
    met the state it made before it makes the next, so the races the test asserts do happen."""

    def __init__(self) -> None:
        self._events: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)

    def saw(self, *things: str) -> None:
        """A publisher met these (``refused``, ``answered``, ``with c``, ``without c``...)."""
        for thing in things:
            self._events[thing].set()

    async def wait(self, thing: str) -> None:
        """Until a publisher meets ``thing`` after this call (at most :data:`WAIT_SECONDS`)."""
        event = self._events[thing]
        event.clear()
        async with asyncio.timeout(WAIT_SECONDS):
            await event.wait()


async def _stored(service: QueueService, queue: str) -> set[str]:
    ids: set[str] = set()
    cursor = None
    while True:
        page = await service.query_messages(NS, queue, MessageFilter(limit=1000, cursor=cursor))
        ids |= {m.id for m in page.messages}
        cursor = page.next_cursor
        if cursor is None:
            return ids


async def test_racing_changes_never_leave_a_partial_publish(service: QueueService):
    await service.create_namespace(NS)
    for name in ("a", "b", "c", "d"):
        await service.put_queue(NS, name, QueueConfig())
    await service.put_topic(NS, "t", [SubscriptionSpec(q) for q in ("a", "b", "c", "d")])
    answers: dict[str, set[str]] = {}  # message id -> the queues its publish reported
    refused: list[str] = []
    numbers = itertools.count()
    stop = asyncio.Event()
    observed = Observed()

    async def publish() -> None:
        while not stop.is_set():
            batch = [NewMessage(id=f"m{next(numbers)}") for _ in range(BATCH)]
            try:
                outcomes = await service.publish(NS, "t", batch)
            except (QueuePausedError, CatalogueChangedError) as error:
                # Refused whole, or (the catalogue kept changing) the client's to retry.
                refused.extend(m.id for m in batch if m.id)
                if isinstance(error, QueuePausedError):
                    observed.saw("refused")
                continue
            for outcome in outcomes:
                assert all(d.outcome.created for d in outcome.deliveries)
                queues = answers[outcome.id] = {d.queue for d in outcome.deliveries}
                observed.saw("answered", *(f"with {q}" for q in queues))
                if "c" not in queues:
                    observed.saw("without c")

    async def toggle_pause() -> None:
        for _ in range(CHANGES):
            await service.update_queue(NS, "b", {"enqueue_paused": True})
            await observed.wait("refused")
            await service.update_queue(NS, "b", {"enqueue_paused": False})
            await observed.wait("answered")

    async def churn_subscription() -> None:
        for _ in range(CHANGES):
            await service.unsubscribe(NS, "t", "c")
            await observed.wait("without c")
            await service.subscribe(NS, "t", "c")
            await observed.wait("with c")

    async def delete_queue_d() -> None:
        await observed.wait("with d")
        await service.delete_queue(NS, "d")

    async def change() -> None:
        try:
            await asyncio.gather(toggle_pause(), churn_subscription(), delete_queue_d())
        finally:
            stop.set()  # the publishers stop, also when a change waited in vain

    await asyncio.gather(change(), *(publish() for _ in range(PUBLISHERS)))

    stored = {q: await _stored(service, q) for q in ("a", "b", "c")}
    assert answers, "no publish went through"
    assert refused, "no publish met the paused queue"
    for message_id, queues in answers.items():
        assert {"a", "b"} <= queues
        where = {q for q, ids in stored.items() if message_id in ids}
        assert where == queues - {"d"}, message_id
    for message_id in refused:
        assert all(message_id not in ids for ids in stored.values()), message_id
    assert set().union(*stored.values()) == set(answers)
    # Some publishes reached c and some did not: the churn did race them.
    assert any("c" in q for q in answers.values())
    assert any("c" not in q for q in answers.values())
    # One reached d before it was deleted.
    assert any("d" in q for q in answers.values())
