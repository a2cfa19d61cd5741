"""The service's hook for metrics: told what each operation changed, once it has committed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from app.core.models import Message, Queue
from app.core.states import Event


class Observer(Protocol):
    """Told what an operation changed, once it has committed (the metrics hook). Must be quick
    and must not raise: it runs inside the operation."""

    def enqueued(self, queue: Queue, count: int) -> None:
        """``count`` new messages were added to ``queue``."""

    def transitioned(self, queue: Queue, event: Event, count: int) -> None:
        """``event`` moved ``count`` messages of ``queue`` to another state."""

    def waited(self, queue: Queue, seconds: Sequence[float]) -> None:
        """Messages of ``queue`` got their first lease, each after waiting that many
        ``seconds`` since it became ready (:attr:`LeasedMessage.waited_seconds`)."""

    def processed(self, queue: Queue, seconds: Sequence[float]) -> None:
        """Leases of ``queue`` were ended by their holder (complete or fail), each that many
        ``seconds`` after it was granted."""


def held(message: Message) -> list[float]:
    """How long the lease that ``message``'s complete or fail just ended was held (empty when
    its grant is unknown): from the grant to the change (its ``updated_at``)."""
    if message.leased_at is None:
        return []
    return [max(0.0, (message.updated_at - message.leased_at).total_seconds())]


class NoObserver:
    """The observer of a service nobody watches: it ignores everything."""

    def enqueued(self, queue: Queue, count: int) -> None:
        pass

    def transitioned(self, queue: Queue, event: Event, count: int) -> None:
        pass

    def waited(self, queue: Queue, seconds: Sequence[float]) -> None:
        pass

    def processed(self, queue: Queue, seconds: Sequence[float]) -> None:
        pass
