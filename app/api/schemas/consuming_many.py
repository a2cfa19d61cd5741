"""The bodies of a dequeue from several queues (``POST /v1/namespaces/{ns}/dequeue``): the
queues in their order of priority, and each leased message with the queue it came from."""

from __future__ import annotations

from app.api.schemas.common import Out
from app.api.schemas.consuming import Dequeue, LeasedOut
from app.core.service.consuming_many import LeasedFrom


class DequeueMany(Dequeue, kw_only=True):
    """``POST /v1/namespaces/{ns}/dequeue``: the fields of a queue's dequeue, applied to each
    queue, and ``queues``, first to last in their order of priority."""

    queues: list[str]


class LeasedFromOut(LeasedOut, kw_only=True):
    """A message handed out by a dequeue of several queues: ``queue`` is the name of the queue
    it was leased from (complete, fail or extend it there)."""

    queue: str


class DequeueManyOut(Out):
    """The answer to a dequeue of several queues (possibly empty): the first queue's messages,
    then the next queue's, each queue's lowest priority first."""

    messages: list[LeasedFromOut]

    @classmethod
    def of(cls, leased: list[LeasedFrom]) -> DequeueManyOut:
        """From the core's leased messages (each written as a single-queue dequeue writes it,
        with its queue's name)."""
        return cls([LeasedFromOut.of(item.message, queue=item.queue.name) for item in leased])
