"""Dequeue from several queues at once (``POST /v1/namespaces/{ns}/dequeue``): the list order
is the priority, ``count`` fills from the first queue then the next ones, paused queues are
passed over (also by a long poll woken by one of them), a long poll wakes on any of its queues,
concurrent consumers never share a message, and a client that left is leased nothing.

Synchronisation is by the waiter registry (``wait_for_waiting``) and by awaited answers, never
by sleeping.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
from collections import Counter
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.schemas.consuming_many import DequeueMany
from app.core.service.consuming_many import MAX_DEQUEUE_QUEUES, LeasedFrom, ManyDequeuePlan
from app.web import longpoll_many
from app.web.waiters import WaiterRegistry
from tests.api.conftest import Caller, as_token, assert_error, namespace_caller, two_processes
from tests.api.messages import get_message, make_queues
from tests.conftest import ADMIN_TOKEN

TIMEOUT = 5.0
NS = "/v1/namespaces/alpha"
DEQUEUE = f"{NS}/dequeue"


def base(name: str) -> str:
    return f"{NS}/queues/{name}"


async def queue_id(caller: Caller, name: str) -> int:
    """The queue's id, looked up outside any request (ASGITransport runs requests in the test's
    own task, whose context would otherwise still hold the last request's catalogue view)."""
    lookup = caller.runtime.service.get_queue_or_404("alpha", name)
    return (await asyncio.create_task(lookup, context=contextvars.Context())).id


async def enqueue(caller: Caller, queue: str, *messages: dict[str, Any]) -> float:
    """Enqueue messages in one request; the loop time at which it was answered (committed)."""
    response = await caller.post(f"{base(queue)}/messages", json={"messages": list(messages)})
    assert response.status_code == 201, response.text
    return asyncio.get_running_loop().time()


async def consume(caller: Caller, **body: Any) -> tuple[list[dict[str, Any]], float]:
    """Dequeue from several queues; the messages and the loop time the answer arrived."""
    response = await caller.post(DEQUEUE, json=body)
    assert response.status_code == 200, response.text
    return response.json()["messages"], asyncio.get_running_loop().time()


def leased(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["queue"], m["id"]) for m in messages]


# --- order and count -----------------------------------------------------------------------------


async def test_the_list_order_is_the_priority(alpha: Caller) -> None:
    await make_queues(alpha, "high", "low")
    # The low queue's messages are older and of better priority: the list order still wins.
    await enqueue(alpha, "low", {"id": "l1", "priority": 0}, {"id": "l2", "priority": 0})
    await enqueue(alpha, "high", {"id": "h1", "priority": 50}, {"id": "h2", "priority": 10})
    seen = []
    for _ in range(5):
        messages, _ = await consume(alpha, queues=["high", "low"])
        seen.extend(leased(messages))
    assert seen == [("high", "h2"), ("high", "h1"), ("low", "l1"), ("low", "l2")]
    # The other order, once more, on fresh messages.
    await enqueue(alpha, "high", {"id": "h3"})
    await enqueue(alpha, "low", {"id": "l3"})
    messages, _ = await consume(alpha, queues=["low", "high"])
    assert leased(messages) == [("low", "l3")]


async def test_count_fills_from_the_first_queue_then_the_next(alpha: Caller) -> None:
    await make_queues(alpha, "a", "b", "c")
    await enqueue(alpha, "a", {"id": "a1", "priority": 2}, {"id": "a2", "priority": 1})
    await enqueue(alpha, "c", *({"id": f"c{i}", "priority": 10 - i} for i in range(4)))
    messages, _ = await consume(alpha, queues=["a", "b", "c"], count=5, lease_seconds=90)
    assert leased(messages) == [("a", "a2"), ("a", "a1"), ("c", "c3"), ("c", "c2"), ("c", "c1")]
    # Each message is what the single-queue dequeue answers, and its queue.
    await enqueue(alpha, "b", {"id": "b1"})
    single = await alpha.post(f"{base('b')}/dequeue", json={})
    assert set(messages[0]) == set(single.json()["messages"][0]) | {"queue"}
    assert messages[0]["attempt"] == 1
    # Each is completed at its own queue with its lease.
    for message in messages:
        done = await alpha.post(
            f"{base(message['queue'])}/messages/{message['id']}/complete",
            json={"lease_id": message["lease_id"]},
        )
        assert done.status_code == 200, done.text
        assert done.json()["state"] == "completed"
    messages, _ = await consume(alpha, queues=["a", "b", "c"], count=5)
    assert leased(messages) == [("c", "c0")]
    assert (await consume(alpha, queues=["a", "b", "c"], count=5))[0] == []


