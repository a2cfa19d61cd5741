"""The bodies of what a lease holder does with its lease: complete, fail or extend one message,
or complete and fail many in one batch acknowledgement."""

from __future__ import annotations

import msgspec

from app.api.schemas.common import In, Out
from app.api.schemas.consuming import Dequeue, DequeueOut, LeasedOut
from app.core.models import AckResult, LeasedMessage, LeaseRef


class Complete(In):
    """``POST …/messages/{id}/complete``."""

    lease_id: str


class Fail(In):
    """``POST …/messages/{id}/fail``."""

    lease_id: str
    error: str | None = None
    retry_delay_seconds: int | None = None


class Extend(In):
    """``POST …/messages/{id}/extend``."""

    lease_id: str
    lease_seconds: int


class AckComplete(In):
    """A message to complete in a batch acknowledgement."""

    id: str
    lease_id: str


class AckFail(In):
    """A message to fail in a batch acknowledgement."""

    id: str
    lease_id: str
    error: str | None = None


class Ack(In):
    """``POST …/ack``; with ``dequeue``, the messages to lease once it is applied."""

    complete: list[AckComplete] = msgspec.field(default_factory=list)
    fail: list[AckFail] = msgspec.field(default_factory=list)
    dequeue: Dequeue | None = None

    def refs(self) -> tuple[list[LeaseRef], list[LeaseRef]]:
        """The complete and fail items as the core's lease references."""
        return (
            [LeaseRef(i.id, i.lease_id) for i in self.complete],
            [LeaseRef(i.id, i.lease_id, i.error) for i in self.fail],
        )


class AckResultOut(Out, omit_defaults=True):
    """The outcome of one item; ``error`` (an error code) only when it failed."""

    id: str
    ok: bool
    error: str | None = None


class AckOut(Out, omit_defaults=True):
    """The answer to a batch acknowledgement, complete items first, in request order; with
    ``messages`` (possibly empty) when it asked to dequeue."""

    results: list[AckResultOut]
    messages: list[LeasedOut] | None = None

    @classmethod
    def of(cls, results: list[AckResult], leased: list[LeasedMessage] | None = None) -> AckOut:
        """From the core's results (and leased messages)."""
        messages = None if leased is None else DequeueOut.of(leased).messages
        return cls([AckResultOut(r.id, r.ok, r.error) for r in results], messages)
