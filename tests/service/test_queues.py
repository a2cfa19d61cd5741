"""Queues through the service: create, configure, patch, delete, purge, detail and list."""

from __future__ import annotations

import pytest

from app.core.errors import (
    ConflictError,
    NotFoundError,
    ValidationError,
)
from app.core.models import (
    QueueConfig,
)
from app.core.states import State
from tests.helpers import (
    count_messages,
    make_queue,
    shift_back,
    states_of,
)
from tests.service.helpers import NS, Q, lease_one, new


async def test_put_queue_creates_is_idempotent_and_updates(service):
    await service.create_namespace(NS)
    created, was_created = await service.put_queue(NS, Q, QueueConfig(lease_seconds=20))
    assert was_created
    assert created.config == QueueConfig(lease_seconds=20)
    assert (created.namespace, created.name) == (NS, Q)
    same, was_created = await service.put_queue(NS, Q, QueueConfig(lease_seconds=20))
    assert not was_created
    assert same == created
    changed_config = QueueConfig(lease_seconds=60, max_attempts=7, dequeue_paused=True)
    changed, was_created = await service.put_queue(NS, Q, changed_config)
    assert not was_created
    assert changed.id == created.id
    assert changed.config == changed_config
    assert changed.updated_at >= created.updated_at
    assert (await service.get_queue_or_404(NS, Q)).config == changed_config


async def test_put_queue_cannot_change_kind_or_key(service):
    await service.create_namespace(NS)
    await service.put_queue(NS, "s", QueueConfig())
    await service.put_queue(NS, "e", QueueConfig(kind="exclusive", exclusive_key="p"))
    for name, config in [
        ("s", QueueConfig(kind="exclusive", exclusive_key="p")),
        ("e", QueueConfig()),
        ("e", QueueConfig(kind="exclusive", exclusive_key="other")),
        ("e", QueueConfig(kind="exclusive", exclusive_key="other", lease_seconds=5)),
    ]:
        with pytest.raises(ConflictError):
            await service.put_queue(NS, name, config)
    assert (await service.get_queue_or_404(NS, "e")).config.exclusive_key == "p"
    assert (await service.get_queue_or_404(NS, "e")).config.lease_seconds == 30


async def test_put_queue_refusals(service):
    with pytest.raises(NotFoundError):
        await service.put_queue("nowhere", Q, QueueConfig())
    await service.create_namespace(NS)
    with pytest.raises(ValidationError) as info:
        await service.put_queue(NS, "bad name", QueueConfig())
    assert info.value.field == "queue"
    with pytest.raises(ValidationError) as info:
        await service.put_queue(NS, Q, QueueConfig(kind="exclusive"))
    assert info.value.field == "exclusive_key"
    with pytest.raises(ValidationError) as info:
        await service.put_queue(NS, Q, QueueConfig(max_attempts=0))
    assert info.value.field == "max_attempts"
    with pytest.raises(NotFoundError):
        await service.get_queue_or_404(NS, Q)


async def test_update_queue_patch(service, queue):
    patched = await service.update_queue(NS, Q, {"lease_seconds": 99, "retention_seconds": 0})
    assert patched.config == QueueConfig(lease_seconds=99, retention_seconds=0)
    assert (await service.get_queue_or_404(NS, Q)).config == patched.config
    assert await service.update_queue(NS, Q, {}) == patched
    for changes, field in [
        ({"kind": "exclusive"}, "kind"),
        ({"exclusive_key": "p"}, "exclusive_key"),
        ({"lease_seconds": 0}, "lease_seconds"),
        ({"nonsense": 1}, "nonsense"),
    ]:
        with pytest.raises(ValidationError) as info:
            await service.update_queue(NS, Q, changes)
        assert info.value.field == field
    assert (await service.get_queue_or_404(NS, Q)).config == patched.config
    with pytest.raises(NotFoundError):
        await service.update_queue(NS, "nope", {"lease_seconds": 5})


async def test_delete_queue_cascades_messages(service, engine, queue):
    await service.enqueue(NS, Q, [new("a"), new("b"), new("c", delay_seconds=60)])
    await lease_one(service)
    await make_queue(service, NS, "other")
    await service.enqueue(NS, "other", [new("a")])
    await service.delete_queue(NS, Q)
    assert await count_messages(engine, queue.id) == 0
    with pytest.raises(NotFoundError):
        await service.get_queue_or_404(NS, Q)
    with pytest.raises(NotFoundError):
        await service.get_message(NS, Q, "a")
    with pytest.raises(NotFoundError):
        await service.delete_queue(NS, Q)
    assert (await service.get_message(NS, "other", "a")).state is State.PENDING
    # The name can be reused: a new, empty queue.
    fresh, created = await service.put_queue(NS, Q, QueueConfig())
    assert created
    assert fresh.id != queue.id
    assert (await service.queue_detail(NS, Q)).stats.counts == {}


async def test_purge_queue_by_states(service, engine, queue):
    await service.enqueue(
        NS, Q, [new("p1"), new("p2"), new("i", delay_seconds=60), new("r"), new("c")]
    )
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=2)}
    assert set(leases) == {"p1", "p2"}
    await service.complete(NS, Q, "p1", leases["p1"])
    await service.cancel(NS, Q, "c")
    assert await service.purge_queue(NS, Q, ["completed", "canceled"]) == 2
    assert await states_of(engine, queue) == {"p2": "running", "i": "invisible", "r": "pending"}
    assert await service.purge_queue(NS, Q, []) == 0
    with pytest.raises(ValidationError) as info:
        await service.purge_queue(NS, Q, ["pending", "zombie"])
    assert info.value.field == "states[1]"
    assert await service.purge_queue(NS, Q) == 3
    assert await count_messages(engine, queue.id) == 0
    with pytest.raises(NotFoundError):
        await service.purge_queue(NS, "nope")


async def test_queue_detail_counts_and_oldest_pending_age(service, engine, queue):
    detail = await service.queue_detail(NS, Q)
    assert detail.queue == queue
    assert detail.stats.counts == {}
    assert detail.stats.oldest_pending_age_seconds is None
    await service.enqueue(
        NS,
        Q,
        [new("p1"), new("p2"), new("p3"), new("i", delay_seconds=60), new("x"), new("p4")],
    )
    await service.cancel(NS, Q, "x")
    first = await lease_one(service)
    await service.complete(NS, Q, first.id, first.lease_id)
    assert (await lease_one(service)).id == "p2"
    await shift_back(engine, "visible_at", 100, queue=queue, ids=["p3"])
    await shift_back(engine, "visible_at", 1000, queue=queue, ids=["x"])  # not pending
    detail = await service.queue_detail(NS, Q)
    assert detail.stats.counts == {
        State.PENDING: 2,
        State.INVISIBLE: 1,
        State.RUNNING: 1,
        State.COMPLETED: 1,
        State.CANCELED: 1,
    }
    age = detail.stats.oldest_pending_age_seconds
    assert age is not None
    assert 100 <= age < 160
    # list_queues: by name, with the same counts; other namespaces are not listed.
    await make_queue(service, NS, "a", kind="exclusive", exclusive_key="k")
    await make_queue(service, "other", "c")
    await service.enqueue("other", "c", [new("x")])
    listed = await service.list_queues(NS)
    assert [(q.name, counts) for q, counts in listed] == [("a", {}), (Q, detail.stats.counts)]
    with pytest.raises(NotFoundError):
        await service.list_queues("nowhere")