async def test_an_exclusive_queue_keeps_its_rule_in_the_list(alpha: Caller) -> None:
    await make_queues(alpha, "builds", kind="exclusive", exclusive_key="project")
    await make_queues(alpha, "plain")
    await enqueue(
        alpha,
        "builds",
        {"id": "web-1", "metadata": {"project": "web"}},
        {"id": "web-2", "metadata": {"project": "web"}},
        {"id": "api-1", "metadata": {"project": "api"}},
    )
    await enqueue(alpha, "plain", {"id": "p1"}, {"id": "p2"})
    messages, _ = await consume(alpha, queues=["builds", "plain"], count=4)
    assert leased(messages) == [
        ("builds", "web-1"),
        ("builds", "api-1"),
        ("plain", "p1"),
        ("plain", "p2"),
    ]


async def test_a_filter_applies_to_every_queue(alpha: Caller) -> None:
    await make_queues(alpha, "a")
    await make_queues(alpha, "b", filter_key="tenant")
    await enqueue(alpha, "a", {"id": "a-x", "metadata": {"tenant": "x"}}, {"id": "a-y"})
    await enqueue(alpha, "b", {"id": "b-y", "metadata": {"tenant": "y"}})
    await enqueue(alpha, "b", {"id": "b-x", "metadata": {"tenant": "x"}})
    messages, _ = await consume(alpha, queues=["a", "b"], count=10, metadata={"tenant": "x"})
    assert leased(messages) == [("a", "a-x"), ("b", "b-x")]


# --- input ---------------------------------------------------------------------------------------


async def test_bad_input_is_a_400_naming_the_field(alpha: Caller) -> None:
    await make_queues(alpha, "a", "b")
    await enqueue(alpha, "a", {"id": "untouched"})
    many = [f"q{i}" for i in range(MAX_DEQUEUE_QUEUES + 1)]
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, "queues"),
        ({"queues": []}, "queues"),
        ({"queues": many}, "queues"),
        ({"queues": "a"}, "queues"),
        ({"queues": ["a", "b", "a"]}, "queues[2]"),
        ({"queues": ["a", "b", "-bad"]}, "queues[2]"),
        ({"queues": ["a", 7]}, "queues[1]"),
        ({"queues": ["a"], "count": 0}, "count"),
        ({"queues": ["a"], "count": 101}, "count"),
        ({"queues": ["a"], "count": "1"}, "count"),
        ({"queues": ["a"], "lease_seconds": 0}, "lease_seconds"),
        ({"queues": ["a"], "wait_seconds": 21}, "wait_seconds"),
        ({"queues": ["a"], "metadata": {"": "v"}}, "metadata"),
        ({"queues": ["a"], "bogus": 1}, "bogus"),
        # Every field is checked before any queue is looked up.
        ({"queues": ["nope", "a", "a"]}, "queues[2]"),
        ({"queues": ["nope"], "count": 0, "wait_seconds": 5}, "count"),
    ]
    for body, field in cases:
        assert_error(await alpha.post(DEQUEUE, json=body), 400, "validation_error", field)
    assert (await get_message(alpha, base("a"), "untouched"))["state"] == "pending"


