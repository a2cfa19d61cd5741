"""Fan-out publish through the service, against a real PostgreSQL: a publish reaches every
subscribed queue that accepts it, all or none, with one id everywhere."""

from __future__ import annotations

import pytest

from app.core.errors import NotFoundError, QueuePausedError, ValidationError
from app.core.models import MessageFilter, NewMessage, QueueConfig
from app.core.service import QueueService
from app.core.topics import SubscriptionSpec, TagFilter

NS = "shop"


async def _setup(service: QueueService, *queues: tuple[str, QueueConfig]) -> None:
    await service.create_namespace(NS)
    for name, config in queues:
        await service.put_queue(NS, name, config)


async def _ids(service: QueueService, queue: str) -> set[str]:
    page = await service.query_messages(NS, queue, MessageFilter(limit=1000))
    return {m.id for m in page.messages}


async def test_publish_reaches_every_subscribed_queue_with_one_id(service: QueueService):
    await _setup(service, ("billing", QueueConfig()), ("audit", QueueConfig(delay_seconds=60)))
    topic, created = await service.put_topic(
        NS, "orders", [SubscriptionSpec("billing"), SubscriptionSpec("audit")]
    )
    assert created
    assert [s.queue.name for s in topic.subscriptions] == ["audit", "billing"]

    [first, second] = await service.publish(
        NS, "orders", [NewMessage(id="o-1", payload=b'{"n":1}'), NewMessage(payload=b"2")]
    )

    assert first.id == "o-1"
    assert {(d.queue, d.outcome.state, d.outcome.created) for d in first.deliveries} == {
        ("billing", "pending", True),
        ("audit", "invisible", True),  # the queue's own default delay applies
    }
    assert second.id
    assert {d.queue for d in second.deliveries} == {"billing", "audit"}
    for queue in ("billing", "audit"):
        assert await _ids(service, queue) == {"o-1", second.id}
        message = await service.get_message(NS, queue, "o-1")
        assert message.payload == b'{"n": 1}'  # jsonb text


async def test_publishing_again_creates_nothing_twice(service: QueueService):
    await _setup(service, ("a", QueueConfig()), ("b", QueueConfig()))
    await service.put_topic(NS, "t", [SubscriptionSpec("a"), SubscriptionSpec("b")])
    await service.publish(NS, "t", [NewMessage(id="m1")])

    [again, repeat] = await service.publish(NS, "t", [NewMessage(id="m1"), NewMessage(id="m1")])

    assert all(not d.outcome.created for d in again.deliveries)
    assert all(not d.outcome.created for d in repeat.deliveries)
    assert await _ids(service, "a") == await _ids(service, "b") == {"m1"}


async def test_a_queue_subscribed_later_gets_a_republished_message_once(service: QueueService):
    await _setup(service, ("a", QueueConfig()), ("b", QueueConfig()))
    await service.put_topic(NS, "t", [SubscriptionSpec("a")])
    await service.publish(NS, "t", [NewMessage(id="m1")])
    await service.subscribe(NS, "t", "b")

    [outcome] = await service.publish(NS, "t", [NewMessage(id="m1")])

    assert {(d.queue, d.outcome.created) for d in outcome.deliveries} == {
        ("a", False),
        ("b", True),
    }


async def test_a_paused_queue_refuses_the_whole_publish(service: QueueService):
    await _setup(
        service,
        ("a", QueueConfig()),
        ("b", QueueConfig(enqueue_paused=True)),
        ("c", QueueConfig()),
    )
    await service.put_topic(NS, "t", [SubscriptionSpec(q) for q in ("a", "b", "c")])

    with pytest.raises(QueuePausedError, match="shop/b") as refused:
        await service.publish(NS, "t", [NewMessage(id="m1"), NewMessage(id="m2")])

    assert refused.value.details == {"queue": "b"}
    for queue in ("a", "b", "c"):
        assert await _ids(service, queue) == set()


async def test_an_exclusive_queue_without_its_key_refuses_the_whole_publish(
    service: QueueService,
):
    await _setup(
        service,
        ("a", QueueConfig()),
        ("per-user", QueueConfig(kind="exclusive", exclusive_key="user")),
    )
    await service.put_topic(NS, "t", [SubscriptionSpec("a"), SubscriptionSpec("per-user")])
    batch = [NewMessage(id="m1", metadata={"user": "u1"}), NewMessage(id="m2")]

    with pytest.raises(ValidationError, match="per-user") as refused:
        await service.publish(NS, "t", batch)

    assert refused.value.field == "messages[1].metadata.user"
    assert await _ids(service, "a") == await _ids(service, "per-user") == set()

    await service.publish(NS, "t", [NewMessage(id="m3", metadata={"user": "u1"})])
    message = await service.get_message(NS, "per-user", "m3")
    assert message.exclusive_value == "u1"


