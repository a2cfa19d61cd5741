"""The dashboard's queue page shows the keys a queue indexes for filtered dequeues
(docs/concepts.md, "Filtered dequeue and the filter key")."""

from __future__ import annotations

from app.core.service import QueueService
from tests.dashboard.conftest import Browser
from tests.helpers import make_queue


async def test_the_queue_page_shows_the_filter_keys(
    signed_in: Browser, service: QueueService
) -> None:
    await make_queue(service, "ns", "two", filter_keys=("tenant", "region"))
    await make_queue(service, "ns", "none")

    two = await signed_in.get("/dashboard/queues/ns/two")
    none = await signed_in.get("/dashboard/queues/ns/none")

    assert "<dt>filter keys</dt><dd><code>tenant</code>, <code>region</code> (indexed" in two.text
    assert "<dt>filter keys</dt>" not in none.text
