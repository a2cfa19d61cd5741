"""A queue made by its first publish (``"create_queue": true`` in an enqueue, as lmstfy makes a
queue on first publish): with the default configuration, once however many publish at once, and
usable at once by every server process."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api.conftest import Caller, assert_error
from tests.api.test_coherence import as_token, token_of, two_processes
from tests.helpers import fetch

BASE = "/v1/namespaces/alpha/queues"


def publish(caller: Caller, name: str, *messages: dict[str, Any], **options: Any) -> Any:
    body = {"messages": list(messages) or [{}], "create_queue": True, **options}
    return caller.post(f"{BASE}/{name}/messages", json=body)


async def test_the_first_publish_makes_the_queue_with_the_defaults(alpha: Caller) -> None:
    response = await publish(alpha, "fresh", {"id": "a", "payload": 1})
    assert response.status_code == 201, response.text
    assert response.json()["messages"] == [{"id": "a", "state": "pending", "created": True}]
    queue = (await alpha.get(f"{BASE}/fresh")).json()
    defaults = (await alpha.put(f"{BASE}/other", json={})).json()
    for field in ("created_at", "updated_at", "name"):
        queue.pop(field), defaults.pop(field)
    assert {k: v for k, v in queue.items() if k in defaults} == defaults
    assert queue["counts"]["pending"] == 1
    # The queue exists now: later publishes with or without the option just enqueue.
    again = await publish(alpha, "fresh", {"id": "a"}, {"id": "b"})
    assert [m["created"] for m in again.json()["messages"]] == [False, True]


async def test_without_the_option_an_unknown_queue_is_still_a_404(alpha: Caller) -> None:
    body = {"messages": [{}]}
    assert_error(await alpha.post(f"{BASE}/none/messages", json=body), 404, "not_found")
    body["create_queue"] = False
    assert_error(await alpha.post(f"{BASE}/none/messages", json=body), 404, "not_found")
    assert (await alpha.get(f"{BASE}/none")).status_code == 404


async def test_a_bad_batch_or_name_makes_no_queue(alpha: Caller, admin: Caller) -> None:
    refused = await publish(alpha, "fresh", {"priority": "high"})
    assert_error(refused, 400, "validation_error", "messages[0].priority")
    refused = await publish(alpha, "fresh", {"delay_seconds": -1})
    assert_error(refused, 400, "validation_error", "messages[0].delay_seconds")
    assert (await alpha.get(f"{BASE}/fresh")).status_code == 404
    assert_error(await publish(alpha, "bad%20name"), 400, "validation_error", "queue")
    not_a_bool = {"messages": [{}], "create_queue": "yes"}
    refused = await alpha.post(f"{BASE}/x/messages", json=not_a_bool)
    assert_error(refused, 400, "validation_error", "create_queue")
    # Another namespace's path is forbidden before anything is made; an unknown one is a 404.
    other = await admin.post("/v1/namespaces", json={"name": "beta"})
    assert other.status_code == 201
    response = await alpha.post(
        "/v1/namespaces/beta/queues/x/messages", json={"messages": [{}], "create_queue": True}
    )
    assert_error(response, 403, "forbidden")
    response = await admin.post(
        "/v1/namespaces/gamma/queues/x/messages", json={"messages": [{}], "create_queue": True}
    )
    assert_error(response, 404, "not_found")


async def test_an_existing_queue_keeps_its_configuration_and_its_pauses(alpha: Caller) -> None:
    put = await alpha.put(f"{BASE}/held", json={"max_attempts": 9, "enqueue_paused": True})
    assert put.status_code == 201
    assert_error(await publish(alpha, "held"), 409, "queue_paused")
    assert (await alpha.get(f"{BASE}/held")).json()["max_attempts"] == 9


async def test_concurrent_first_publishes_make_one_queue_and_all_enqueue(
    alpha: Caller, engine: AsyncEngine
) -> None:
    answers = await asyncio.gather(*(publish(alpha, "raced", {"id": f"m{i}"}) for i in range(8)))
    assert [a.status_code for a in answers] == [201] * 8, [a.text for a in answers]
    assert all(a.json()["messages"][0]["created"] for a in answers)
    rows = await fetch(engine, "SELECT id FROM queues WHERE namespace = 'alpha' AND name = 'raced'")
    assert len(rows) == 1
    queue = (await alpha.get(f"{BASE}/raced")).json()
    assert queue["counts"]["pending"] == 8


async def test_two_processes_publishing_first_at_once_make_one_queue_seen_by_both(
    database_url: str, engine: AsyncEngine
) -> None:
    async with two_processes(database_url, engine) as (one, two):
        assert (await one.post("/v1/namespaces", json={"name": "alpha"})).status_code == 201
        token, _ = await token_of(one, "alpha")
        first, second = as_token(one, token), as_token(two, token)
        # Both processes hold the token in their lookups before the queue exists.
        for caller in (first, second):
            assert (await caller.get(f"{BASE}")).status_code == 200
        answers = await asyncio.gather(
            *(publish(c, "both", {"id": f"{i}"}) for i, c in enumerate([first, second] * 4))
        )
        assert [a.status_code for a in answers] == [201] * 8, [a.text for a in answers]
        rows = await fetch(engine, "SELECT id FROM queues WHERE name = 'both'")
        assert len(rows) == 1
        # Every process sees the new queue at once, with or without the option.
        for caller in (first, second):
            plain = await caller.post(f"{BASE}/both/messages", json={"messages": [{}]})
            assert plain.status_code == 201, plain.text
            dequeued = await caller.post(f"{BASE}/both/dequeue", json={"count": 1})
            assert len(dequeued.json()["messages"]) == 1
