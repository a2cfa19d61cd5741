"""A namespace's topics move with it between pools, subscriptions and filters included, and
publishing works on its new pool."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import NewMessage, QueueConfig
from app.core.service import QueueService
from app.core.topics import SubscriptionSpec, TagFilter
from app.store.moves import NamespaceMover
from tests.helpers import scalar


async def test_topics_move_with_their_namespace(
    pooled: QueueService,
    database_url: str,
    pool_b_url: str,
    engine: AsyncEngine,
    engine_b: AsyncEngine,
) -> None:
    await pooled.create_namespace("ns", pool="default")
    for name in ("a", "b"):
        await pooled.put_queue("ns", name, QueueConfig())
    specs = [SubscriptionSpec("a"), SubscriptionSpec("b", TagFilter("kind", ("x", "y")))]
    before, _ = await pooled.put_topic("ns", "t", specs)
    await pooled.put_topic("ns", "empty", [])
    await pooled.publish("ns", "t", [NewMessage(id="m1", metadata={"kind": "x"})])

    report = await NamespaceMover({"default": database_url, "b": pool_b_url}).move("ns", "b")

    assert report is not None
    after = await pooled.get_topic("ns", "t")
    assert [(s.queue.name, s.queue.id, s.tags) for s in after.subscriptions] == [
        (s.queue.name, s.queue.id, s.tags) for s in before.subscriptions
    ]
    assert after.created_at == before.created_at
    assert [t.name for t in await pooled.list_topics("ns")] == ["empty", "t"]
    assert await scalar(engine, "SELECT count(*) FROM topics") == 0
    assert await scalar(engine, "SELECT count(*) FROM topic_subscriptions") == 0
    [outcome] = await pooled.publish("ns", "t", [NewMessage(id="m2", metadata={"kind": "y"})])
    assert sorted(d.queue for d in outcome.deliveries) == ["a", "b"]
    assert await scalar(engine_b, "SELECT count(*) FROM messages") == 4
