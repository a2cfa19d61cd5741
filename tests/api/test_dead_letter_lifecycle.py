"""Dead letters over HTTP, issue #20: requeue (one or in bulk) with a new TTL and a delay,
deletion with a limit (oldest finished first, the same selection as the bulk requeue), and what
a dequeue answer tells about each leased message (remaining attempts, TTL, how long it
waited)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api.conftest import Caller, assert_error
from tests.api.messages import dequeue, enqueue, get_message, parse
from tests.helpers import execute

BASE = "/v1/namespaces/alpha/queues"


async def _dead_letters(alpha: Caller, name: str, ids: list[str], **config: Any) -> str:
    """A queue ``name`` (max_attempts 1) whose ``ids`` are errored, finished in that order."""
    queue = f"{BASE}/{name}"
    assert (await alpha.put(queue, json={"max_attempts": 1, **config})).status_code == 201
    await enqueue(alpha, queue, *({"id": i} for i in ids))
    leased = {m["id"]: m["lease_id"] for m in await dequeue(alpha, queue, count=len(ids))}
    for message_id in ids:  # one fail each: each finishes at its own, later, time
        body = {"lease_id": leased[message_id], "error": "boom"}
        response = await alpha.post(f"{queue}/messages/{message_id}/fail", json=body)
        assert response.json()["state"] == "errored", response.text
    return queue


async def _states(alpha: Caller, queue: str) -> dict[str, str]:
    response = await alpha.get(f"{queue}/messages", params={"limit": 1000})
    return {m["id"]: m["state"] for m in response.json()["messages"]}


async def test_bulk_requeue_sets_a_new_ttl_or_expiry_and_a_delay(alpha: Caller) -> None:
    queue = await _dead_letters(alpha, "d", ["a", "b", "c", "d"])
    response = await alpha.post(f"{queue}/requeue", json={"ids": ["a"], "ttl_seconds": 60})
    assert response.json() == {"requeued": 1}
    a = await get_message(alpha, queue, "a")
    assert a["state"] == "pending"
    assert parse(a["expires_at"]) - parse(a["updated_at"]) == timedelta(seconds=60)

    body = {"ids": ["b"], "expires_at": "2030-01-01T00:00:00Z"}
    assert (await alpha.post(f"{queue}/requeue", json=body)).json() == {"requeued": 1}
    assert parse((await get_message(alpha, queue, "b"))["expires_at"]) == parse(body["expires_at"])

    body = {"ids": ["c"], "delay_seconds": 60, "ttl_seconds": 120}
    assert (await alpha.post(f"{queue}/requeue", json=body)).json() == {"requeued": 1}
    c = await get_message(alpha, queue, "c")
    assert c["state"] == "invisible"
    assert parse(c["visible_at"]) - parse(c["updated_at"]) == timedelta(seconds=60)
    assert parse(c["expires_at"]) - parse(c["updated_at"]) == timedelta(seconds=120)


async def test_requeue_without_a_ttl_clears_the_expiry(alpha: Caller) -> None:
    queue = f"{BASE}/e"
    await alpha.put(queue, json={"max_attempts": 1})
    await enqueue(alpha, queue, {"id": "a", "ttl_seconds": 3600})
    [leased] = await dequeue(alpha, queue)
    await alpha.post(f"{queue}/messages/a/fail", json={"lease_id": leased["lease_id"]})
    assert (await get_message(alpha, queue, "a"))["expires_at"] is not None
    assert (await alpha.post(f"{queue}/requeue", json={})).json() == {"requeued": 1}
    assert (await get_message(alpha, queue, "a"))["expires_at"] is None


async def test_bulk_requeue_refuses_bad_terms_and_changes_nothing(alpha: Caller) -> None:
    queue = await _dead_letters(alpha, "d", ["a", "b"])
    for body, field in [
        ({"ttl_seconds": 60, "expires_at": "2030-01-01T00:00:00Z"}, "expires_at"),
        ({"ttl_seconds": 0}, "ttl_seconds"),
        ({"ttl_seconds": 10 * 365 * 24 * 3600 + 1}, "ttl_seconds"),
        ({"ttl_seconds": "60"}, "ttl_seconds"),
        ({"expires_at": "2030-01-01T00:00:00"}, "expires_at"),
        ({"expires_at": "10000-01-01T00:00:00Z"}, "expires_at"),
        ({"delay_seconds": -1}, "delay_seconds"),
        ({"delay_seconds": 365 * 24 * 3600 + 1}, "delay_seconds"),
        ({"delay_seconds": None}, "delay_seconds"),
    ]:
        response = await alpha.post(f"{queue}/requeue", json=body)
        assert_error(response, 400, "validation_error", field)
    assert await _states(alpha, queue) == {"a": "errored", "b": "errored"}
    # null is "not given" for the TTL and the expiry.
    body = {"ttl_seconds": None, "expires_at": None}
    assert (await alpha.post(f"{queue}/requeue", json=body)).json() == {"requeued": 2}


async def test_requeue_one_with_a_ttl(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a"}, {"id": "b"})
    await alpha.post(f"{queue}/messages/a/cancel")
    both = {"ttl_seconds": 30, "expires_at": "2030-01-01T00:00:00Z"}
    response = await alpha.post(f"{queue}/messages/a/requeue", json=both)
    assert_error(response, 400, "validation_error", "expires_at")
    assert (await get_message(alpha, queue, "a"))["state"] == "canceled"
    response = await alpha.post(f"{queue}/messages/a/requeue", json={"ttl_seconds": 30})
    assert response.status_code == 200
    a = response.json()
    assert a["state"] == "pending"
    assert parse(a["expires_at"]) - parse(a["updated_at"]) == timedelta(seconds=30)
    await alpha.post(f"{queue}/messages/b/cancel")
    body = {"delay_seconds": 10, "expires_at": "2031-06-01T12:00:00+02:00"}
    b = (await alpha.post(f"{queue}/messages/b/requeue", json=body)).json()
    assert b["state"] == "invisible"
    assert parse(b["expires_at"]) == parse("2031-06-01T10:00:00Z")
    response = await alpha.post(f"{queue}/messages/b/requeue", json={"ttl_seconds": 30})
    assert_error(response, 409, "invalid_state")


async def test_delete_dead_letters_oldest_first_up_to_the_limit(alpha: Caller) -> None:
    ids = [f"m{i}" for i in range(6)]
    queue = await _dead_letters(alpha, "d", ids)
    await enqueue(alpha, queue, {"id": "waiting"}, {"id": "gone"})
    await alpha.post(f"{queue}/messages/gone/cancel")
    url = f"{queue}/dead-letters/delete"

    response = await alpha.post(url, json={"limit": 2})
    assert response.status_code == 200
    assert response.json() == {"deleted": 2}
    states = await _states(alpha, queue)
    assert sorted(states) == ["gone", "m2", "m3", "m4", "m5", "waiting"]

    # Among ids, still oldest first; an id that is no dead letter (or none at all) is left.
    body = {"ids": ["m5", "m4", "waiting", "nope"], "limit": 1}
    assert (await alpha.post(url, json=body)).json() == {"deleted": 1}
    assert "m4" not in await _states(alpha, queue)
    body = {"ids": ["waiting"], "states": ["errored", "canceled"]}
    assert (await alpha.post(url, json=body)).json() == {"deleted": 0}

    assert (await alpha.post(url, json={"states": ["canceled"]})).json() == {"deleted": 1}
    assert (await alpha.post(url, json={})).json() == {"deleted": 3}  # errored by default
    assert (await alpha.post(url)).json() == {"deleted": 0}
    assert await _states(alpha, queue) == {"waiting": "pending"}


async def test_requeue_and_delete_take_the_same_dead_letters(alpha: Caller) -> None:
    ids = [f"m{i}" for i in range(5)]
    queue = await _dead_letters(alpha, "d", ids)
    assert (await alpha.post(f"{queue}/requeue", json={"limit": 2})).json() == {"requeued": 2}
    assert await _states(alpha, queue) == {
        "m0": "pending", "m1": "pending", "m2": "errored", "m3": "errored", "m4": "errored",
    }  # fmt: skip
    response = await alpha.post(f"{queue}/dead-letters/delete", json={"limit": 2})
    assert response.json() == {"deleted": 2}
    assert await _states(alpha, queue) == {"m0": "pending", "m1": "pending", "m4": "errored"}


async def test_delete_dead_letters_refuses_bad_requests(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a"})
    await alpha.post(f"{queue}/messages/a/cancel")
    url = f"{queue}/dead-letters/delete"
    for body, field in [
        ({"states": ["pending"]}, "states[0]"),
        ({"states": ["errored", "nope"]}, "states[1]"),
        ({"ids": ["bad id"]}, "ids[0]"),
        ({"ids": [f"m{i}" for i in range(1001)]}, "ids"),
        ({"limit": 0}, "limit"),
        ({"limit": 100_001}, "limit"),
        ({"limit": None}, "limit"),
        ({"ttl_seconds": 60}, "ttl_seconds"),
    ]:
        assert_error(await alpha.post(url, json=body), 400, "validation_error", field)
    assert (await get_message(alpha, queue, "a"))["state"] == "canceled"
    response = await alpha.post(f"{BASE}/nope/dead-letters/delete", json={})
    assert_error(response, 404, "not_found")
    body = {"states": ["canceled"], "limit": 100_000}
    assert (await alpha.post(url, json=body)).json() == {"deleted": 1}


async def test_dequeue_tells_remaining_attempts_ttl_and_wait(
    alpha: Caller, queue: str, engine: AsyncEngine
) -> None:
    await alpha.patch(queue, json={"max_attempts": 3})
    await enqueue(
        alpha,
        queue,
        {"id": "a", "ttl_seconds": 600, "priority": 1},
        {"id": "b", "max_attempts": 1, "priority": 2},
        {"id": "late", "delay_seconds": 3600, "priority": 3},
    )
    # "a" and "b" have waited 30 s since their enqueue; "late" was enqueued 100 s ago and
    # became visible 10 s ago (it is due, not yet promoted).
    await execute(
        engine,
        "UPDATE messages SET enqueued_at = enqueued_at - interval '30 seconds',"
        " visible_at = visible_at - interval '30 seconds' WHERE id IN ('a', 'b')",
    )
    await execute(
        engine,
        "UPDATE messages SET enqueued_at = now() - interval '100 seconds',"
        " visible_at = now() - interval '10 seconds' WHERE id = 'late'",
    )
    a, b, late = await dequeue(alpha, queue, count=3)
    assert [a["id"], b["id"], late["id"]] == ["a", "b", "late"]
    assert a["remaining_attempts"] == 2
    assert b["remaining_attempts"] == 0
    assert 30 <= a["waited_seconds"] < 60
    assert 30 <= b["waited_seconds"] < 60
    assert 10 <= late["waited_seconds"] < 40  # from becoming visible, not from its enqueue
    assert a["expires_at"] is not None
    # The TTL left, from the lease: as much as expires_at is after lease_expires_at - lease.
    leased_at = parse(a["lease_expires_at"]) - timedelta(seconds=30)
    left = (parse(a["expires_at"]) - leased_at).total_seconds()
    assert a["ttl_remaining_seconds"] == left
    assert 500 < left <= 600
    assert b["expires_at"] is None
    assert b["ttl_remaining_seconds"] is None

    # A retry waits from when it became ready again (its fail, no retry delay here).
    body = {"lease_id": a["lease_id"], "retry_delay_seconds": 0}
    assert (await alpha.post(f"{queue}/messages/a/fail", json=body)).json()["state"] == "pending"
    again = {
        "complete": [{"id": "b", "lease_id": b["lease_id"]}],
        "dequeue": {"count": 1},
    }
    answer = (await alpha.post(f"{queue}/ack", json=again)).json()
    [retried] = answer["messages"]
    assert (retried["id"], retried["attempt"], retried["remaining_attempts"]) == ("a", 2, 1)
    assert 0 <= retried["waited_seconds"] < 30
    assert retried["expires_at"] == a["expires_at"]


async def test_the_served_openapi_document_has_them(anonymous: Caller) -> None:
    document = (await anonymous.get("/schema/openapi.json")).json()
    paths = document["paths"]
    queue = "/v1/namespaces/{ns}/queues/{queue}"

    def body_fields(path: str) -> set[str]:
        body = paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        return set(body["properties"])

    delete = f"{queue}/dead-letters/delete"
    assert {"200", "400", "404"} <= set(paths[delete]["post"]["responses"])
    assert body_fields(delete) == {"states", "ids", "limit"}
    for path in (f"{queue}/requeue", f"{queue}/messages/{{message_id}}/requeue"):
        assert {"delay_seconds", "ttl_seconds", "expires_at"} <= body_fields(path)
    leased = set(document["components"]["schemas"]["LeasedOut"]["properties"])
    assert {"remaining_attempts", "expires_at", "ttl_remaining_seconds", "waited_seconds"} <= leased
