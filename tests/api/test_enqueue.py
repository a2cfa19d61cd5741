"""Enqueue over HTTP: request order and raw payloads, idempotent ids, validation (all or nothing)
and refusals, and the exclusive queue's key."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import PAYLOAD_LIMIT, Caller, assert_error
from tests.api.messages import dequeue, enqueue


async def test_enqueue_in_request_order_with_raw_payloads(alpha: Caller, queue: str) -> None:
    payloads: list[Any] = [{"a": [1, 2.5, None, True]}, "text", 42, None, [], "é ✓ \\u"]
    body = {"messages": [{"id": f"m{i}", "payload": p} for i, p in enumerate(payloads)]}
    body["messages"].append({"metadata": {"k": "v"}})  # no id, no payload
    response = await alpha.post(f"{queue}/messages", json=body)
    assert response.status_code == 201
    out = response.json()["messages"]
    assert [m["id"] for m in out[:-1]] == [f"m{i}" for i in range(len(payloads))]
    assert all(m == {"id": m["id"], "state": "pending", "created": True} for m in out)
    generated = out[-1]["id"]
    assert generated

    for i, payload in enumerate(payloads):
        message = (await alpha.get(f"{queue}/messages/m{i}")).json()
        assert message["payload"] == payload
    message = (await alpha.get(f"{queue}/messages/{generated}")).json()
    assert message["payload"] is None
    assert message["metadata"] == {"k": "v"}


async def test_payload_bytes_are_passed_through(alpha: Caller, queue: str) -> None:
    raw = b'{"messages": [{"id": "r", "payload": {"big": 12345678901234567890123, "f": 1e400}}]}'
    response = await alpha.post(f"{queue}/messages", content=raw)
    assert response.status_code == 201, response.text
    (leased,) = await dequeue(alpha, queue)
    text = (await alpha.get(f"{queue}/messages/r")).text
    assert "12345678901234567890123" in text
    assert leased["payload"]["big"] == 12345678901234567890123


async def test_duplicate_ids_are_idempotent(alpha: Caller, queue: str) -> None:
    first = await enqueue(alpha, queue, {"id": "a", "priority": 5})
    assert first == [{"id": "a", "state": "pending", "created": True}]
    await dequeue(alpha, queue)
    again = await enqueue(alpha, queue, {"id": "a", "priority": 1}, {"id": "b"})
    assert again == [
        {"id": "a", "state": "running", "created": False},
        {"id": "b", "state": "pending", "created": True},
    ]
    assert (await alpha.get(f"{queue}/messages/a")).json()["priority"] == 5

    batch = await enqueue(alpha, queue, {"id": "c", "priority": 1}, {"id": "c", "priority": 2})
    assert batch == [
        {"id": "c", "state": "pending", "created": True},
        {"id": "c", "state": "pending", "created": False},
    ]
    assert (await alpha.get(f"{queue}/messages/c")).json()["priority"] == 1


async def test_enqueue_validation(alpha: Caller, queue: str) -> None:
    url = f"{queue}/messages"
    cases: list[tuple[Any, str]] = [
        ({"messages": [{"priority": "1"}]}, "messages[0].priority"),
        ({"messages": [{"priority": 1.5}]}, "messages[0].priority"),
        ({"messages": [{}, {}, {}, {"priority": True}]}, "messages[3].priority"),
        ({"messages": [{"priority": 2**63}]}, "messages[0].priority"),
        ({"messages": [{"delay_seconds": 5, "visible_at": "2030-01-01T00:00:00Z"}]},
         "messages[0].visible_at"),
        ({"messages": [{"ttl_seconds": 5, "expires_at": "2030-01-01T00:00:00Z"}]},
         "messages[0].expires_at"),
        ({"messages": [{"visible_at": "2030-01-01T00:00:00"}]}, "messages[0].visible_at"),
        ({"messages": [{"visible_at": "tomorrow"}]}, "messages[0].visible_at"),
        ({"messages": [{"id": "bad id"}]}, "messages[0].id"),
        ({"messages": [{"id": "x" * 201}]}, "messages[0].id"),
        ({"messages": [{"metadata": {"k": 1}}]}, "messages[0].metadata"),
        ({"messages": [{"metadata": {f"k{i}": "v" for i in range(17)}}]}, "messages[0].metadata"),
        ({"messages": [{"max_attempts": 0}]}, "messages[0].max_attempts"),
        ({"messages": [{"lease_seconds": -1}]}, "messages[0].lease_seconds"),
        ({"messages": [{"delay_seconds": "5"}]}, "messages[0].delay_seconds"),
        ({"messages": [{"payload": "nul \u0000"}]}, "messages[0].payload"),
        ({"messages": [{"bogus": 1}]}, "messages[0].bogus"),
        ({"messages": []}, "messages"),
        ({"messages": [{}] * 1001}, "messages"),
        ({"messages": {}}, "messages"),
        ({}, "messages"),
        ({"message": []}, "message"),
    ]  # fmt: skip
    for body, field in cases:
        assert_error(await alpha.post(url, json=body), 400, "validation_error", field)
    # all or nothing: nothing of the refused batches was stored
    page = (await alpha.get(url)).json()
    assert page == {"messages": [], "next_cursor": None}


async def test_enqueue_refusals(alpha: Caller, queue: str) -> None:
    big = {"messages": [{"id": "ok"}, {"payload": "x" * PAYLOAD_LIMIT}]}
    error = assert_error(await alpha.post(f"{queue}/messages", json=big), 413, "payload_too_large")
    assert error["details"]["field"] == "messages[1].payload"

    await alpha.patch(queue, json={"enqueue_paused": True})
    response = await alpha.post(f"{queue}/messages", json={"messages": [{}]})
    assert_error(response, 409, "queue_paused")

    response = await alpha.post(
        "/v1/namespaces/alpha/queues/nope/messages", json={"messages": [{}]}
    )
    assert_error(response, 404, "not_found")


async def test_exclusive_queue(alpha: Caller) -> None:
    queue = "/v1/namespaces/alpha/queues/ex"
    await alpha.put(queue, json={"kind": "exclusive", "exclusive_key": "project"})
    response = await alpha.post(f"{queue}/messages", json={"messages": [{"metadata": {}}]})
    assert_error(response, 400, "validation_error", "messages[0].metadata.project")
    await enqueue(
        alpha,
        queue,
        {"id": "a1", "metadata": {"project": "a"}, "priority": 1},
        {"id": "a2", "metadata": {"project": "a"}, "priority": 2},
        {"id": "b1", "metadata": {"project": "b"}, "priority": 3},
    )
    leased = await dequeue(alpha, queue, count=10)
    assert [m["id"] for m in leased] == ["a1", "b1"]
    assert await dequeue(alpha, queue, count=10) == []
    message = (await alpha.get(f"{queue}/messages/a1")).json()
    assert message["exclusive_value"] == "a"
    await alpha.post(f"{queue}/messages/a1/complete", json={"lease_id": leased[0]["lease_id"]})
    assert [m["id"] for m in await dequeue(alpha, queue, count=10)] == ["a2"]
