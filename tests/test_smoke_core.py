from app.core.models import NewMessage, QueueConfig


async def test_enqueue_dequeue_complete(service):
    await service.create_namespace("ns")
    await service.put_queue("ns", "q", QueueConfig())
    out = await service.enqueue("ns", "q", [NewMessage(id="a")])
    assert out[0].created
    (leased,) = await service.dequeue("ns", "q")
    done = await service.complete("ns", "q", "a", leased.lease_id)
    assert done.state == "completed"
