"""Messages: enqueue, dequeue, per-message operations, batch ack, query, dead letters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.api.conftest import PAYLOAD_LIMIT, Caller, assert_error

MESSAGE_FIELDS = {
    "id", "state", "priority", "payload", "metadata", "attempts", "max_attempts",
    "lease_seconds", "lease_id", "lease_expires_at", "visible_at", "expires_at", "enqueued_at",
    "updated_at", "finished_at", "last_error", "exclusive_value",
}  # fmt: skip
LEASED_FIELDS = {
    "id", "lease_id", "lease_expires_at", "attempt", "priority", "payload", "metadata",
    "enqueued_at",
}  # fmt: skip


async def enqueue(caller: Caller, queue: str, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    response = await caller.post(f"{queue}/messages", json={"messages": list(messages)})
    assert response.status_code == 201, response.text
    result: list[dict[str, Any]] = response.json()["messages"]
    return result


async def dequeue(caller: Caller, queue: str, **body: Any) -> list[dict[str, Any]]:
    response = await caller.post(f"{queue}/dequeue", json=body)
    assert response.status_code == 200, response.text
    result: list[dict[str, Any]] = response.json()["messages"]
    return result


def parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


# --- enqueue ---------------------------------------------------------------------------------


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


# --- dequeue and leases ----------------------------------------------------------------------


async def test_dequeue_by_priority_with_filters(alpha: Caller, queue: str) -> None:
    await enqueue(
        alpha,
        queue,
        {"id": "low", "priority": 10, "payload": {"n": 1}, "metadata": {"t": "x"}},
        {"id": "high", "priority": -5, "metadata": {"t": "y"}},
        {"id": "later", "priority": -9, "delay_seconds": 60},
    )
    (first,) = await dequeue(alpha, queue, metadata={"t": "x"}, lease_seconds=120)
    assert set(first) == LEASED_FIELDS
    assert first["id"] == "low"
    assert first["attempt"] == 1
    assert first["payload"] == {"n": 1}
    assert first["metadata"] == {"t": "x"}
    lease = parse(first["lease_expires_at"]) - datetime.now(UTC)
    assert timedelta(seconds=100) < lease <= timedelta(seconds=121)
    rest = await dequeue(alpha, queue, count=5)
    assert [m["id"] for m in rest] == ["high"]
    assert await dequeue(alpha, queue) == []


async def test_dequeue_validation_and_pause(alpha: Caller, queue: str) -> None:
    cases: list[tuple[Any, str]] = [
        ({"count": 0}, "count"),
        ({"count": 101}, "count"),
        ({"count": "2"}, "count"),
        ({"lease_seconds": 0}, "lease_seconds"),
        ({"wait_seconds": 21}, "wait_seconds"),
        ({"wait_seconds": -1}, "wait_seconds"),
        ({"wait_seconds": 0.5}, "wait_seconds"),
        ({"metadata": {"k": ["v"]}}, "metadata"),
        ({"metadata": "k=v"}, "metadata"),
        ({"bogus": True}, "bogus"),
    ]
    for body, field in cases:
        response = await alpha.post(f"{queue}/dequeue", json=body)
        assert_error(response, 400, "validation_error", field)
    await enqueue(alpha, queue, {"id": "a"})
    await alpha.patch(queue, json={"dequeue_paused": True})
    assert await dequeue(alpha, queue) == []
    await alpha.patch(queue, json={"dequeue_paused": False})
    assert [m["id"] for m in await dequeue(alpha, queue)] == ["a"]
    response = await alpha.post("/v1/namespaces/alpha/queues/nope/dequeue")
    assert_error(response, 404, "not_found")


async def test_complete_and_lease_fencing(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a"})
    (leased,) = await dequeue(alpha, queue)
    url = f"{queue}/messages/a/complete"
    for stale in ("00000000-0000-0000-0000-000000000000", "not-a-uuid", ""):
        assert_error(await alpha.post(url, json={"lease_id": stale}), 409, "lease_mismatch")
    assert_error(await alpha.post(url, json={}), 400, "validation_error", "lease_id")
    response = await alpha.post(url, json={"lease_id": leased["lease_id"]})
    assert response.status_code == 200
    message = response.json()
    assert set(message) == MESSAGE_FIELDS
    assert message["state"] == "completed"
    assert message["finished_at"] is not None
    # a retried complete with the same lease answers the same
    again = await alpha.post(url, json={"lease_id": leased["lease_id"]})
    assert again.status_code == 200
    assert again.json()["state"] == "completed"
    response = await alpha.post(f"{queue}/messages/nope/complete", json={"lease_id": "x"})
    assert_error(response, 404, "not_found")


async def test_fail_extend(alpha: Caller) -> None:
    queue = "/v1/namespaces/alpha/queues/f"
    await alpha.put(queue, json={"max_attempts": 2})
    await enqueue(alpha, queue, {"id": "a"})
    (leased,) = await dequeue(alpha, queue)
    url = f"{queue}/messages/a"

    response = await alpha.post(
        f"{url}/extend", json={"lease_id": leased["lease_id"], "lease_seconds": 600}
    )
    assert response.status_code == 200
    assert parse(response.json()["lease_expires_at"]) > parse(leased["lease_expires_at"])
    response = await alpha.post(f"{url}/extend", json={"lease_id": "x", "lease_seconds": 5})
    assert_error(response, 409, "lease_mismatch")
    response = await alpha.post(f"{url}/extend", json={"lease_id": leased["lease_id"]})
    assert_error(response, 400, "validation_error", "lease_seconds")

    response = await alpha.post(
        f"{url}/fail", json={"lease_id": leased["lease_id"], "error": "boom"}
    )
    assert response.status_code == 200
    assert response.json()["state"] == "pending"
    assert response.json()["last_error"] == "boom"
    assert_error(
        await alpha.post(f"{url}/fail", json={"lease_id": leased["lease_id"]}),
        409,
        "lease_mismatch",
    )

    (leased,) = await dequeue(alpha, queue)
    assert leased["attempt"] == 2
    response = await alpha.post(
        f"{url}/fail", json={"lease_id": leased["lease_id"], "retry_delay_seconds": -1}
    )
    assert_error(response, 400, "validation_error", "retry_delay_seconds")
    response = await alpha.post(f"{url}/fail", json={"lease_id": leased["lease_id"]})
    assert response.json()["state"] == "errored"


async def test_fail_with_retry_delay_makes_invisible(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a"})
    (leased,) = await dequeue(alpha, queue)
    response = await alpha.post(
        f"{queue}/messages/a/fail", json={"lease_id": leased["lease_id"], "retry_delay_seconds": 60}
    )
    assert response.json()["state"] == "invisible"


async def test_cancel(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a"}, {"id": "b"}, {"id": "c"})
    (leased,) = await dequeue(alpha, queue)
    assert leased["id"] == "a"
    url = f"{queue}/messages/a/cancel"
    assert_error(await alpha.post(url, json={}), 409, "lease_mismatch")
    response = await alpha.post(url, json={"lease_id": leased["lease_id"], "reason": "no"})
    assert response.status_code == 200
    assert response.json()["state"] == "canceled"
    assert_error(await alpha.post(url, json={"force": True}), 409, "invalid_state")

    (leased,) = await dequeue(alpha, queue)
    response = await alpha.post(f"{queue}/messages/b/cancel", json={"force": True})
    assert response.json()["state"] == "canceled"
    response = await alpha.post(f"{queue}/messages/c/cancel")
    assert response.json()["state"] == "canceled"
    response = await alpha.post(f"{queue}/messages/c/cancel", json={"force": "yes"})
    assert_error(response, 400, "validation_error", "force")
    assert_error(await alpha.post(f"{queue}/messages/z/cancel"), 404, "not_found")


async def test_requeue_one(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a"}, {"id": "b"})
    url = f"{queue}/messages/a/requeue"
    assert_error(await alpha.post(url), 409, "invalid_state")
    await alpha.post(f"{queue}/messages/a/cancel")
    response = await alpha.post(url, json={})
    assert response.status_code == 200
    assert response.json()["state"] == "pending"
    assert response.json()["attempts"] == 0
    await alpha.post(f"{queue}/messages/b/cancel")
    response = await alpha.post(f"{queue}/messages/b/requeue", json={"delay_seconds": 60})
    assert response.json()["state"] == "invisible"
    assert_error(await alpha.post(f"{queue}/messages/z/requeue"), 404, "not_found")


async def test_ack_batch(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a"}, {"id": "b"}, {"id": "c"})
    leased = {m["id"]: m["lease_id"] for m in await dequeue(alpha, queue, count=3)}
    body = {
        "complete": [
            {"id": "a", "lease_id": leased["a"]},
            {"id": "b", "lease_id": "00000000-0000-0000-0000-000000000000"},
            {"id": "zzz", "lease_id": leased["a"]},
        ],
        "fail": [{"id": "c", "lease_id": leased["c"], "error": "bad"}],
    }
    response = await alpha.post(f"{queue}/ack", json=body)
    assert response.status_code == 200
    assert response.json() == {
        "results": [
            {"id": "a", "ok": True},
            {"id": "b", "ok": False, "error": "lease_mismatch"},
            {"id": "zzz", "ok": False, "error": "not_found"},
            {"id": "c", "ok": True},
        ]
    }
    assert (await alpha.get(f"{queue}/messages/a")).json()["state"] == "completed"
    assert (await alpha.get(f"{queue}/messages/b")).json()["state"] == "running"
    assert (await alpha.get(f"{queue}/messages/c")).json()["state"] == "pending"
    assert (await alpha.post(f"{queue}/ack")).json() == {"results": []}
    too_many = {"complete": [{"id": "a", "lease_id": "x"}] * 1001}
    assert_error(await alpha.post(f"{queue}/ack", json=too_many), 400, "validation_error")
    bad = {"fail": [{"id": "a"}]}
    assert_error(
        await alpha.post(f"{queue}/ack", json=bad), 400, "validation_error", "fail[0].lease_id"
    )


# --- per message ---------------------------------------------------------------------------


async def test_get_patch_delete_message(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a", "priority": 3, "payload": [1], "ttl_seconds": 3600})
    response = await alpha.get(f"{queue}/messages/a")
    assert response.status_code == 200
    message = response.json()
    assert set(message) == MESSAGE_FIELDS
    assert message["state"] == "pending"
    assert message["attempts"] == 0
    assert message["max_attempts"] == 3
    assert message["lease_seconds"] == 30
    assert message["lease_id"] is None
    assert message["expires_at"] is not None
    for stamp in ("visible_at", "enqueued_at", "updated_at", "expires_at"):
        assert parse(message[stamp]).tzinfo is not None

    url = f"{queue}/messages/a"
    visible_at = "2099-01-01T00:00:00+00:00"
    patched = await alpha.patch(
        url,
        json={"priority": 1, "payload": {"v": 2}, "metadata": {"k": "v"}, "visible_at": visible_at},
    )
    assert patched.status_code == 200
    body = patched.json()
    assert (body["priority"], body["payload"], body["metadata"]) == (1, {"v": 2}, {"k": "v"})
    assert body["state"] == "invisible"
    assert parse(body["visible_at"]) == parse(visible_at)
    assert (await alpha.patch(url, json={"payload": None})).json()["payload"] is None
    assert (await alpha.patch(url, json={})).json()["priority"] == 1
    assert_error(
        await alpha.patch(url, json={"priority": "1"}), 400, "validation_error", "priority"
    )
    assert_error(
        await alpha.patch(url, json={"state": "pending"}), 400, "validation_error", "state"
    )
    assert_error(
        await alpha.patch(url, json={"payload": "x" * PAYLOAD_LIMIT}), 413, "payload_too_large"
    )

    await alpha.patch(url, json={"visible_at": "2000-01-01T00:00:00Z"})
    await dequeue(alpha, queue)
    assert_error(await alpha.patch(url, json={"priority": 0}), 409, "invalid_state")

    assert (await alpha.delete(url)).status_code == 204
    assert_error(await alpha.get(url), 404, "not_found")
    assert_error(await alpha.delete(url), 404, "not_found")
    assert_error(await alpha.patch(url, json={}), 404, "not_found")


async def test_delete_running_message_invalidates_lease(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a"})
    (leased,) = await dequeue(alpha, queue)
    assert (await alpha.delete(f"{queue}/messages/a")).status_code == 204
    response = await alpha.post(
        f"{queue}/messages/a/complete", json={"lease_id": leased["lease_id"]}
    )
    assert_error(response, 404, "not_found")


# --- query and dead letters ------------------------------------------------------------------


async def test_query(alpha: Caller, queue: str) -> None:
    await enqueue(
        alpha,
        queue,
        *({"id": f"m{i}", "priority": i, "metadata": {"even": str(i % 2 == 0)}} for i in range(7)),
    )
    await dequeue(alpha, queue, count=2)  # m0, m1 running
    url = f"{queue}/messages"

    page = (await alpha.get(url)).json()
    assert [m["id"] for m in page["messages"]] == [f"m{i}" for i in reversed(range(7))]
    assert page["next_cursor"] is None
    assert set(page["messages"][0]) == MESSAGE_FIELDS

    def ids(response: Any) -> list[str]:
        assert response.status_code == 200, response.text
        return [m["id"] for m in response.json()["messages"]]

    assert ids(await alpha.get(url, params={"state": "running"})) == ["m1", "m0"]
    assert ids(await alpha.get(url, params=[("state", "running"), ("state", "completed")])) == [
        "m1",
        "m0",
    ]
    assert len(ids(await alpha.get(url, params={"state": "running,pending"}))) == 7
    assert ids(await alpha.get(url, params={"metadata.even": "True", "state": "pending"})) == [
        "m6",
        "m4",
        "m2",
    ]
    params = {"priority_gte": "2", "priority_lt": "5", "order": "priority"}
    assert ids(await alpha.get(url, params=params)) == ["m2", "m3", "m4"]
    assert ids(await alpha.get(url, params={"priority_lt": "-1"})) == []

    seen: list[str] = []
    params = {"order": "priority", "limit": "3"}
    while True:
        page = (await alpha.get(url, params=params)).json()
        seen += [m["id"] for m in page["messages"]]
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    assert seen == [f"m{i}" for i in range(7)]
    first = (await alpha.get(url, params={"limit": "4"})).json()
    second = (await alpha.get(url, params={"limit": "4", "cursor": first["next_cursor"]})).json()
    assert [m["id"] for m in first["messages"] + second["messages"]] == [
        f"m{i}" for i in reversed(range(7))
    ]

    bad = [
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "1.5"}, "limit"),
        ({"priority_lt": "1e3"}, "priority_lt"),
        ({"priority_gte": " 1"}, "priority_gte"),
        ({"priority_gte": "99999999999999999999"}, "priority_gte"),
        ({"state": "done"}, "state[0]"),
        ({"state": "pending,done"}, "state[1]"),
        ({"order": "random"}, "order"),
        ({"cursor": "garbage!"}, "cursor"),
        ({"metadata.": "x"}, "metadata"),
    ]
    for params_, field in bad:
        assert_error(await alpha.get(url, params=params_), 400, "validation_error", field)
    response = await alpha.get("/v1/namespaces/alpha/queues/nope/messages")
    assert_error(response, 404, "not_found")


async def test_requeue_dead_letters(alpha: Caller) -> None:
    queue = "/v1/namespaces/alpha/queues/d"
    await alpha.put(queue, json={"max_attempts": 1})
    await enqueue(alpha, queue, {"id": "a"}, {"id": "b"}, {"id": "c"})
    for message in await dequeue(alpha, queue, count=3):
        await alpha.post(
            f"{queue}/messages/{message['id']}/fail", json={"lease_id": message["lease_id"]}
        )
    response = await alpha.post(f"{queue}/requeue", json={"ids": ["a"]})
    assert response.status_code == 200
    assert response.json() == {"requeued": 1}
    assert (await alpha.get(f"{queue}/messages/a")).json()["state"] == "pending"
    response = await alpha.post(f"{queue}/requeue", json={"states": ["errored"], "limit": 1})
    assert response.json() == {"requeued": 1}
    assert (await alpha.post(f"{queue}/requeue")).json() == {"requeued": 1}
    assert (await alpha.post(f"{queue}/requeue")).json() == {"requeued": 0}
    for body, field in [
        ({"states": ["pending"]}, "states[0]"),
        ({"states": ["nope"]}, "states[0]"),
        ({"ids": ["bad id"]}, "ids[0]"),
        ({"limit": 0}, "limit"),
    ]:
        assert_error(
            await alpha.post(f"{queue}/requeue", json=body), 400, "validation_error", field
        )
