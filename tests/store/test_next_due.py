"""The long poll's next look (``next_due_in``): the seconds until the queue's next delayed
message is visible, found among the earliest delayed messages of every queue; when other queues'
fill that window, the time of the last one read (look again then); None without any."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import NewMessage
from app.core.service import QueueService
from app.store.postgres import PostgresStore
from app.store.sql.due import NEXT_DUE_SCAN
from tests.helpers import make_queue


async def test_next_due_in(service: QueueService, engine: AsyncEngine) -> None:
    store = PostgresStore(engine)
    mine = await make_queue(service, name="mine")
    other = await make_queue(service, name="other")
    assert await store.next_due_in(mine) is None
    await service.enqueue("ns", "mine", [NewMessage(id="m", delay_seconds=600)])
    due = await store.next_due_in(mine)
    assert due is not None
    assert 590 < due <= 600
    # The other queue's delayed messages, all due sooner, fill the window that is read.
    early = [NewMessage(id=f"o{i}", delay_seconds=60 + i) for i in range(NEXT_DUE_SCAN)]
    await service.enqueue("ns", "other", early)
    again = await store.next_due_in(mine)
    assert again is not None
    assert 60 + NEXT_DUE_SCAN - 10 < again <= 60 + NEXT_DUE_SCAN
    assert (await store.next_due_in(other) or 0) <= 60
