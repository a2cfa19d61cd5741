"""Enqueue with ``"on_conflict": "replace"`` (dyno-queues' push that overwrites): an id the queue
holds gets the new message while it waits (invisible or pending), and is left alone once it
runs or has finished; the default, ``keep``, is the idempotent enqueue of before."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api.conftest import Caller, assert_error
from tests.api.messages import dequeue, enqueue, get_message, parse
from tests.helpers import fetch


async def replace(caller: Caller, queue: str, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    body = {"messages": list(messages), "on_conflict": "replace"}
    response = await caller.post(f"{queue}/messages", json=body)
    assert response.status_code == 201, response.text
    result: list[dict[str, Any]] = response.json()["messages"]
    return result


async def test_a_pending_message_takes_the_new_one_whole(alpha: Caller, queue: str) -> None:
    await enqueue(
        alpha,
        queue,
        {"id": "a", "priority": 5, "payload": "old", "metadata": {"k": "1"}, "max_attempts": 7},
    )
    before = await get_message(alpha, queue, "a")
    answer = await replace(
        alpha,
        queue,
        {"id": "a", "priority": 2, "payload": {"v": "new"}, "metadata": {"k": "2"}},
        {"id": "b", "payload": "fresh"},
    )
    assert answer == [
        {"id": "a", "state": "pending", "created": False, "replaced": True},
        {"id": "b", "state": "pending", "created": True, "replaced": False},
    ]
    after = await get_message(alpha, queue, "a")
    assert (after["priority"], after["payload"], after["metadata"]) == (2, {"v": "new"}, {"k": "2"})
    assert after["max_attempts"] == 3  # the override went with the old message
    assert after["enqueued_at"] == before["enqueued_at"]
    assert parse(after["updated_at"]) > parse(before["updated_at"])
    [leased] = await dequeue(alpha, queue)
    assert (leased["id"], leased["payload"]) == ("a", {"v": "new"})


async def test_a_replace_moves_the_message_between_invisible_and_pending(
    alpha: Caller, queue: str
) -> None:
    await enqueue(alpha, queue, {"id": "a", "payload": 1})
    [moved] = await replace(alpha, queue, {"id": "a", "payload": 2, "delay_seconds": 3600})
    assert (moved["state"], moved["replaced"]) == ("invisible", True)
    assert await dequeue(alpha, queue) == []
    [back] = await replace(alpha, queue, {"id": "a", "payload": 3, "ttl_seconds": 60})
    assert (back["state"], back["replaced"]) == ("pending", True)
    message = await get_message(alpha, queue, "a")
    assert message["payload"] == 3
    assert message["expires_at"] is not None
    [leased] = await dequeue(alpha, queue)
    assert leased["payload"] == 3


async def test_running_and_finished_messages_are_not_touched(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "r", "payload": "r0"}, {"id": "f", "payload": "f0"})
    [first, second] = await dequeue(alpha, queue, count=2)
    done = next(m for m in (first, second) if m["id"] == "f")
    await alpha.post(f"{queue}/messages/f/complete", json={"lease_id": done["lease_id"]})
    answer = await replace(alpha, queue, {"id": "r", "payload": "r1"}, {"id": "f", "payload": "f1"})
    assert answer == [
        {"id": "r", "state": "running", "created": False, "replaced": False},
        {"id": "f", "state": "completed", "created": False, "replaced": False},
    ]
    assert (await get_message(alpha, queue, "r"))["payload"] == "r0"
    assert (await get_message(alpha, queue, "f"))["payload"] == "f0"


async def test_keep_is_the_default_and_answers_as_before(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a", "payload": "old"})
    response = await alpha.post(
        f"{queue}/messages", json={"messages": [{"id": "a", "payload": "new"}]}
    )
    assert response.json() == {"messages": [{"id": "a", "state": "pending", "created": False}]}
    kept = await alpha.post(
        f"{queue}/messages",
        json={"messages": [{"id": "a", "payload": "new"}], "on_conflict": "keep"},
    )
    assert kept.json() == response.json()
    assert (await get_message(alpha, queue, "a"))["payload"] == "old"
    for bad in ("overwrite", None, 1):
        body = {"messages": [{"id": "a"}], "on_conflict": bad}
        refused = await alpha.post(f"{queue}/messages", json=body)
        assert_error(refused, 400, "validation_error", "on_conflict")


async def test_a_batch_is_all_or_nothing_and_a_repeated_id_replaces_once(
    alpha: Caller, queue: str
) -> None:
    await enqueue(alpha, queue, {"id": "a", "payload": "old"})
    body = {
        "messages": [{"id": "a", "payload": "new"}, {"id": "b", "priority": "x"}],
        "on_conflict": "replace",
    }
    refused = await alpha.post(f"{queue}/messages", json=body)
    assert_error(refused, 400, "validation_error", "messages[1].priority")
    assert (await get_message(alpha, queue, "a"))["payload"] == "old"
    assert (await alpha.get(f"{queue}/messages/b")).status_code == 404
    answer = await replace(alpha, queue, {"id": "a", "payload": "one"}, {"id": "a", "payload": 2})
    assert [(m["created"], m["replaced"]) for m in answer] == [(False, True), (False, False)]
    assert (await get_message(alpha, queue, "a"))["payload"] == "one"  # from its first occurrence


async def test_the_exclusive_and_filter_values_follow_the_new_metadata(
    alpha: Caller, engine: AsyncEngine
) -> None:
    base = "/v1/namespaces/alpha/queues/builds"
    config = {"kind": "exclusive", "exclusive_key": "project", "filter_key": "tenant"}
    assert (await alpha.put(base, json=config)).status_code == 201
    old = {"project": "web", "tenant": "acme"}
    await enqueue(alpha, base, {"id": "a", "metadata": old}, {"id": "b", "metadata": old})
    new = {"project": "api", "tenant": "globex"}
    [answer] = await replace(alpha, base, {"id": "a", "metadata": new})
    assert answer["replaced"] is True
    rows = await fetch(
        engine,
        "SELECT exclusive_value, filter_value FROM messages WHERE id = 'a' AND queue_id = "
        "(SELECT id FROM queues WHERE name = 'builds')",
    )
    assert rows == [{"exclusive_value": "api", "filter_value": "globex"}]
    refused = await alpha.post(
        f"{base}/messages",
        json={"messages": [{"id": "a", "metadata": {"tenant": "x"}}], "on_conflict": "replace"},
    )
    assert_error(refused, 400, "validation_error", "messages[0].metadata.project")
    leased = await dequeue(alpha, base, count=10, metadata={"tenant": "globex"})
    assert [m["id"] for m in leased] == ["a"]
    assert [m["id"] for m in await dequeue(alpha, base, count=10)] == ["b"]  # web is free


async def test_a_replace_that_makes_a_message_ready_wakes_a_long_poll(
    alpha: Caller, queue: str
) -> None:
    registry = alpha.runtime.waiters
    registry.fallback_seconds = 60  # only a notification can wake the consumer in time
    queue_id = (await alpha.runtime.service.get_queue_or_404("alpha", "q")).id
    await enqueue(alpha, queue, {"id": "a", "payload": "later", "delay_seconds": 3600})
    waiting = asyncio.create_task(alpha.post(f"{queue}/dequeue", json={"wait_seconds": 10}))
    await asyncio.wait_for(registry.wait_for_waiting(queue_id, 1), 5)
    started = asyncio.get_running_loop().time()
    await replace(alpha, queue, {"id": "a", "payload": "now"})
    response = await asyncio.wait_for(waiting, 5)
    assert [m["payload"] for m in response.json()["messages"]] == ["now"]
    assert asyncio.get_running_loop().time() - started < 2
