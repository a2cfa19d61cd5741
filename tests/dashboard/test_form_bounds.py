"""The message browser's priority band reaches both ends of the 64-bit range that priorities
take (app/dashboard/forms.py), and refuses what lies beyond, naming the field."""

from __future__ import annotations

import re

import pytest

from app.core import validation as v
from app.core.models import NewMessage
from app.core.service import QueueService
from tests.dashboard.conftest import Browser
from tests.helpers import make_queue

BASE = "/dashboard/queues/ns/q/messages"


def ids_listed(page: str) -> list[str]:
    """Message ids linked from a listing, in page order."""
    return re.findall(r'/messages/([A-Za-z0-9._:-]+)">', page)


async def test_the_band_reaches_both_ends(signed_in: Browser, service: QueueService) -> None:
    await make_queue(service, "ns", "q")
    ends = [NewMessage(id="low", priority=v.INT64_MIN), NewMessage(id="high", priority=v.INT64_MAX)]
    await service.enqueue("ns", "q", [*ends, NewMessage(id="middle", priority=0)])

    top = await signed_in.get(f"{BASE}?priority_min={v.INT64_MAX}&priority_max={v.INT64_MAX}")
    bottom = await signed_in.get(f"{BASE}?priority_min={v.INT64_MIN}&priority_max={v.INT64_MIN}")
    everything = await signed_in.get(
        f"{BASE}?priority_min={v.INT64_MIN}&priority_max={v.INT64_MAX}&order=priority"
    )

    assert (top.status_code, ids_listed(top.text)) == (200, ["high"])
    assert (bottom.status_code, ids_listed(bottom.text)) == (200, ["low"])
    assert ids_listed(everything.text) == ["low", "middle", "high"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        (f"priority_max={v.INT64_MAX + 1}", "priority_max"),
        (f"priority_min={v.INT64_MIN - 1}", "priority_min"),
        ("priority_min=" + "9" * 5000, "priority_min"),
    ],
)
async def test_beyond_the_range_is_refused_by_name(
    signed_in: Browser, service: QueueService, query: str, field: str
) -> None:
    await make_queue(service, "ns", "q")
    page = await signed_in.get(f"{BASE}?{query}")
    assert page.status_code == 400, page.text
    assert field in page.text
