"""Issue #20's metrics after a controlled scenario: the dead-letter gauge per queue (errored
messages of the live table), and the histograms of how long messages wait for their first lease
and how long leases are held until complete or fail, per queue.

The histograms are process metrics, which add up over a run: they are compared before and
after. The gauge is this test's database, read by the first scrape."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api.conftest import Caller
from tests.api.messages import dequeue, enqueue
from tests.helpers import execute
from tests.observability.helpers import Samples, scrape, value

LABELS = {"namespace": "alpha", "queue": "q"}


async def test_dead_letter_gauge_counts_errored_messages_per_queue(alpha: Caller) -> None:
    queue = "/v1/namespaces/alpha/queues/q"
    other = "/v1/namespaces/alpha/queues/other"
    await alpha.put(queue, json={"max_attempts": 1})
    await alpha.put(other, json={})
    await enqueue(alpha, queue, {"id": "a"}, {"id": "b"}, {"id": "c"}, {"id": "d"})
    await enqueue(alpha, other, {"id": "x"})
    for message in await dequeue(alpha, queue, count=3):
        body = {"lease_id": message["lease_id"]}
        assert (await alpha.post(f"{queue}/messages/{message['id']}/fail", json=body)).is_success
    await alpha.post(f"{queue}/messages/d/cancel")  # canceled: not a dead letter here
    response = await alpha.post(f"{queue}/dead-letters/delete", json={"limit": 1})
    assert response.json() == {"deleted": 1}
    samples = await scrape(alpha)
    pool = {"pool": "default", "namespace": "alpha"}
    assert value(samples, "sundial_queue_dead_letters", **pool, queue="q") == 2
    assert value(samples, "sundial_queue_dead_letters", **pool, queue="other") == 0
    assert ("sundial_queue_dead_letters", frozenset({**pool, "queue": "other"}.items())) in samples


def _bucket(samples: Samples, name: str, le: str) -> float:
    return value(samples, f"{name}_bucket", **LABELS, le=le)


async def test_wait_and_processing_histograms(
    alpha: Caller, queue: str, engine: AsyncEngine
) -> None:
    before = await scrape(alpha)
    await enqueue(alpha, queue, {"id": "x", "priority": 1}, {"id": "y", "priority": 2})
    # x became ready 10 s ago, y 60 s ago.
    for message_id, seconds in (("x", 10), ("y", 60)):
        await execute(
            engine,
            "UPDATE messages SET enqueued_at = enqueued_at - make_interval(secs => :s),"
            " visible_at = visible_at - make_interval(secs => :s) WHERE id = :id",
            s=seconds,
            id=message_id,
        )
    x, y = await dequeue(alpha, queue, count=2)
    # x's lease was granted 10 s before its complete, y's 200 s before its fail.
    for message_id, seconds in (("x", 10), ("y", 200)):
        await execute(
            engine,
            "UPDATE messages SET leased_at = leased_at - make_interval(secs => :s) WHERE id = :id",
            s=seconds,
            id=message_id,
        )
    done = {"lease_id": x["lease_id"]}
    assert (await alpha.post(f"{queue}/messages/x/complete", json=done)).is_success
    ack = {"fail": [{"id": "y", "lease_id": y["lease_id"], "error": "boom"}]}
    assert (await alpha.post(f"{queue}/ack", json=ack)).json()["results"][0]["ok"]
    # y's second lease is not a first lease: no wait is observed for it.
    [again] = await dequeue(alpha, queue)
    assert (again["id"], again["attempt"]) == ("y", 2)
    after = await scrape(alpha)

    def moved(name: str, le: str | None = None) -> float:
        if le is None:
            return value(after, name, **LABELS) - value(before, name, **LABELS)
        return _bucket(after, name, le) - _bucket(before, name, le)

    wait = "sundial_message_wait_seconds"
    assert moved(f"{wait}_count") == 2
    assert (moved(wait, "5.0"), moved(wait, "30.0"), moved(wait, "120.0")) == (0, 1, 2)
    assert moved(wait, "+Inf") == 2
    assert 70 <= moved(f"{wait}_sum") < 100
    processing = "sundial_message_processing_seconds"
    assert moved(f"{processing}_count") == 2
    assert (moved(processing, "5.0"), moved(processing, "30.0")) == (0, 1)
    assert (moved(processing, "120.0"), moved(processing, "600.0")) == (1, 2)
    assert 210 <= moved(f"{processing}_sum") < 260
