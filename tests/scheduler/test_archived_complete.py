"""A repeated complete is an idempotent 200 even after the scheduler moved the message into
history: a consumer that lost the answer to its complete may send it again at any time.

The queue keeps finished messages for 0 seconds, and the scheduler's cleanup (the archive pass)
runs between the complete and its repeat. Another lease is still refused, as before.
"""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncEngine

from app.store import maintenance
from tests.api.conftest import Caller, assert_error
from tests.helpers import scalar


async def archive(engine: AsyncEngine) -> int:
    """Run the scheduler's cleanup: finished messages past retention move into history."""
    async with engine.connect() as conn:
        return await maintenance.archive_finished(conn)


async def test_a_complete_repeated_after_the_archive_answers_as_the_first(
    alpha: Caller, engine: AsyncEngine
) -> None:
    base = f"/v1/namespaces/{alpha.namespace}/queues/jobs"
    created = await alpha.put(base, json={"retention_seconds": 0})
    assert created.status_code == 201, created.text
    for message_id in ("done", "other"):
        enqueued = await alpha.post(
            f"{base}/messages",
            json={"messages": [{"id": message_id, "payload": {"n": 1}, "ttl_seconds": 3600}]},
        )
        assert enqueued.status_code == 201, enqueued.text
    leased = (await alpha.post(f"{base}/dequeue", json={"count": 2})).json()["messages"]
    lease = {m["id"]: m["lease_id"] for m in leased}
    first = await alpha.post(f"{base}/messages/done/complete", json={"lease_id": lease["done"]})
    assert first.status_code == 200, first.text
    assert first.json()["state"] == "completed"

    assert await archive(engine) == 1
    assert (await alpha.get(f"{base}/messages/done")).status_code == 404  # out of the live table
    assert await scalar(engine, "SELECT count(*) FROM message_history WHERE id = 'done'") == 1

    again = await alpha.post(f"{base}/messages/done/complete", json={"lease_id": lease["done"]})
    assert again.status_code == 200, again.text
    assert again.json() == first.json()

    # Any other lease is refused as it was: the message is not in the queue any more.
    for stale in (lease["other"], str(uuid.uuid4()), "not-a-lease"):
        refused = await alpha.post(f"{base}/messages/done/complete", json={"lease_id": stale})
        assert_error(refused, 404, "not_found")
    refused = await alpha.post(f"{base}/messages/done/fail", json={"lease_id": lease["done"]})
    assert_error(refused, 404, "not_found")

    # The batch acknowledgement accepts the same repeat, and only it.
    acked = await alpha.post(
        f"{base}/ack",
        json={
            "complete": [
                {"id": "done", "lease_id": lease["done"]},
                {"id": "done", "lease_id": lease["other"]},
                {"id": "other", "lease_id": lease["other"]},
            ]
        },
    )
    assert acked.status_code == 200, acked.text
    assert acked.json()["results"] == [
        {"id": "done", "ok": True},
        {"id": "done", "ok": False, "error": "not_found"},
        {"id": "other", "ok": True},
    ]
    assert await archive(engine) == 1
    acked = await alpha.post(
        f"{base}/ack", json={"complete": [{"id": "other", "lease_id": lease["other"]}]}
    )
    assert acked.json()["results"] == [{"id": "other", "ok": True}]


async def test_a_repeat_finds_its_message_after_the_id_was_enqueued_again(
    alpha: Caller, engine: AsyncEngine
) -> None:
    """Idempotent enqueue covers the live table only: once archived, the id can be enqueued
    again. The old lease's repeat still answers with the message it completed; the new
    message's lease is untouched."""
    base = f"/v1/namespaces/{alpha.namespace}/queues/jobs"
    assert (await alpha.put(base, json={"retention_seconds": 0})).status_code == 201
    body = {"messages": [{"id": "again", "payload": {"life": 1}}]}
    assert (await alpha.post(f"{base}/messages", json=body)).status_code == 201
    (old,) = (await alpha.post(f"{base}/dequeue", json={})).json()["messages"]
    first = await alpha.post(f"{base}/messages/again/complete", json={"lease_id": old["lease_id"]})
    assert first.status_code == 200, first.text
    assert await archive(engine) == 1

    body = {"messages": [{"id": "again", "payload": {"life": 2}}]}
    assert (await alpha.post(f"{base}/messages", json=body)).json()["messages"][0]["created"]
    (new,) = (await alpha.post(f"{base}/dequeue", json={})).json()["messages"]
    repeat = await alpha.post(f"{base}/messages/again/complete", json={"lease_id": old["lease_id"]})
    assert repeat.status_code == 200, repeat.text
    assert repeat.json() == first.json()
    live = (await alpha.get(f"{base}/messages/again")).json()
    assert (live["state"], live["lease_id"], live["payload"]) == (
        "running",
        new["lease_id"],
        {"life": 2},
    )
