"""Dequeue and leases over HTTP: priority order and filters, validation and pause, complete,
fail and extend fenced by the lease, cancel, requeue of one message, and batch ack."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.api.conftest import Caller, assert_error
from tests.api.messages import LEASED_FIELDS, MESSAGE_FIELDS, dequeue, enqueue, parse


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
        ({"metadata": {"k": [["v"]]}}, "metadata"),
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
