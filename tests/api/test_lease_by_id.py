"""Leasing a message by its id (``POST …/messages/{id}/lease``, dyno-queues' ``popWithMsgId``):
the message is leased exactly as a dequeue leases it when it is ready, and refused with the
reason when it is not."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api.conftest import Caller, assert_error
from tests.api.messages import dequeue, enqueue, parse
from tests.helpers import execute, make_due
from tests.observability.helpers import scrape, value


def lease_path(queue: str, message_id: str) -> str:
    return f"{queue}/messages/{message_id}/lease"


async def lease(caller: Caller, queue: str, message_id: str, **body: Any) -> dict[str, Any]:
    response = await caller.post(lease_path(queue, message_id), json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def test_a_pending_message_is_leased_as_a_dequeue_leases_it(
    alpha: Caller, queue: str
) -> None:
    await enqueue(
        alpha,
        queue,
        {"id": "a", "priority": 1, "payload": {"n": 1}},
        {"id": "b", "priority": 2, "payload": {"n": 2}, "metadata": {"k": "v"}},
    )
    leased = await lease(alpha, queue, "b")  # not the best priority: named
    [dequeued] = await dequeue(alpha, queue)  # the other one, with a dequeue's answer
    assert set(leased) == set(dequeued)
    assert (leased["id"], leased["attempt"], leased["priority"]) == ("b", 1, 2)
    assert (leased["payload"], leased["metadata"]) == ({"n": 2}, {"k": "v"})
    assert dequeued["id"] == "a"
    message = (await alpha.get(f"{queue}/messages/b")).json()
    assert (message["state"], message["lease_id"]) == ("running", leased["lease_id"])
    assert parse(message["lease_expires_at"]) == parse(leased["lease_expires_at"])
    # The lease fences as any lease does.
    done = await alpha.post(f"{queue}/messages/b/complete", json={"lease_id": leased["lease_id"]})
    assert done.status_code == 200, done.text
    assert done.json()["state"] == "completed"


async def test_the_lease_lasts_the_requests_lease_seconds_else_the_messages_else_the_queues(
    alpha: Caller, queue: str
) -> None:
    await enqueue(alpha, queue, {"id": "a"}, {"id": "b", "lease_seconds": 600}, {"id": "c"})

    async def seconds(leased: dict[str, Any]) -> float:
        message = (await alpha.get(f"{queue}/messages/{leased['id']}")).json()
        return (parse(leased["lease_expires_at"]) - parse(message["updated_at"])).total_seconds()

    assert round(await seconds(await lease(alpha, queue, "a", lease_seconds=120))) == 120
    assert round(await seconds(await lease(alpha, queue, "b"))) == 600
    assert round(await seconds(await lease(alpha, queue, "c"))) == 30
    for bad in (0, 43201, "5"):
        response = await alpha.post(lease_path(queue, "a"), json={"lease_seconds": bad})
        assert_error(response, 400, "validation_error", "lease_seconds")
    assert_error(
        await alpha.post(lease_path(queue, "a"), json={"count": 1}), 400, "validation_error"
    )


async def test_a_due_invisible_message_is_leased_and_a_future_one_refused(
    alpha: Caller, queue: str, engine: AsyncEngine
) -> None:
    await enqueue(alpha, queue, {"id": "later", "delay_seconds": 3600})
    refused = assert_error(await alpha.post(lease_path(queue, "later")), 409, "invalid_state")
    assert refused["details"]["state"] == "invisible"
    assert "visible_at" in refused["message"]
    assert await make_due(engine, ids=["later"]) == 1  # due, the scheduler has not promoted it
    assert (await lease(alpha, queue, "later"))["attempt"] == 1


async def test_running_finished_expired_and_absent_messages_are_refused(
    alpha: Caller, queue: str, engine: AsyncEngine
) -> None:
    await enqueue(alpha, queue, {"id": "r"}, {"id": "f"}, {"id": "x", "ttl_seconds": 60})
    await lease(alpha, queue, "r")
    running = assert_error(await alpha.post(lease_path(queue, "r")), 409, "invalid_state")
    assert running["details"]["state"] == "running"
    leased = await lease(alpha, queue, "f")
    await alpha.post(f"{queue}/messages/f/complete", json={"lease_id": leased["lease_id"]})
    finished = assert_error(await alpha.post(lease_path(queue, "f")), 409, "invalid_state")
    assert finished["details"]["state"] == "completed"
    # Expired, and not yet canceled by the scheduler: a dequeue would not take it either.
    await execute(engine, "UPDATE messages SET expires_at = now() - interval '1 s' WHERE id = 'x'")
    expired = assert_error(await alpha.post(lease_path(queue, "x")), 409, "invalid_state")
    assert (expired["details"]["state"], "expired" in expired["message"]) == ("pending", True)
    assert await dequeue(alpha, queue) == []

    missing = assert_error(await alpha.post(lease_path(queue, "nope")), 404, "not_found")
    assert missing["details"]["message_id"] == "nope"
    assert_error(await alpha.post(lease_path(queue, "bad id!")), 404, "not_found")
    assert_error(
        await alpha.post("/v1/namespaces/alpha/queues/none/messages/a/lease"), 404, "not_found"
    )


async def test_a_dequeue_paused_queue_refuses_and_a_resumed_one_leases(
    alpha: Caller, queue: str
) -> None:
    await enqueue(alpha, queue, {"id": "a"})
    assert (await alpha.patch(queue, json={"dequeue_paused": True})).status_code == 200
    paused = assert_error(await alpha.post(lease_path(queue, "a")), 409, "queue_paused")
    assert "dequeue" in paused["message"]
    assert (await alpha.get(f"{queue}/messages/a")).json()["state"] == "pending"
    assert (await alpha.patch(queue, json={"dequeue_paused": False})).status_code == 200
    assert (await lease(alpha, queue, "a"))["id"] == "a"


async def test_an_exclusive_value_that_runs_refuses_the_lease_of_another_of_its_messages(
    alpha: Caller,
) -> None:
    base = "/v1/namespaces/alpha/queues/builds"
    put = await alpha.put(base, json={"kind": "exclusive", "exclusive_key": "project"})
    assert put.status_code == 201, put.text
    await enqueue(
        alpha,
        base,
        {"id": "w1", "metadata": {"project": "web"}},
        {"id": "w2", "metadata": {"project": "web"}},
        {"id": "a1", "metadata": {"project": "api"}},
    )
    first = await lease(alpha, base, "w2")  # named: ahead of w1
    busy = assert_error(await alpha.post(lease_path(base, "w1")), 409, "invalid_state")
    assert busy["details"] == {"state": "pending", "exclusive_value": "web"}
    assert [m["id"] for m in await dequeue(alpha, base, count=10)] == ["a1"]
    await alpha.post(f"{base}/messages/w2/complete", json={"lease_id": first["lease_id"]})
    assert (await lease(alpha, base, "w1"))["id"] == "w1"  # web is free again


async def dequeued_total(caller: Caller) -> float:
    """``sundial_messages_dequeued_total`` of queue ``q`` of ``alpha`` (0 before its first lease);
    the counter adds up over the tests of a run."""
    samples = await scrape(caller)
    return value(samples, "sundial_messages_dequeued_total", namespace="alpha", queue="q")


async def test_a_lease_by_id_is_counted_as_a_dequeue(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a"}, {"id": "b"})
    before = await dequeued_total(alpha)
    await lease(alpha, queue, "a")
    assert await dequeued_total(alpha) == before + 1
    assert_error(await alpha.post(lease_path(queue, "a")), 409, "invalid_state")
    assert await dequeued_total(alpha) == before + 1  # a refusal counts nothing


async def test_the_endpoint_is_in_the_openapi_document(alpha: Caller) -> None:
    schema = (await alpha.get("/schema/openapi.json")).json()
    operation = schema["paths"]["/v1/namespaces/{ns}/queues/{queue}/messages/{message_id}/lease"]
    assert set(operation["post"]["responses"]) >= {"200", "400", "404", "409"}
