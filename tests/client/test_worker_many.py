"""A worker on several queues of one namespace, against a real server: the queues' order, each
message completed, failed and extended on the queue it came from, a long poll woken by any of
them, and ``sundial work --queue A --queue B``."""

from __future__ import annotations

import asyncio

from app.client import AsyncClient, Client, Leased, LeasedFrom, NewMessage, Worker
from tests.client.test_cli import sundial  # noqa: F401 - the fixture
from tests.client.test_dequeue_many import long_polls_parked
from tests.client.test_worker import TIMEOUT, running

LONG_POLL = 20


async def until_parked(client: AsyncClient, polls: int) -> None:
    """Until the test server reports ``polls`` long polls parked."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            if long_polls_parked(await client.metrics()) == polls:
                return
            await asyncio.sleep(0.05)  # then scrape again


async def test_the_first_queue_is_served_first_and_each_message_completed_where_it_came_from(
    namespace: str, aclient: AsyncClient
) -> None:
    urgent, bulk = f"{namespace}/urgent", f"{namespace}/bulk"
    await aclient.put_queue(urgent)
    await aclient.put_queue(bulk)
    await aclient.enqueue_many(bulk, [NewMessage(id=f"b{i}", priority=i) for i in range(3)])
    await aclient.enqueue_many(urgent, [NewMessage(id=f"u{i}", priority=9 + i) for i in range(2)])
    seen: list[tuple[str, str]] = []

    async def record(message: Leased) -> None:
        assert isinstance(message, LeasedFrom)
        seen.append((message.queue, message.id))

    # One message at a time, nothing leased ahead: the order of the leases is the order seen.
    worker = Worker([urgent, bulk], record, client=aclient, prefetch=0, burst=True)
    stats = await asyncio.wait_for(worker.run_async(), TIMEOUT)

    assert seen == [(urgent, "u0"), (urgent, "u1"), (bulk, "b0"), (bulk, "b1"), (bulk, "b2")]
    assert (stats.completed, stats.failed, stats.lost) == (5, 0, 0)
    for queue, message_id in seen:
        assert (await aclient.get_message(queue, message_id)).state == "completed"


async def test_failures_and_heartbeats_go_to_the_queue_of_the_message(
    namespace: str, aclient: AsyncClient
) -> None:
    quick, slow = f"{namespace}/quick", f"{namespace}/slow"
    # One attempt each: a lease that expired would error the slow message at once.
    await aclient.put_queue(quick, max_attempts=1, lease_seconds=30)
    await aclient.put_queue(slow, max_attempts=1, lease_seconds=1)
    await aclient.enqueue(quick, "boom", id="q1")
    await aclient.enqueue(slow, "long", id="s1")

    async def handle(message: Leased) -> None:
        if message.payload == "boom":
            raise RuntimeError("handler exploded")
        # The work: held until its lease was extended three times (past the 1 s lease).
        await worker.wait_for(lambda s: s.heartbeats >= 3, TIMEOUT)

    worker = Worker([quick, slow], handle, client=aclient, concurrency=2, wait_seconds=1)
    async with running(worker):
        stats = await worker.wait_for(lambda s: s.completed == 1 and s.failed == 1, TIMEOUT)

    failed = await aclient.get_message(quick, "q1")
    assert failed.state == "errored"
    assert "handler exploded" in (failed.last_error or "")
    done = await aclient.get_message(slow, "s1")
    assert (done.state, done.attempts) == ("completed", 1)
    assert stats.heartbeats >= 3  # the shorter lease (1 s) is the worker's: extended on `slow`
    assert stats.lost == 0


async def test_an_idle_worker_wakes_for_a_message_in_any_of_its_queues(
    namespace: str, aclient: AsyncClient
) -> None:
    first, second = f"{namespace}/first", f"{namespace}/second"
    await aclient.put_queue(first)
    await aclient.put_queue(second)
    handled: list[str] = []

    async def record(message: Leased) -> None:
        handled.append(message.id)

    worker = Worker([first, second], record, client=aclient, wait_seconds=LONG_POLL)
    loop = asyncio.get_running_loop()
    await until_parked(aclient, 0)  # the earlier tests' polls are gone from the gauge
    async with running(worker):
        await until_parked(aclient, 1)  # the worker idles in its long poll
        enqueued = loop.time()
        await aclient.enqueue(second, "late", id="late")
        await worker.wait_for(lambda s: s.completed == 1, TIMEOUT)
        woken_after = loop.time() - enqueued
    assert handled == ["late"]
    assert woken_after < 5.0  # its long poll answered with it, well before its 20 s
    assert (await aclient.get_message(second, "late")).state == "completed"


def test_sundial_work_takes_several_queues(
    namespace: str,
    sundial,  # noqa: F811
    client: Client,
) -> None:
    a, b = f"{namespace}/a", f"{namespace}/b"
    client.put_queue(a)
    client.put_queue(b)
    client.enqueue(a, 1, id="in-a")
    client.enqueue(b, 2, id="in-b")
    result = sundial(
        "work", "--queue", a, "--queue", b, "--handler", "tests.client.handlers:echo", "--burst"
    )
    assert "2 completed" in result.stderr
    assert client.get_message(a, "in-a").state == "completed"
    assert client.get_message(b, "in-b").state == "completed"
