"""The worker against a real server: heartbeats, retries and dead letters, bounded concurrency,
graceful stop, and the sync reply pattern. Budget: about 8 s."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import httpx
import pytest

from app.client import (
    AsyncClient,
    CallFailed,
    CallTimeout,
    Client,
    Leased,
    NewMessage,
    Retry,
    Worker,
)
from app.client.outcomes import RELEASE_ERROR
from tests.client.conftest import FAST_RETRY
from tests.client.handlers import echo

TIMEOUT = 15.0


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[Worker]:
    """Run ``worker`` in a task; stop it and check it ended cleanly on exit."""
    task = asyncio.create_task(worker.run_async())
    try:
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(task, TIMEOUT)


async def test_heartbeats_keep_a_long_task_alive_past_its_lease(
    q: str, aclient: AsyncClient
) -> None:
    # One attempt only: had the 1 s lease expired, the message would be errored at once.
    await aclient.put_queue(q, lease_seconds=1, max_attempts=1)
    await aclient.enqueue(q, "long", id="long-1")

    async def long_task(message: Leased) -> None:
        await asyncio.sleep(3.2)  # the work: more than three lease periods

    worker = Worker(q, long_task, client=aclient, wait_seconds=1)
    async with running(worker):
        stats = await worker.wait_for(lambda s: s.completed == 1, TIMEOUT)
    message = await aclient.get_message(q, "long-1")
    assert (message.state, message.attempts) == ("completed", 1)
    assert stats.heartbeats >= 6  # every third of the lease
    assert stats.lost == 0


async def test_a_crashing_handler_is_retried_then_dead_lettered(
    q: str, aclient: AsyncClient
) -> None:
    await aclient.put_queue(q, max_attempts=3)
    await aclient.enqueue(q, {"n": 1}, id="bad")
    attempts: list[int] = []

    async def crash(message: Leased) -> None:
        attempts.append(message.attempt)
        raise ValueError(f"boom on attempt {message.attempt}")

    worker = Worker(q, crash, client=aclient, wait_seconds=1)
    async with running(worker):
        await worker.wait_for(lambda s: s.failed == 3, TIMEOUT)
    message = await aclient.get_message(q, "bad")
    assert attempts == [1, 2, 3]
    assert message.state == "errored"
    assert message.last_error == "ValueError: boom on attempt 3"


async def test_retry_asks_for_its_own_delay(q: str, aclient: AsyncClient) -> None:
    await aclient.put_queue(q)
    await aclient.enqueue(q, None, id="later")

    def not_yet(message: Leased) -> None:
        raise Retry(delay_seconds=3600, message="rate limited upstream")

    worker = Worker(q, not_yet, client=aclient, wait_seconds=1)
    async with running(worker):
        await worker.wait_for(lambda s: s.failed == 1, TIMEOUT)
    message = await aclient.get_message(q, "later")
    assert message.state == "invisible"
    assert message.visible_at - message.updated_at > timedelta(minutes=59)
    assert message.last_error == "Retry: rate limited upstream"


async def test_sync_handlers_run_with_bounded_concurrency(q: str, aclient: AsyncClient) -> None:
    await aclient.put_queue(q)
    for i in range(7):
        await aclient.enqueue(q, i, id=f"m{i}")
    gate = threading.Event()
    threads: set[str] = set()

    def blocked(message: Leased) -> int:
        threads.add(threading.current_thread().name)
        assert gate.wait(TIMEOUT)
        return int(message.payload)

    worker = Worker(q, blocked, client=aclient, concurrency=3, wait_seconds=1)
    async with running(worker):
        await worker.wait_for(lambda s: s.running == 3, TIMEOUT)
        # The worker leased only what it can run: the rest wait on the server.
        counts = (await aclient.get_queue(q)).counts
        assert (counts["running"], counts["pending"]) == (3, 4)
        gate.set()
        stats = await worker.wait_for(lambda s: s.completed == 7, TIMEOUT)
    assert stats.leased == 7
    assert stats.failed == 0
    assert all(name.startswith("sundial-handler") for name in threads)


async def test_stop_releases_what_does_not_finish_in_time(q: str, aclient: AsyncClient) -> None:
    await aclient.put_queue(q, lease_seconds=600)
    await aclient.enqueue(q, None, id="stuck")
    await aclient.enqueue(q, None, id="quick")
    release = asyncio.Event()

    async def handler(message: Leased) -> None:
        if message.id == "stuck":
            await release.wait()  # never set: it outlives the shutdown timeout

    worker = Worker(q, handler, client=aclient, concurrency=2, shutdown_timeout=0.3)
    task = asyncio.create_task(worker.run_async())
    await worker.wait_for(lambda s: s.leased == 2 and s.completed == 1, TIMEOUT)
    worker.stop()
    stats = await asyncio.wait_for(task, TIMEOUT)
    assert (stats.completed, stats.released, stats.running) == (1, 1, 0)
    stuck = await aclient.get_message(q, "stuck")
    # Back in the queue at once rather than after its 10-minute lease.
    assert (stuck.state, stuck.last_error) == ("pending", RELEASE_ERROR)


async def test_burst_mode_stops_when_idle(q: str, aclient: AsyncClient) -> None:
    await aclient.put_queue(q)
    for i in range(5):
        await aclient.enqueue(q, i)
    seen: list[Any] = []
    stats = await Worker(q, seen.append, client=aclient, concurrency=2, burst=True).run_async()
    assert stats.completed == 5
    assert sorted(seen, key=lambda m: m.payload)[0].payload == 0


# --- the sync reply pattern ----------------------------------------------------------------------


async def test_call_round_trips_through_a_worker(
    q: str, aclient: AsyncClient, client: Client
) -> None:
    await aclient.put_queue(q)
    worker = Worker(q, echo, client=aclient, concurrency=2, wait_seconds=2)
    async with running(worker):
        assert await aclient.call(q, {"x": 1}, timeout=10) == {"echo": {"x": 1}}
        # The blocking client, from a thread, meets the same worker.
        answer = await asyncio.to_thread(client.call, q, [1, 2], timeout=10)
        assert answer == {"echo": [1, 2]}
    replies = await aclient.get_queue(q + ".replies")
    assert replies.counts["completed"] == 2
    assert replies.counts["pending"] == 0
    assert replies.filter_key == "sundial.request_id"  # each caller's wait reads an index


async def test_call_reports_a_handler_that_fails_for_good(q: str, aclient: AsyncClient) -> None:
    await aclient.put_queue(q, max_attempts=2)

    def broken(message: Leased) -> None:
        raise KeyError("missing")

    async with running(Worker(q, broken, client=aclient, wait_seconds=2)):
        with pytest.raises(CallFailed, match="KeyError"):
            await aclient.call(q, {"x": 1}, timeout=10)


async def test_call_times_out_and_withdraws_its_request(q: str, aclient: AsyncClient) -> None:
    await aclient.put_queue(q)
    with pytest.raises(CallTimeout):
        await aclient.call(q, "nobody listens", timeout=1)
    [request] = [m async for m in aclient.messages(q)]
    # Withdrawn by the caller, or expired by its TTL (= the timeout) just before: never run.
    assert request.state == "canceled"
    assert request.attempts == 0
    assert request.last_error in {"caller timed out", "expired"}


def test_sync_client_call_times_out(q: str, client: Client) -> None:
    client.put_queue(q)
    with pytest.raises(TimeoutError):
        client.call(q, None, timeout=1)
    assert FAST_RETRY.attempts == 3


class CountingTransport(httpx.AsyncHTTPTransport):
    """Counts the requests sent to each kind of endpoint (the path's last segment)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: dict[str, int] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        kind = request.url.path.rsplit("/", 1)[-1]
        self.sent[kind] = self.sent.get(kind, 0) + 1
        return await super().handle_async_request(request)


async def test_completions_that_finish_together_share_one_acknowledgement(
    q: str, server: str, token: str
) -> None:
    transport = CountingTransport()
    async with AsyncClient(server, token, retry=FAST_RETRY, transport=transport) as aclient:
        await aclient.put_queue(q)
        await aclient.enqueue_many(q, [NewMessage(id=f"m{i}", payload=i) for i in range(8)])
        gate = asyncio.Event()

        async def held(message: Leased) -> None:
            await gate.wait()

        worker = Worker(q, held, client=aclient, concurrency=8, wait_seconds=1)
        async with running(worker):
            await worker.wait_for(lambda s: s.running == 8, TIMEOUT)
            gate.set()
            stats = await worker.wait_for(lambda s: s.completed == 8, TIMEOUT)
        messages = {m.id: (m.state, m.attempts) async for m in aclient.messages(q)}
    assert messages == {f"m{i}": ("completed", 1) for i in range(8)}
    assert (stats.completed, stats.lost, stats.failed) == (8, 0, 0)
    # Eight handlers returned at once: their completions went out in one or two
    # acknowledgements (the first may leave alone), not one request each.
    assert transport.sent.get("complete", 0) == 0
    assert 1 <= transport.sent["ack"] <= 2


async def test_a_refused_item_of_an_acknowledgement_counts_as_lost(
    q: str, aclient: AsyncClient
) -> None:
    await aclient.put_queue(q)
    await aclient.enqueue_many(q, [NewMessage(id=f"m{i}", payload=i) for i in range(2)])

    async def cancel_the_first(message: Leased) -> None:
        if message.id == "m0":  # taken away while its handler runs: its result must be refused
            await aclient.cancel(q, message.id, force=True, reason="taken away")

    worker = Worker(q, cancel_the_first, client=aclient, concurrency=2, wait_seconds=1)
    async with running(worker):
        stats = await worker.wait_for(lambda s: s.completed + s.lost == 2, TIMEOUT)
    assert (stats.completed, stats.lost) == (1, 1)
    states = {m.id: m.state async for m in aclient.messages(q)}
    assert states == {"m0": "canceled", "m1": "completed"}
