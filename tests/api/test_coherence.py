"""Every change to a token, namespace or queue applies to every request sent after its answer,
in every server process (app/core/catalogue.py).

Two apps on one database stand for two server processes, each with its own lookup cache (kept
for a minute, so no expiry can hide a stale entry). Several connections loop over requests
through both while the change is made through one; every request sent after the change's
answer must see it, and requests before it must not (so each loop proves its caches were warm).
tests/test_coherence_serve.py does the same against real server processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx

from tests.api.conftest import Caller, as_token, two_processes

LOOPS = 6
WARM = 5  # requests each loop makes before the change
AFTER = 10  # requests each loop makes after the change's answer

Request = Callable[[Caller], Awaitable[httpx.Response]]


@dataclass
class Seen:
    """What the loops saw: (sent after the change answered?, answer) per request."""

    answers: list[tuple[bool, httpx.Response]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def statuses(self, *, after: bool) -> set[int]:
        return {answer.status_code for was_after, answer in self.answers if was_after == after}


async def hammer(
    callers: list[Caller], request: Request, change: Callable[[], Awaitable[None]]
) -> Seen:
    """LOOPS loops of ``request`` over ``callers`` in turn; ``change`` once all are warm."""
    seen = Seen()
    warm = asyncio.Barrier(LOOPS + 1)

    async def loop(index: int) -> None:
        caller = callers[index % len(callers)]
        for _ in range(WARM):
            seen.answers.append((False, await request(caller)))
        await warm.wait()
        await seen.changed.wait()
        for _ in range(AFTER):
            seen.answers.append((True, await request(caller)))

    loops = [asyncio.create_task(loop(i)) for i in range(LOOPS)]
    await warm.wait()
    await change()
    seen.changed.set()
    await asyncio.gather(*loops)
    return seen


async def token_of(admin: Caller, namespace: str) -> tuple[str, str]:
    answer = await admin.post(f"/v1/namespaces/{namespace}/tokens", json={})
    assert answer.status_code == 201, answer.text
    return answer.json()["token"], answer.json()["id"]


async def setup(admin: Caller) -> tuple[str, str]:
    assert (await admin.post("/v1/namespaces", json={"name": "ns"})).status_code == 201
    assert (await admin.put("/v1/namespaces/ns/queues/q", json={})).status_code == 201
    return await token_of(admin, "ns")


async def patch_queue(admin: Caller, **changes: bool) -> None:
    answer = await admin.patch("/v1/namespaces/ns/queues/q", json=changes)
    assert answer.status_code == 200, answer.text


async def enqueue_one(caller: Caller) -> httpx.Response:
    return await caller.post("/v1/namespaces/ns/queues/q/messages", json={"messages": [{}]})


async def test_a_revoked_token_fails_every_request_sent_after_the_answer(database_url, engine):
    async with two_processes(database_url, engine) as admins:
        secret, token_id = await setup(admins[0])
        callers = [as_token(admins[0], secret), as_token(admins[1], secret)]

        async def revoke() -> None:
            answer = await admins[0].delete(f"/v1/namespaces/ns/tokens/{token_id}")
            assert answer.status_code == 204

        async def request(caller: Caller) -> httpx.Response:
            if caller is callers[0]:
                return await caller.get("/v1/namespaces/ns/queues")
            return await enqueue_one(caller)

        seen = await hammer(callers, request, revoke)
    assert seen.statuses(after=False) <= {200, 201}
    assert seen.statuses(after=True) == {401}


async def test_an_old_token_never_reads_a_namespace_recreated_with_its_name(database_url, engine):
    async with two_processes(database_url, engine) as admins:
        secret, _ = await setup(admins[0])
        callers = [as_token(admins[1], secret), as_token(admins[0], secret)]

        async def recreate() -> None:
            admin = admins[0]
            assert (await admin.delete("/v1/namespaces/ns")).status_code == 204
            assert (await admin.post("/v1/namespaces", json={"name": "ns"})).status_code == 201
            answer = await admin.put("/v1/namespaces/ns/queues/q", json={})
            assert answer.status_code == 201

        async def request(caller: Caller) -> httpx.Response:
            return await caller.get("/v1/namespaces/ns/queues/q")

        seen = await hammer(callers, request, recreate)
    assert seen.statuses(after=False) == {200}
    assert seen.statuses(after=True) == {401}


async def test_a_paused_queue_refuses_every_enqueue_sent_after_the_answer(database_url, engine):
    async with two_processes(database_url, engine) as admins:
        secret, _ = await setup(admins[0])
        callers = [as_token(admins[1], secret), as_token(admins[0], secret)]

        seen = await hammer(
            callers, enqueue_one, lambda: patch_queue(admins[0], enqueue_paused=True)
        )
    assert seen.statuses(after=False) == {201}
    assert seen.statuses(after=True) == {409}


async def test_a_dequeue_paused_queue_leases_nothing_after_the_answer(database_url, engine):
    async with two_processes(database_url, engine) as admins:
        secret, _ = await setup(admins[0])
        messages = {"messages": [{} for _ in range(LOOPS * (WARM + AFTER))]}
        answer = await admins[0].post("/v1/namespaces/ns/queues/q/messages", json=messages)
        assert answer.status_code == 201
        callers = [as_token(admins[1], secret), as_token(admins[0], secret)]

        async def request(caller: Caller) -> httpx.Response:
            return await caller.post("/v1/namespaces/ns/queues/q/dequeue", json={})

        seen = await hammer(callers, request, lambda: patch_queue(admins[0], dequeue_paused=True))
    leased = [len(answer.json()["messages"]) for after, answer in seen.answers if after]
    assert seen.statuses(after=False) == {200}
    assert sum(len(a.json()["messages"]) for after, a in seen.answers if not after) == LOOPS * WARM
    assert seen.statuses(after=True) == {200}
    assert set(leased) == {0}


async def test_a_parked_long_poll_leases_nothing_from_a_queue_paused_after_it_parked(
    database_url, engine
):
    async with two_processes(database_url, engine) as admins:
        secret, _ = await setup(admins[0])
        consumer = as_token(admins[1], secret)
        poll = asyncio.create_task(
            consumer.post("/v1/namespaces/ns/queues/q/dequeue", json={"wait_seconds": 3})
        )
        queue_id = (await admins[1].runtime.service.get_queue_or_404("ns", "q")).id
        await consumer.runtime.waiters.wait_for_waiting(queue_id, 1)
        await patch_queue(admins[0], dequeue_paused=True)
        # A message arrives: its notification wakes the parked poll, which must not take it.
        assert (await enqueue_one(admins[0])).status_code == 201
        polled = await poll
    assert polled.status_code == 200
    assert polled.json()["messages"] == []


async def test_a_parked_long_poll_leases_at_once_from_a_queue_resumed_after_it_parked(
    database_url, engine
):
    async with two_processes(database_url, engine) as admins:
        secret, _ = await setup(admins[0])
        await patch_queue(admins[0], dequeue_paused=True)
        assert (await enqueue_one(admins[0])).status_code == 201
        consumer = as_token(admins[1], secret)
        consumer.runtime.waiters.fallback_seconds = 60  # only the resume's wake-up may wake it
        poll = asyncio.create_task(
            consumer.post("/v1/namespaces/ns/queues/q/dequeue", json={"wait_seconds": 20})
        )
        queue_id = (await admins[1].runtime.service.get_queue_or_404("ns", "q")).id
        await consumer.runtime.waiters.wait_for_waiting(queue_id, 1)
        await patch_queue(admins[0], dequeue_paused=False)
        polled = await asyncio.wait_for(poll, 10)
    assert polled.status_code == 200
    assert len(polled.json()["messages"]) == 1
