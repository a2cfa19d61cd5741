"""A queue's dashboard page shows the topics it is subscribed to."""

from __future__ import annotations

from app.core.models import QueueConfig
from app.core.service import QueueService
from app.core.topics import SubscriptionSpec, TagFilter
from tests.dashboard.conftest import Browser


async def test_queue_page_lists_its_topics(signed_in: Browser, service: QueueService):
    await service.create_namespace("ns")
    for name in ("audit", "quiet"):
        await service.put_queue("ns", name, QueueConfig())
    await service.put_topic("ns", "orders", [SubscriptionSpec("audit")])
    await service.put_topic(
        "ns", "refunds", [SubscriptionSpec("audit", TagFilter("kind", ("A", "B")))]
    )
    page = await signed_in.get("/dashboard/queues/ns/audit")
    assert page.status_code == 200
    assert (
        '<dd id="queue-topics"><code>orders</code>, <code>refunds</code> (kind in A || B)</dd>'
        in page.text
    )
    quiet = await signed_in.get("/dashboard/queues/ns/quiet")
    assert '<dd id="queue-topics"><span class="muted">none</span></dd>' in quiet.text