async def test_an_unknown_queue_is_a_404_naming_it(alpha: Caller) -> None:
    await make_queues(alpha, "a", "b")
    await enqueue(alpha, "a", {"id": "untouched"})
    for body in (
        {"queues": ["a", "b", "nope"]},
        {"queues": ["a", "nope"], "wait_seconds": 5},
    ):
        error = assert_error(await alpha.post(DEQUEUE, json=body), 404, "not_found")
        assert error["details"] == {"queue": "nope"}
    assert (await get_message(alpha, base("a"), "untouched"))["state"] == "pending"
    missing_namespace = await alpha.client.post(
        "/v1/namespaces/nowhere/dequeue",
        json={"queues": ["a"]},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert_error(missing_namespace, 404, "not_found")


async def test_only_the_namespaces_tokens_may_dequeue(admin: Caller, alpha: Caller) -> None:
    await make_queues(alpha, "a")
    await enqueue(alpha, "a", {"id": "m"})
    beta = await namespace_caller(admin, "beta")
    assert_error(await beta.post(DEQUEUE, json={"queues": ["a"]}), 403, "forbidden")
    anonymous = Caller(alpha.client, alpha.app, None)
    assert_error(await anonymous.post(DEQUEUE, json={"queues": ["a"]}), 401, "unauthorized")
    assert (await get_message(alpha, base("a"), "m"))["state"] == "pending"
    messages, _ = await consume(admin, queues=["a"])
    assert leased(messages) == [("a", "m")]


# --- paused queues -------------------------------------------------------------------------------


async def test_a_dequeue_paused_queue_is_passed_over(alpha: Caller) -> None:
    await make_queues(alpha, "a")
    await make_queues(alpha, "b")
    await enqueue(alpha, "a", {"id": "a1"})
    await enqueue(alpha, "b", {"id": "b1"})
    assert (await alpha.patch(base("a"), json={"dequeue_paused": True})).status_code == 200
    messages, _ = await consume(alpha, queues=["a", "b"], count=10)
    assert leased(messages) == [("b", "b1")]
    assert (await alpha.patch(base("b"), json={"dequeue_paused": True})).status_code == 200
    assert (await consume(alpha, queues=["a", "b"], count=10))[0] == []
    assert (await get_message(alpha, base("a"), "a1"))["state"] == "pending"


async def test_a_pause_in_another_process_applies_to_the_next_dequeue(
    database_url: str, engine: AsyncEngine
) -> None:
    """The consumer's process has the queues in its lookup cache, unpaused; the pause is made
    through another process: the next dequeue's claim finds the catalogue changed, looks the
    queues up again and passes the paused one over."""
    async with two_processes(database_url, engine) as (changer, consumer_admin):
        assert (await changer.post("/v1/namespaces", json={"name": "alpha"})).status_code == 201
        token = (await changer.post("/v1/namespaces/alpha/tokens", json={})).json()["token"]
        consumer = as_token(consumer_admin, token)
        await make_queues(as_token(changer, token), "a", "b")
        await enqueue(consumer, "a", {"id": "a1"}, {"id": "a2"})
        await enqueue(consumer, "b", {"id": "b1"})
        messages, _ = await consume(consumer, queues=["a", "b"])  # warms its cache
        assert leased(messages) == [("a", "a1")]
        paused = await changer.patch(base("a"), json={"dequeue_paused": True})
        assert paused.status_code == 200
        messages, _ = await consume(consumer, queues=["a", "b"], count=5)
        assert leased(messages) == [("b", "b1")]
        assert (await consume(consumer, queues=["a", "b"], count=5))[0] == []


async def test_a_long_poll_woken_by_a_paused_queue_takes_nothing_from_it(alpha: Caller) -> None:
    """The paused queue's enqueue wakes the poll (it waits on that queue too); it looks, leases
    nothing and parks again; once the queue is resumed within its wait, it leases."""
    runtime = alpha.runtime
    runtime.waiters.fallback_seconds = 60  # only notifications wake it
    await make_queues(alpha, "paused", "open")
    assert (await alpha.patch(base("paused"), json={"dequeue_paused": True})).status_code == 200
    paused_id = await queue_id(alpha, "paused")
    looks: list[list[LeasedFrom]] = []
    looked = asyncio.Event()
    service = runtime.service
    run_look = service.dequeue_planned_many

    async def counted(plan: ManyDequeuePlan) -> list[LeasedFrom]:
        found = await run_look(plan)
        looks.append(found)
        looked.set()
        return found

    service.dequeue_planned_many = counted  # type: ignore[method-assign]
    try:
        poll = asyncio.create_task(consume(alpha, queues=["paused", "open"], wait_seconds=15))
        await asyncio.wait_for(runtime.waiters.wait_for_waiting(paused_id, 1), TIMEOUT)
        before = len(looks)
        looked.clear()
        await enqueue(alpha, "paused", {"id": "held"})
        await asyncio.wait_for(looked.wait(), TIMEOUT)  # woken by it, and looked
        assert len(looks) == before + 1
        assert looks[-1] == []
        await asyncio.wait_for(runtime.waiters.wait_for_waiting(paused_id, 1), TIMEOUT)
        assert not poll.done()
        assert (await get_message(alpha, base("paused"), "held"))["state"] == "pending"
        resumed = await alpha.patch(base("paused"), json={"dequeue_paused": False})
        assert resumed.status_code == 200
        messages, _ = await asyncio.wait_for(poll, TIMEOUT)
    finally:
        del service.dequeue_planned_many
    assert leased(messages) == [("paused", "held")]


async def test_a_queue_paused_while_a_poll_waits_is_not_served(alpha: Caller) -> None:
    runtime = alpha.runtime
    runtime.waiters.fallback_seconds = 60
    await make_queues(alpha, "a", "b")
    poll = asyncio.create_task(consume(alpha, queues=["a", "b"], wait_seconds=10))
    await asyncio.wait_for(runtime.waiters.wait_for_waiting(await queue_id(alpha, "a"), 1), TIMEOUT)
    assert (await alpha.patch(base("a"), json={"dequeue_paused": True})).status_code == 200
    await enqueue(alpha, "a", {"id": "a1"})
    committed = await enqueue(alpha, "b", {"id": "b1"})
    messages, answered = await asyncio.wait_for(poll, TIMEOUT)
    assert leased(messages) == [("b", "b1")]
    assert answered - committed < 1.0
    assert (await get_message(alpha, base("a"), "a1"))["state"] == "pending"


async def test_a_queue_deleted_while_a_poll_waits_is_a_404_naming_it(alpha: Caller) -> None:
    alpha.runtime.waiters.fallback_seconds = 0.2  # a deletion notifies nobody: the timer looks
    await make_queues(alpha, "a", "b")
    poll = asyncio.create_task(alpha.post(DEQUEUE, json={"queues": ["a", "b"], "wait_seconds": 10}))
    await asyncio.wait_for(
        alpha.runtime.waiters.wait_for_waiting(await queue_id(alpha, "b"), 1), TIMEOUT
    )
    assert (await alpha.delete(base("b"))).status_code == 204
    error = assert_error(await asyncio.wait_for(poll, TIMEOUT), 404, "not_found")
    assert error["details"] == {"queue": "b"}


# --- long polling --------------------------------------------------------------------------------


@pytest.mark.parametrize("lands_on", ["first", "second"])
async def test_a_long_poll_wakes_promptly_on_any_of_its_queues(
    alpha: Caller, lands_on: str
) -> None:
    registry = alpha.runtime.waiters
    registry.fallback_seconds = 60  # only a notification can wake it in time
    await make_queues(alpha, "first", "second")
    ids = [await queue_id(alpha, "first"), await queue_id(alpha, "second")]
    loop = asyncio.get_running_loop()
    for round_ in range(3):
        started = loop.time()
        poll = asyncio.create_task(consume(alpha, queues=["first", "second"], wait_seconds=10))
        for qid in ids:
            await asyncio.wait_for(registry.wait_for_waiting(qid, 1), TIMEOUT)
        committed = await enqueue(alpha, lands_on, {"id": f"m{round_}"})
        messages, answered = await asyncio.wait_for(poll, TIMEOUT)
        assert leased(messages) == [(lands_on, f"m{round_}")]
        assert answered - committed < 1.0
        assert answered - started < 5.0  # well before its 10 s
    assert [registry.waiting(qid) for qid in ids] == [0, 0]
    assert registry.waiting_anywhere() == 0


async def test_a_long_poll_times_out_empty(alpha: Caller) -> None:
    await make_queues(alpha, "a", "b")
    started = asyncio.get_running_loop().time()
    messages, answered = await consume(alpha, queues=["a", "b"], wait_seconds=1)
    assert messages == []
    assert 0.9 <= answered - started < 3.0


async def test_a_long_poll_wakes_when_a_delayed_message_of_any_queue_is_due(alpha: Caller) -> None:
    alpha.runtime.waiters.fallback_seconds = 60  # no scheduler, no notification: only next-due
    await make_queues(alpha, "a", "b")
    await enqueue(alpha, "a", {"id": "much-later", "delay_seconds": 3600})
    # Timed from before the enqueue: the delay counts from its INSERT, not from its answer.
    started = asyncio.get_running_loop().time()
    await enqueue(alpha, "b", {"id": "soon", "delay_seconds": 1})
    messages, answered = await consume(alpha, queues=["a", "b"], wait_seconds=10)
    assert leased(messages) == [("b", "soon")]
    assert 0.9 <= answered - started < 5.0


async def test_a_batch_reaches_a_multi_queue_waiter_and_a_single_queue_waiter(
    alpha: Caller,
) -> None:
    """One notification for two messages: whichever waiter it wakes leases a full batch and
    passes the wake-up on to the other, whether it waits on one queue or on several."""
    registry = alpha.runtime.waiters
    registry.fallback_seconds = 60
    await make_queues(alpha, "a", "b")
    b_id = await queue_id(alpha, "b")
    many = asyncio.create_task(consume(alpha, queues=["a", "b"], wait_seconds=10))
    await asyncio.wait_for(registry.wait_for_waiting(b_id, 1), TIMEOUT)

    async def single() -> list[dict[str, Any]]:
        response = await alpha.post(f"{base('b')}/dequeue", json={"wait_seconds": 10})
        assert response.status_code == 200, response.text
        messages: list[dict[str, Any]] = response.json()["messages"]
        return messages

    one = asyncio.create_task(single())
    await asyncio.wait_for(registry.wait_for_waiting(b_id, 2), TIMEOUT)
    committed = await enqueue(alpha, "b", {"id": "x"}, {"id": "y"})
    (from_many, answered), from_one = await asyncio.wait_for(asyncio.gather(many, one), TIMEOUT)
    assert answered - committed < 1.0
    assert len(from_many) == len(from_one) == 1
    assert sorted([from_many[0]["id"], from_one[0]["id"]]) == ["x", "y"]


async def test_client_that_left_gets_nothing_leased(alpha: Caller) -> None:
    runtime = alpha.runtime
    runtime.waiters.fallback_seconds = 60
    await make_queues(alpha, "a", "b")
    ids = [await queue_id(alpha, "a"), await queue_id(alpha, "b")]
    gone = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    waiting = asyncio.create_task(
        longpoll_many.dequeue_many(
            runtime.service,
            runtime.waiters_of,
            "alpha",
            DequeueMany(queues=["a", "b"], wait_seconds=10),
            receive,
        )
    )
    await asyncio.wait_for(runtime.waiters.wait_for_waiting(ids[1], 1), TIMEOUT)
    gone.set()
    assert await asyncio.wait_for(waiting, TIMEOUT) == []
    await enqueue(alpha, "a", {"id": "a1"})
    await enqueue(alpha, "b", {"id": "b1"})
    assert (await get_message(alpha, base("a"), "a1"))["state"] == "pending"
    assert (await get_message(alpha, base("b"), "b1"))["state"] == "pending"
    assert [runtime.waiters.waiting(qid) for qid in ids] == [0, 0]


async def test_shutdown_releases_a_multi_queue_waiter(alpha: Caller) -> None:
    await make_queues(alpha, "a", "b")
    registry = WaiterRegistry(fallback_seconds=60)
    service = alpha.runtime.service
    request = DequeueMany(queues=["a", "b"], wait_seconds=10)
    waiting = asyncio.create_task(
        longpoll_many.dequeue_many(service, lambda _: registry, "alpha", request)
    )
    await asyncio.wait_for(registry.wait_for_waiting(await queue_id(alpha, "a"), 1), TIMEOUT)
    registry.close()
    assert await asyncio.wait_for(waiting, TIMEOUT) == []


async def test_the_registry_counts_a_waiter_of_several_queues_once() -> None:
    registry = WaiterRegistry()
    with registry.subscribe_many([1, 2]) as many, registry.subscribe(2) as single:
        parked = asyncio.create_task(many.wait(60))
        await asyncio.wait_for(registry.wait_for_waiting(1, 1), TIMEOUT)
        assert (registry.waiting(1), registry.waiting(2), registry.waiting_anywhere()) == (1, 1, 1)
        registry.notify(2)  # the longest parked waiter of queue 2
        assert (many.woken, single.woken) == (True, False)
        assert await asyncio.wait_for(parked, TIMEOUT) is True
        registry.notify(1)
        registry.notify(2)  # queue 2 has a waiter still to look (the same one): nothing more
        assert (many.woken, single.woken) == (True, False)
    assert registry.waiting_anywhere() == 0
    registry.notify(1)  # no waiters left: nothing happens


# --- concurrency ---------------------------------------------------------------------------------


async def test_concurrent_consumers_of_several_queues_never_share_a_message(
    database_url: str, engine: AsyncEngine
) -> None:
    """Consumers in two server processes, each long-polling its own order of three queues with
    random counts, while producers enqueue: every message is leased exactly once."""
    names = ["q0", "q1", "q2"]
    per_queue, batch = 150, 10
    async with two_processes(database_url, engine) as admins:
        assert (await admins[0].post("/v1/namespaces", json={"name": "alpha"})).status_code == 201
        token = (await admins[0].post("/v1/namespaces/alpha/tokens", json={})).json()["token"]
        callers = [as_token(admin, token) for admin in admins]
        await make_queues(callers[0], *names)
        produced = asyncio.Event()
        seen: list[tuple[str, str, str]] = []
        served: set[int] = set()  # the consumers that were leased something

        async def producer(name: str) -> None:
            for start in range(0, per_queue, batch):
                messages = [{"id": f"{name}-{i}"} for i in range(start, start + batch)]
                await enqueue(callers[0], name, *messages)

        async def consumer(number: int) -> None:
            rng = random.Random(number)
            caller = callers[number % 2]
            order = rng.sample(names, k=3)
            while True:
                messages, _ = await consume(
                    caller, queues=order, count=rng.randint(1, 7), wait_seconds=1
                )
                if not messages and produced.is_set():
                    return
                if messages:
                    served.add(number)
                seen.extend((m["queue"], m["id"], m["lease_id"]) for m in messages)
                for queue in {m["queue"] for m in messages}:
                    items = [
                        {"id": m["id"], "lease_id": m["lease_id"]}
                        for m in messages
                        if m["queue"] == queue
                    ]
                    done = await caller.post(f"{base(queue)}/ack", json={"complete": items})
                    assert done.status_code == 200, done.text
                    assert all(r["ok"] for r in done.json()["results"]), done.text

        async def run() -> None:
            consumers = [asyncio.create_task(consumer(n)) for n in range(8)]
            await asyncio.gather(*(producer(name) for name in names))
            produced.set()
            await asyncio.gather(*consumers)

        await asyncio.wait_for(run(), 60)

    counted = Counter((queue, message_id) for queue, message_id, _ in seen)
    assert [key for key, n in counted.items() if n > 1] == []
    assert set(counted) == {(name, f"{name}-{i}") for name in names for i in range(per_queue)}
    assert len({lease for *_, lease in seen}) == len(seen)
    assert len(served) >= 4  # many consumers got work