async def test_tag_filters_choose_the_queues(service: QueueService):
    await _setup(service, ("all", QueueConfig()), ("ab", QueueConfig(filter_keys=("tag",))))
    await service.put_topic(
        NS, "t", [SubscriptionSpec("all"), SubscriptionSpec("ab", TagFilter("tag", ("A", "B")))]
    )

    outcomes = await service.publish(
        NS,
        "t",
        [
            NewMessage(id="a", metadata={"tag": "A"}),
            NewMessage(id="c", metadata={"tag": "C"}),
            NewMessage(id="b", metadata={"tag": "B"}),
            NewMessage(id="none"),
        ],
    )

    assert [sorted(d.queue for d in o.deliveries) for o in outcomes] == [
        ["ab", "all"],
        ["all"],
        ["ab", "all"],
        ["all"],
    ]
    assert await _ids(service, "ab") == {"a", "b"}
    # The queue's own filter key still extracts its filter value.
    leased = await service.dequeue(NS, "ab", count=10, metadata={"tag": "B"})
    assert [m.id for m in leased] == ["b"]


async def test_a_filter_nobody_accepts_publishes_nothing(service: QueueService):
    await _setup(service, ("paused", QueueConfig(enqueue_paused=True)))
    await service.put_topic(NS, "t", [SubscriptionSpec("paused", TagFilter("k", ("x",)))])

    [outcome] = await service.publish(NS, "t", [NewMessage(id="m", metadata={"k": "y"})])

    assert outcome.deliveries == []  # the paused queue would not receive it: no refusal


async def test_put_topic_replaces_the_subscriptions(service: QueueService):
    await _setup(service, ("a", QueueConfig()), ("b", QueueConfig()), ("c", QueueConfig()))
    await service.put_topic(NS, "t", [SubscriptionSpec("a"), SubscriptionSpec("b")])

    topic, created = await service.put_topic(
        NS, "t", [SubscriptionSpec("b", TagFilter("k", ("v",))), SubscriptionSpec("c")]
    )

    assert not created
    assert [(s.queue.name, s.tags) for s in topic.subscriptions] == [
        ("b", TagFilter("k", ("v",))),
        ("c", None),
    ]
    [listed] = await service.list_topics(NS)
    assert listed.name == "t"


async def test_unsubscribe_and_delete(service: QueueService):
    await _setup(service, ("a", QueueConfig()), ("b", QueueConfig()))
    await service.put_topic(NS, "t", [SubscriptionSpec("a"), SubscriptionSpec("b")])

    await service.unsubscribe(NS, "t", "b")
    [outcome] = await service.publish(NS, "t", [NewMessage(id="m")])
    assert [d.queue for d in outcome.deliveries] == ["a"]
    touched = (await service.get_topic(NS, "t")).updated_at
    with pytest.raises(NotFoundError, match="not subscribed"):
        await service.unsubscribe(NS, "t", "b")
    assert (await service.get_topic(NS, "t")).updated_at == touched  # a no-op changes nothing

    await service.delete_queue(NS, "a")  # its subscription goes with it
    assert (await service.get_topic(NS, "t")).subscriptions == []

    await service.delete_topic(NS, "t")
    with pytest.raises(NotFoundError):
        await service.publish(NS, "t", [NewMessage()])
    assert await _ids(service, "b") == set()


async def test_bad_subscriptions_are_refused_naming_the_field(service: QueueService):
    await _setup(service, ("a", QueueConfig()))

    with pytest.raises(ValidationError) as missing:
        await service.put_topic(NS, "t", [SubscriptionSpec("a"), SubscriptionSpec("nope")])
    assert missing.value.field == "subscriptions[1].queue"
    with pytest.raises(ValidationError) as twice:
        await service.put_topic(NS, "t", [SubscriptionSpec("a"), SubscriptionSpec("a")])
    assert twice.value.field == "subscriptions[1].queue"
    with pytest.raises(ValidationError) as empty:
        await service.put_topic(NS, "t", [SubscriptionSpec("a", TagFilter("k", ()))])
    assert empty.value.field == "subscriptions[0].tags"
    with pytest.raises(ValidationError) as name:
        await service.put_topic(NS, "bad name", [])
    assert name.value.field == "name"
    with pytest.raises(NotFoundError):
        await service.get_topic(NS, "t")  # nothing was made


async def test_a_topic_reaches_a_bounded_number_of_queues(service: QueueService, monkeypatch):
    from app.core.service import topics

    monkeypatch.setattr(topics, "MAX_SUBSCRIPTIONS", 2)
    await _setup(service, ("a", QueueConfig()), ("b", QueueConfig()), ("c", QueueConfig()))
    with pytest.raises(ValidationError) as too_many:
        await service.put_topic(NS, "t", [SubscriptionSpec(q) for q in ("a", "b", "c")])
    assert too_many.value.field == "subscriptions"
    await service.put_topic(NS, "t", [SubscriptionSpec("a"), SubscriptionSpec("b")])
    with pytest.raises(ValidationError) as one_more:
        await service.subscribe(NS, "t", "c")
    assert one_more.value.field == "queue"
    await service.subscribe(NS, "t", "b", TagFilter("k", ("v",)))  # a change, not one more
