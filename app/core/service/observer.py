"""The service's hook for metrics: told what each operation changed, once it has committed."""

from __future__ import annotations

from typing import Protocol

from app.core.models import Queue
from app.core.states import Event


class Observer(Protocol):
    """Told what an operation changed, once it has committed (the metrics hook). Must be quick
    and must not raise: it runs inside the operation."""

    def enqueued(self, queue: Queue, count: int) -> None:
        """``count`` new messages were added to ``queue``."""

    def transitioned(self, queue: Queue, event: Event, count: int) -> None:
        """``event`` moved ``count`` messages of ``queue`` to another state."""


class NoObserver:
    """The observer of a service nobody watches: it ignores everything."""

    def enqueued(self, queue: Queue, count: int) -> None:
        pass

    def transitioned(self, queue: Queue, event: Event, count: int) -> None:
        pass
