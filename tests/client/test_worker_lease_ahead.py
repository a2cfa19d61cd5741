"""The worker's turns: fast handlers get messages leased ahead of them (more per request than
handlers, two requests on their way), slow ones none; what was leased ahead and never started
is given back at stop; a held message keeps its lease by heartbeats while it waits; a worker
whose queue is deleted stops with the server's error instead of asking again and again."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from app.client import AsyncClient, Leased, NewMessage, NotFound, Worker
from app.client.held import Holdings
from app.client.outcomes import RELEASE_ERROR
from tests.client.conftest import FAST_RETRY

TIMEOUT = 15.0


class AskedCounts(httpx.AsyncHTTPTransport):
    """Records how many messages each request asked to lease."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        kind = request.url.path.rsplit("/", 1)[-1]
        if kind in ("dequeue", "ack"):
            body = json.loads(request.content or b"{}")
            then = body if kind == "dequeue" else body.get("dequeue")
            if then is not None:
                self.asked.append(then.get("count", 1))
        return await super().handle_async_request(request)


async def test_fast_handlers_are_leased_ahead(q: str, server: str, token: str) -> None:
    transport = AskedCounts()
    async with AsyncClient(server, token, retry=FAST_RETRY, transport=transport) as aclient:
        await aclient.put_queue(q)
        await aclient.enqueue_many(q, [NewMessage(id=f"m{i}", payload=i) for i in range(200)])

        async def no_op(message: Leased) -> None:
            return None

        worker = Worker(q, no_op, client=aclient, concurrency=2, burst=True)
        stats = await asyncio.wait_for(worker.run_async(), TIMEOUT)
        counts = (await aclient.get_queue(q)).counts
    assert (stats.completed, stats.lost, stats.released) == (200, 0, 0)
    assert counts["completed"] == 200
    # Two handlers, yet requests asked for more than two once handlers went idle waiting.
    assert max(transport.asked) > 2
    assert max(transport.asked) <= 2 + worker.prefetch
    assert len(transport.asked) < 100


async def test_nothing_is_leased_ahead_of_slow_handlers(q: str, aclient: AsyncClient) -> None:
    await aclient.put_queue(q)
    await aclient.enqueue_many(q, [NewMessage(id=f"m{i}", payload=i) for i in range(10)])
    gate = asyncio.Event()

    async def held(message: Leased) -> None:
        await gate.wait()

    worker = Worker(q, held, client=aclient, concurrency=3, wait_seconds=1)
    task = asyncio.create_task(worker.run_async())
    await worker.wait_for(lambda s: s.running == 3, TIMEOUT)
    counts = (await aclient.get_queue(q)).counts
    assert (counts["running"], counts["pending"]) == (3, 7)
    gate.set()
    await worker.wait_for(lambda s: s.completed == 10, TIMEOUT)
    worker.stop()
    await asyncio.wait_for(task, TIMEOUT)


async def test_stop_gives_back_what_was_leased_ahead(q: str, aclient: AsyncClient) -> None:
    await aclient.put_queue(q, lease_seconds=600)
    await aclient.enqueue_many(q, [NewMessage(id=f"m{i:03}", payload=i) for i in range(300)])
    blocked = asyncio.Event()
    never = asyncio.Event()

    async def fast_then_stuck(message: Leased) -> None:
        if message.payload >= 100:  # fast at first (the worker leases ahead), then stuck
            blocked.set()
            await never.wait()

    worker = Worker(
        q, fast_then_stuck, client=aclient, concurrency=1, shutdown_timeout=0.2, wait_seconds=1
    )
    task = asyncio.create_task(worker.run_async())
    await asyncio.wait_for(blocked.wait(), TIMEOUT)
    await worker.wait_for(lambda s: s.running == 1, TIMEOUT)
    worker.stop()
    stats = await asyncio.wait_for(task, TIMEOUT)
    counts = (await aclient.get_queue(q)).counts
    assert counts["running"] == 0  # everything held was given back, nothing waits for a lease
    assert stats.released >= 2  # the stuck one, and at least one leased ahead of it
    assert stats.leased == stats.completed + stats.released
    assert counts["completed"] == stats.completed
    assert counts["pending"] == 300 - stats.completed
    released = [m async for m in aclient.messages(q, states=["pending"]) if m.attempts == 1]
    assert len(released) == stats.released
    assert {m.last_error for m in released} == {RELEASE_ERROR}


async def test_a_held_message_keeps_its_lease_while_it_waits(q: str, aclient: AsyncClient) -> None:
    await aclient.put_queue(q, lease_seconds=1, max_attempts=1)
    await aclient.enqueue(q, None, id="waits")
    (message,) = await aclient.dequeue(q)
    beats: list[int] = []
    tasks: set[asyncio.Task[None]] = set()

    def spawn(work: object) -> None:
        task = asyncio.ensure_future(work)  # type: ignore[arg-type]
        tasks.add(task)

    six_beats = asyncio.Event()  # three lease periods and more

    def count(heartbeats: int) -> None:
        beats.append(heartbeats)
        if len(beats) >= 6:
            six_beats.set()

    holdings = Holdings(lambda _message: q, spawn, count)
    holdings.attach(aclient, 1)
    held = holdings.hold(message)
    await asyncio.wait_for(six_beats.wait(), TIMEOUT)
    holdings.let_go(held)
    await asyncio.gather(*tasks)
    assert len(beats) >= 6
    assert (await aclient.complete(q, "waits", message.lease_id)).state == "completed"


async def test_a_worker_whose_queue_is_deleted_stops_with_the_error(
    q: str, aclient: AsyncClient
) -> None:
    await aclient.put_queue(q)
    await aclient.enqueue(q, None, id="first")
    worker = Worker(q, lambda message: None, client=aclient, wait_seconds=1)
    task = asyncio.create_task(worker.run_async())
    await worker.wait_for(lambda s: s.completed == 1, TIMEOUT)
    await aclient.delete_queue(q)
    with pytest.raises(NotFound):
        await asyncio.wait_for(task, TIMEOUT)
