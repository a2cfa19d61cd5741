"""Consuming from several queues of a namespace at once (``POST /v1/namespaces/{ns}/dequeue``):
the queues in the order the consumer lists them, which is their priority.

A look leases from the first queue that has messages ready, and fills what is left of ``count``
from the next ones, in order: each queue's claim is the single-queue claim
(:meth:`Store.dequeue`), run only while more messages are wanted, so the answer holds the
first queue's best messages, then the second's, and so on. A queue whose ``dequeue_paused`` is
on is passed over. A long poll plans once and looks as often as it is woken
(:mod:`app.web.longpoll_many`); every look checks that the caller and the queues are still
what the plan found, as the single-queue dequeue does (:mod:`app.core.service.consuming`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.core import catalogue, validation
from app.core.errors import CatalogueChangedError, SundialError, ValidationError
from app.core.models import FilterValue, LeasedMessage, Queue
from app.core.service.base import ServiceBase
from app.core.service.catalogue_retry import replanned_if_catalogue_changed

MAX_DEQUEUE_QUEUES = 20
"""Most queues one dequeue may name."""


@dataclass(frozen=True, slots=True)
class LeasedFrom:
    """A message leased by a dequeue of several queues, with the queue it was leased from."""

    queue: Queue
    message: LeasedMessage


@dataclass(slots=True)
class ManyDequeuePlan:
    """A validated dequeue of several queues, in their order of priority, with each queue
    resolved (looked up again when the catalogue changed)."""

    queues: list[Queue]
    count: int
    lease_seconds: int | None
    metadata: dict[str, FilterValue]

    @property
    def queue_ids(self) -> list[int]:
        """The queues' ids, in order."""
        return [queue.id for queue in self.queues]


def queue_names(field: str, names: Sequence[str]) -> list[str]:
    """1 to :data:`MAX_DEQUEUE_QUEUES` distinct queue names (``field[i]`` names a bad one)."""
    if not 1 <= len(names) <= MAX_DEQUEUE_QUEUES:
        raise ValidationError(field, f"must name 1 to {MAX_DEQUEUE_QUEUES} queues")
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        validation.name(f"{field}[{index}]", name)
        if name in seen:
            raise ValidationError(f"{field}[{index}]", f"repeats {field}[{seen[name]}]")
        seen[name] = index
    return list(names)


class ConsumingMany(ServiceBase):
    """The consumer's claim over several queues."""

    @replanned_if_catalogue_changed
    async def plan_dequeue_many(
        self,
        namespace: str,
        names: Sequence[str],
        *,
        count: int = 1,
        lease_seconds: int | None = None,
        metadata: Mapping[str, FilterValue] | None = None,
    ) -> ManyDequeuePlan:
        """Validate a dequeue of the queues ``names`` (in their order of priority) and resolve
        them: every field is checked before any queue is looked up, and the first queue that
        does not exist is a NotFoundError naming it. The lookups are confirmed by the first look
        (:meth:`dequeue_planned_many`)."""
        wanted = validation.dequeue_request(count, lease_seconds, metadata or {})
        checked = queue_names("queues", names)
        queues = [await self.get_queue_or_404(namespace, name) for name in checked]
        return ManyDequeuePlan(queues, count, lease_seconds, wanted)

    async def dequeue_many(
        self,
        namespace: str,
        names: Sequence[str],
        *,
        count: int = 1,
        lease_seconds: int | None = None,
        metadata: Mapping[str, FilterValue] | None = None,
    ) -> list[LeasedFrom]:
        """Lease up to ``count`` visible messages from the queues ``names``: the first queue's
        first, the rest from the next queues in order; none from a dequeue-paused queue."""
        plan = await self.plan_dequeue_many(
            namespace, names, count=count, lease_seconds=lease_seconds, metadata=metadata
        )
        return await self.dequeue_planned_many(plan)

    async def next_due_in_many(self, plan: ManyDequeuePlan) -> float | None:
        """Seconds until the next delayed message of any of the plan's queues becomes visible;
        None if none has one."""
        return await self.store.next_due_in_any(plan.queues)

    async def dequeue_planned_many(self, plan: ManyDequeuePlan) -> list[LeasedFrom]:
        """Run a planned dequeue of several queues (again and again, for a long poll).

        Each run is a new moment at which the caller and the queues must still be what the plan
        found: its first statement carries the catalogue guard, and when the catalogue has
        changed the plan is made again from the queues as they are now (a queue deleted since
        is a NotFoundError naming it).
        """
        replan = False
        for attempt in range(1, catalogue.ATTEMPTS + 1):
            catalogue.recheck()
            try:
                if replan:
                    plan.queues = [
                        await self.get_queue_or_404(queue.namespace, queue.name)
                        for queue in plan.queues
                    ]
                return await self._lease_in_order(plan)
            except CatalogueChangedError:
                if attempt == catalogue.ATTEMPTS:
                    raise
                await catalogue.renew()
                replan = True
        raise AssertionError("unreachable")

    async def _lease_in_order(self, plan: ManyDequeuePlan) -> list[LeasedFrom]:
        """One look: each queue in order, while fewer than ``count`` are leased.

        Each queue's claim commits on its own. Once a claim has leased messages, an error of a
        later queue's claim ends the look with what is leased (answering the error instead
        would leave those messages running, unknown to anyone, until their leases expired);
        the next request meets the error again.
        """
        leased: list[LeasedFrom] = []
        passed_paused = False
        for queue in plan.queues:
            wanted = plan.count - len(leased)
            if wanted == 0:
                break
            if queue.config.dequeue_paused:
                passed_paused = True
                continue
            try:
                got = await self.store.dequeue(queue, wanted, plan.lease_seconds, plan.metadata)
            except SundialError:
                if not leased:
                    raise
                break
            if got:
                self._handed_out(queue, got)
                leased.extend(LeasedFrom(queue, message) for message in got)
        if passed_paused:
            # Still paused? (Nothing to check once a claim of this look has carried the guard:
            # the lookups share one catalogue version, which that claim found current.)
            await self.store.confirm_lookups()
        return leased
