"""``POST …/ack`` with ``dequeue``: a worker's cycle in one request. The acknowledgement applies
as without it, then messages are leased as a dequeue leases them (one transaction on a simple
queue); bad input in either part applies nothing; a paused queue leases nothing; an exclusive
queue's freed value can be leased again in the same call; a long poll waits after the ack."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.api.conftest import Caller, assert_error
from tests.api.messages import LEASED_FIELDS, dequeue, enqueue

ZERO = "00000000-0000-0000-0000-000000000000"


async def ack(caller: Caller, queue: str, **body: Any) -> dict[str, Any]:
    response = await caller.post(f"{queue}/ack", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def state(caller: Caller, queue: str, message_id: str) -> str:
    answer: str = (await caller.get(f"{queue}/messages/{message_id}")).json()["state"]
    return answer


async def test_completes_and_leases_the_next_in_priority_order(alpha: Caller, queue: str) -> None:
    await enqueue(
        alpha,
        queue,
        {"id": "a", "priority": 1},
        {"id": "b", "priority": 3},
        {"id": "c", "priority": 2},
        {"id": "d", "priority": 4},
    )
    (first,) = await dequeue(alpha, queue)
    answer = await ack(
        alpha,
        queue,
        complete=[{"id": "a", "lease_id": first["lease_id"]}, {"id": "x", "lease_id": ZERO}],
        dequeue={"count": 2, "lease_seconds": 60},
    )
    assert answer["results"] == [
        {"id": "a", "ok": True},
        {"id": "x", "ok": False, "error": "not_found"},
    ]
    assert [m["id"] for m in answer["messages"]] == ["c", "b"]
    assert all(set(m) == LEASED_FIELDS and m["attempt"] == 1 for m in answer["messages"])
    assert await state(alpha, queue, "a") == "completed"
    assert {await state(alpha, queue, i) for i in "cb"} == {"running"}
    # The leases it handed out are current: completing with them works.
    leases = {m["id"]: m["lease_id"] for m in answer["messages"]}
    done = await ack(
        alpha, queue, complete=[{"id": i, "lease_id": lease} for i, lease in leases.items()]
    )
    assert done == {"results": [{"id": "c", "ok": True}, {"id": "b", "ok": True}]}
    # Nothing to acknowledge: a plain dequeue; nothing left to lease: an empty list.
    assert [m["id"] for m in (await ack(alpha, queue, dequeue={}))["messages"]] == ["d"]
    assert await ack(alpha, queue, dequeue={"count": 5}) == {"results": [], "messages": []}


async def test_fail_items_and_metadata_filter(alpha: Caller, queue: str) -> None:
    await enqueue(
        alpha,
        queue,
        {"id": "a"},
        {"id": "t1", "metadata": {"t": "1"}},
        {"id": "t2", "metadata": {"t": "2"}},
    )
    (first,) = await dequeue(alpha, queue)
    answer = await ack(
        alpha,
        queue,
        fail=[{"id": "a", "lease_id": first["lease_id"], "error": "boom"}],
        dequeue={"count": 10, "metadata": {"t": "2"}},
    )
    assert answer["results"] == [{"id": "a", "ok": True}]
    assert [m["id"] for m in answer["messages"]] == ["t2"]
    failed = (await alpha.get(f"{queue}/messages/a")).json()
    assert (failed["state"], failed["last_error"]) == ("pending", "boom")


async def test_bad_input_in_either_part_applies_nothing(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a"}, {"id": "b"})
    (first,) = await dequeue(alpha, queue)
    complete = [{"id": "a", "lease_id": first["lease_id"]}]
    cases: list[tuple[Any, str]] = [
        ({"count": 0}, "dequeue.count"),
        ({"count": 101}, "dequeue.count"),
        ({"lease_seconds": 0}, "dequeue.lease_seconds"),
        ({"wait_seconds": 21}, "dequeue.wait_seconds"),
        ({"metadata": {"": "v"}}, "dequeue.metadata"),
        ({"bogus": 1}, "dequeue.bogus"),
        ("now", "dequeue"),
    ]
    for then, field in cases:
        response = await alpha.post(f"{queue}/ack", json={"complete": complete, "dequeue": then})
        assert_error(response, 400, "validation_error", field)
    too_many = {"complete": complete * 1001, "dequeue": {}}
    assert_error(await alpha.post(f"{queue}/ack", json=too_many), 400, "validation_error")
    assert await state(alpha, queue, "a") == "running"  # not completed
    assert await state(alpha, queue, "b") == "pending"  # not leased
    response = await alpha.post("/v1/namespaces/alpha/queues/nope/ack", json={"dequeue": {}})
    assert_error(response, 404, "not_found")


async def test_a_paused_queue_acknowledges_but_leases_nothing(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a"}, {"id": "b"})
    (first,) = await dequeue(alpha, queue)
    await alpha.patch(queue, json={"dequeue_paused": True})
    complete = [{"id": "a", "lease_id": first["lease_id"]}]
    answer = await ack(alpha, queue, complete=complete, dequeue={"count": 5})
    assert answer == {"results": [{"id": "a", "ok": True}], "messages": []}
    assert await state(alpha, queue, "b") == "pending"


async def test_an_exclusive_value_freed_by_the_ack_is_leased_again(alpha: Caller) -> None:
    queue = "/v1/namespaces/alpha/queues/cycle-x"
    await alpha.put(queue, json={"kind": "exclusive", "exclusive_key": "k"})
    await enqueue(
        alpha, queue, {"id": "k1-a", "metadata": {"k": "1"}}, {"id": "k1-b", "metadata": {"k": "1"}}
    )
    (first,) = await dequeue(alpha, queue, count=2)
    assert first["id"] == "k1-a"  # one message per value at a time
    answer = await ack(
        alpha, queue, complete=[{"id": "k1-a", "lease_id": first["lease_id"]}], dequeue={"count": 2}
    )
    assert answer["results"] == [{"id": "k1-a", "ok": True}]
    assert [m["id"] for m in answer["messages"]] == ["k1-b"]


async def test_a_long_poll_waits_after_the_acknowledgement(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a"})
    (first,) = await dequeue(alpha, queue)
    body = {
        "complete": [{"id": "a", "lease_id": first["lease_id"]}],
        "dequeue": {"wait_seconds": 10},
    }
    waiting = asyncio.create_task(alpha.post(f"{queue}/ack", json=body))
    # The acknowledgement is committed before the wait begins: once the request is parked,
    # the message is completed.
    registry = alpha.runtime.waiters
    queue_id = (await alpha.runtime.service.get_queue_or_404("alpha", "q")).id
    await asyncio.wait_for(registry.wait_for_waiting(queue_id, 1), 10)
    assert await state(alpha, queue, "a") == "completed"
    assert not waiting.done()
    await enqueue(alpha, queue, {"id": "b"})
    response = await asyncio.wait_for(waiting, 10)
    assert response.json()["results"] == [{"id": "a", "ok": True}]
    assert [m["id"] for m in response.json()["messages"]] == ["b"]
