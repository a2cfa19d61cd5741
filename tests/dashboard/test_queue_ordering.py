"""The dashboard's queue page shows the queue's ordering (docs/concepts.md, "Ordering")."""

from __future__ import annotations

from app.core.service import QueueService
from tests.dashboard.conftest import Browser
from tests.helpers import make_queue


async def test_the_queue_page_shows_the_ordering(signed_in: Browser, service: QueueService) -> None:
    await make_queue(service, "ns", "by-due", ordering="due")
    await make_queue(service, "ns", "by-priority")

    by_due = await signed_in.get("/dashboard/queues/ns/by-due")
    by_priority = await signed_in.get("/dashboard/queues/ns/by-priority")

    assert "<dt>ordering</dt><dd>due time first, then priority</dd>" in by_due.text
    assert "<dt>ordering</dt><dd>priority, then enqueue order</dd>" in by_priority.text
