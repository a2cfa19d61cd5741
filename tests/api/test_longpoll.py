"""Long polling: a waiting dequeue is woken by NOTIFY (not by sleeping), returns as soon as it
has a message, times out empty, survives listener reconnects, and gives up on clients that left.

Synchronisation is by the waiter registry (``wait_for_waiting``), never by sleeping.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg

from app.api.schemas.consuming import Dequeue
from app.database_url import psycopg_dsn
from app.store.notifications import ListenerRegistrations
from app.store.sql.listeners import LISTENER_REGISTER, LISTENERS_PRUNE
from app.web import longpoll
from app.web.waiters import WaiterRegistry
from tests.api.conftest import Caller
from tests.helpers import execute

TIMEOUT = 5.0


async def queue_id(caller: Caller, name: str = "q") -> int:
    queue = await caller.runtime.service.get_queue_or_404(caller.namespace, name)
    return queue.id


async def consume(caller: Caller, queue: str, **body: Any) -> tuple[list[dict[str, Any]], float]:
    """Dequeue; the messages and the loop time at which the answer arrived."""
    response = await caller.post(f"{queue}/dequeue", json=body)
    assert response.status_code == 200, response.text
    return response.json()["messages"], asyncio.get_running_loop().time()


async def enqueue(caller: Caller, queue: str, message_id: str, **fields: Any) -> float:
    """Enqueue one message; the loop time at which the enqueue was answered (committed)."""
    body = {"messages": [{"id": message_id, **fields}]}
    response = await caller.post(f"{queue}/messages", json=body)
    assert response.status_code == 201, response.text
    return asyncio.get_running_loop().time()


async def test_waiting_consumer_is_woken_by_enqueue(alpha: Caller, queue: str) -> None:
    registry = alpha.runtime.waiters
    registry.fallback_seconds = 60  # only a notification can wake the consumer in time
    qid = await queue_id(alpha)
    for round_ in range(3):
        consumer = asyncio.create_task(consume(alpha, queue, wait_seconds=5))
        await asyncio.wait_for(registry.wait_for_waiting(qid, 1), TIMEOUT)
        committed = await enqueue(alpha, queue, f"m{round_}", payload={"round": round_})
        messages, answered = await asyncio.wait_for(consumer, TIMEOUT)
        assert [m["id"] for m in messages] == [f"m{round_}"]
        assert messages[0]["payload"] == {"round": round_}
        assert answered - committed < 1.0
    assert registry.waiting(qid) == 0


async def test_returns_at_once_when_ready_and_not_waiting_to_fill_count(
    alpha: Caller, queue: str
) -> None:
    await enqueue(alpha, queue, "a")
    loop = asyncio.get_running_loop()
    started = loop.time()
    messages, answered = await consume(alpha, queue, wait_seconds=20, count=10)
    assert [m["id"] for m in messages] == ["a"]
    assert answered - started < 1.0


async def test_times_out_empty(alpha: Caller, queue: str) -> None:
    started = asyncio.get_running_loop().time()
    messages, answered = await consume(alpha, queue, wait_seconds=1)
    assert messages == []
    assert 0.9 <= answered - started < 3.0


async def test_delayed_message_is_served_when_due(alpha: Caller, queue: str) -> None:
    # Without the scheduler nothing notifies when a delayed message becomes due: the
    # fallback timer finds it.
    alpha.runtime.waiters.fallback_seconds = 0.2
    committed = await enqueue(alpha, queue, "later", delay_seconds=1)
    messages, answered = await consume(alpha, queue, wait_seconds=5)
    assert [m["id"] for m in messages] == ["later"]
    assert 0.9 <= answered - committed < 2.0


async def test_a_parked_consumer_wakes_when_the_next_delayed_message_is_due(
    alpha: Caller, queue: str
) -> None:
    # No scheduler, no notification, a fallback timer far away: only the wait computed from
    # the queue's next visible_at can serve the message in time.
    alpha.runtime.waiters.fallback_seconds = 60
    committed = await enqueue(alpha, queue, "soon", delay_seconds=1)
    await enqueue(alpha, queue, "much-later", delay_seconds=3600)
    messages, answered = await consume(alpha, queue, wait_seconds=10)
    assert [m["id"] for m in messages] == ["soon"]
    assert 0.9 <= answered - committed < 5.0


async def test_one_message_for_many_waiters(alpha: Caller, queue: str) -> None:
    registry = alpha.runtime.waiters
    registry.fallback_seconds = 60
    qid = await queue_id(alpha)
    consumers = [asyncio.create_task(consume(alpha, queue, wait_seconds=1)) for _ in range(3)]
    await asyncio.wait_for(registry.wait_for_waiting(qid, 3), TIMEOUT)
    committed = await enqueue(alpha, queue, "only")
    results = await asyncio.wait_for(asyncio.gather(*consumers), TIMEOUT)
    winners = [(messages, at) for messages, at in results if messages]
    assert len(winners) == 1
    assert [m["id"] for m in winners[0][0]] == ["only"]
    assert winners[0][1] - committed < 1.0


async def test_waiters_of_other_queues_are_not_served(alpha: Caller, queue: str) -> None:
    registry = alpha.runtime.waiters
    registry.fallback_seconds = 60
    other = "/v1/namespaces/alpha/queues/other"
    await alpha.put(other, json={})
    qid = await queue_id(alpha)
    consumer = asyncio.create_task(consume(alpha, queue, wait_seconds=1))
    await asyncio.wait_for(registry.wait_for_waiting(qid, 1), TIMEOUT)
    await enqueue(alpha, other, "elsewhere")
    messages, _ = await asyncio.wait_for(consumer, TIMEOUT)
    assert messages == []


async def test_listener_reconnects_and_wakes_waiters(alpha: Caller, queue: str) -> None:
    runtime = alpha.runtime
    listener, registry = runtime.listener, runtime.waiters
    registry.fallback_seconds = 60
    qid = await queue_id(alpha)
    assert listener.connected
    connections, pid = listener.connections, listener.backend_pid

    consumer = asyncio.create_task(consume(alpha, queue, wait_seconds=10))
    await asyncio.wait_for(registry.wait_for_waiting(qid, 1), TIMEOUT)
    async with await psycopg.AsyncConnection.connect(
        psycopg_dsn(runtime.engine.url), autocommit=True
    ) as conn:
        await conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    # Enqueued while the listener may be down: its notification can be lost, but the
    # reconnection wakes every waiter.
    committed = await enqueue(alpha, queue, "a")
    messages, answered = await asyncio.wait_for(consumer, TIMEOUT)
    assert [m["id"] for m in messages] == ["a"]
    assert answered - committed < 3.0

    await asyncio.wait_for(listener.wait_connected(connections + 1), TIMEOUT)
    assert listener.backend_pid not in (None, pid)
    consumer = asyncio.create_task(consume(alpha, queue, wait_seconds=5))
    await asyncio.wait_for(registry.wait_for_waiting(qid, 1), TIMEOUT)
    committed = await enqueue(alpha, queue, "b")
    messages, answered = await asyncio.wait_for(consumer, TIMEOUT)
    assert [m["id"] for m in messages] == ["b"]
    assert answered - committed < 1.0


async def test_client_that_left_gets_nothing_leased(alpha: Caller, queue: str) -> None:
    runtime = alpha.runtime
    runtime.waiters.fallback_seconds = 60
    qid = await queue_id(alpha)
    gone = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    waiting = asyncio.create_task(
        longpoll.dequeue(
            runtime.service, runtime.waiters_of, "alpha", "q", Dequeue(wait_seconds=10), receive
        )
    )
    await asyncio.wait_for(runtime.waiters.wait_for_waiting(qid, 1), TIMEOUT)
    gone.set()
    assert await asyncio.wait_for(waiting, TIMEOUT) == []
    await enqueue(alpha, queue, "a")
    assert (await alpha.get(f"{queue}/messages/a")).json()["state"] == "pending"


async def test_shutdown_releases_waiters(alpha: Caller, queue: str) -> None:
    service = alpha.runtime.service
    registry = WaiterRegistry(fallback_seconds=60)
    qid = await queue_id(alpha)
    waiting = asyncio.create_task(
        longpoll.dequeue(service, lambda _: registry, "alpha", "q", Dequeue(wait_seconds=10))
    )
    await asyncio.wait_for(registry.wait_for_waiting(qid, 1), TIMEOUT)
    registry.close()
    assert await asyncio.wait_for(waiting, TIMEOUT) == []
    # after close, a new long poll answers at once
    started = asyncio.get_running_loop().time()
    assert (
        await longpoll.dequeue(service, lambda _: registry, "alpha", "q", Dequeue(wait_seconds=10))
        == []
    )
    assert asyncio.get_running_loop().time() - started < 1.0


async def test_long_poll_validates_before_waiting(alpha: Caller, queue: str) -> None:
    for body, field in [
        ({"wait_seconds": 5, "count": 0}, "count"),
        ({"wait_seconds": 5, "lease_seconds": 0}, "lease_seconds"),
        ({"wait_seconds": 5, "metadata": {"": "v"}}, "metadata"),
    ]:
        response = await alpha.post(f"{queue}/dequeue", json=body)
        assert response.status_code == 400
        assert response.json()["error"]["details"]["field"] == field
    response = await alpha.post(
        "/v1/namespaces/alpha/queues/nope/dequeue", json={"wait_seconds": 5}
    )
    assert response.status_code == 404


async def test_waiting_consumer_is_woken_when_a_failed_message_returns(
    alpha: Caller, queue: str
) -> None:
    registry = alpha.runtime.waiters
    registry.fallback_seconds = 60  # only a notification can wake the consumer in time
    qid = await queue_id(alpha)
    await enqueue(alpha, queue, "retry-me")
    (leased,), _ = await consume(alpha, queue)
    consumer = asyncio.create_task(consume(alpha, queue, wait_seconds=5))
    await asyncio.wait_for(registry.wait_for_waiting(qid, 1), TIMEOUT)
    failed = await alpha.post(
        f"{queue}/messages/retry-me/fail", json={"lease_id": leased["lease_id"]}
    )
    assert failed.status_code == 200, failed.text
    assert failed.json()["state"] == "pending"
    messages, _ = await asyncio.wait_for(consumer, TIMEOUT)
    assert [(m["id"], m["attempt"]) for m in messages] == [("retry-me", 2)]


async def test_waiting_consumer_is_woken_when_an_exclusive_value_is_freed(
    alpha: Caller,
) -> None:
    queue = f"/v1/namespaces/{alpha.namespace}/queues/builds"
    created = await alpha.put(queue, json={"kind": "exclusive", "exclusive_key": "project"})
    assert created.status_code == 201, created.text
    registry = alpha.runtime.waiters
    registry.fallback_seconds = 60
    qid = await queue_id(alpha, "builds")
    for message_id in ("first", "second"):
        await enqueue(alpha, queue, message_id, metadata={"project": "web"})
    (running,), _ = await consume(alpha, queue)
    # "second" is pending but blocked behind "first": the consumer must wait.
    consumer = asyncio.create_task(consume(alpha, queue, wait_seconds=5))
    await asyncio.wait_for(registry.wait_for_waiting(qid, 1), TIMEOUT)
    done = await alpha.post(
        f"{queue}/messages/{running['id']}/complete", json={"lease_id": running["lease_id"]}
    )
    assert done.status_code == 200, done.text
    messages, _ = await asyncio.wait_for(consumer, TIMEOUT)
    assert [m["id"] for m in messages] == ["second"]


async def test_a_registration_made_across_a_listener_reconnect_is_made_again(
    alpha: Caller, queue: str
) -> None:
    """The LISTEN connection is replaced while a queue's registration is in flight: the row it
    inserts names the dead connection, which the leader prunes. The registry must not count the
    queue as registered, or enqueues would never notify it again."""
    runtime = alpha.runtime
    listener, registry = runtime.listener, runtime.waiters
    registry.fallback_seconds = 60  # only a notification can wake the consumer in time
    qid = await queue_id(alpha)
    real = registry.registrar
    assert isinstance(real, ListenerRegistrations)

    class ReconnectingMidway(ListenerRegistrations):
        """Reads the LISTEN connection's pid, then (once) has that connection replaced before
        it inserts the row, as a reconnect between the two would."""

        replaced = False

        async def register(self, queue_id: int) -> int | None:
            pid = self.pid
            if pid is not None and not self.replaced:
                self.replaced = True
                connections = listener.connections
                await terminate(runtime, pid)
                await asyncio.wait_for(listener.wait_connected(connections + 1), TIMEOUT)
                async with self._engine.connect() as conn:
                    await conn.execute(LISTENER_REGISTER, {"queue_id": queue_id, "pid": pid})
                return pid
            return await super().register(queue_id)

    registry.registrar = ReconnectingMidway(runtime.engine, listener)
    consumer = asyncio.create_task(consume(alpha, queue, wait_seconds=8))
    await asyncio.wait_for(registry.wait_for_waiting(qid, 1), TIMEOUT)
    await execute(runtime.engine, LISTENERS_PRUNE)  # the leader's pruning of dead connections
    committed = await enqueue(alpha, queue, "a")
    messages, answered = await asyncio.wait_for(consumer, 10)
    assert [m["id"] for m in messages] == ["a"]
    assert answered - committed < 3.0  # woken by its notification, not by its deadline (8 s)


async def terminate(runtime: Any, pid: int) -> None:
    """End a backend and wait until it is gone (PostgreSQL 14+: the timeout argument)."""
    async with await psycopg.AsyncConnection.connect(
        psycopg_dsn(runtime.engine.url), autocommit=True
    ) as conn:
        cursor = await conn.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))
        assert (await cursor.fetchone()) == (True,)


async def test_a_notification_wakes_one_waiter_and_a_full_batch_wakes_the_next(
    alpha: Caller, queue: str
) -> None:
    registry = alpha.runtime.waiters
    registry.fallback_seconds = 60  # only notifications and passed-on wake-ups wake them
    qid = await queue_id(alpha)
    consumers = [asyncio.create_task(consume(alpha, queue, wait_seconds=10)) for _ in range(3)]
    await asyncio.wait_for(registry.wait_for_waiting(qid, 3), TIMEOUT)
    # One message: one waiter is woken and leases it; the other two stay parked.
    await enqueue(alpha, queue, "one")
    done, _ = await asyncio.wait(consumers, timeout=TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
    assert len(done) == 1
    (first,) = done
    assert [m["id"] for m in (await first)[0]] == ["one"]
    rest = [c for c in consumers if c is not first]
    await asyncio.wait_for(registry.wait_for_waiting(qid, 2), TIMEOUT)
    # Two messages in one statement, one notification: the first waiter woken leases a full
    # batch (count 1) and passes the wake-up on, so both get one.
    body = {"messages": [{"id": "two-a"}, {"id": "two-b"}]}
    assert (await alpha.post(f"{queue}/messages", json=body)).status_code == 201
    answers = await asyncio.wait_for(asyncio.gather(*rest), TIMEOUT)
    assert sorted(m["id"] for messages, _ in answers for m in messages) == ["two-a", "two-b"]


async def test_the_registry_wakes_the_longest_parked_waiter_once() -> None:
    registry = WaiterRegistry()
    with registry.subscribe(1) as early, registry.subscribe(1) as late:
        first = asyncio.create_task(early.wait(60))
        second = asyncio.create_task(late.wait(60))
        await asyncio.wait_for(registry.wait_for_waiting(1, 2), TIMEOUT)
        registry.notify(1)
        registry.notify(1)  # the woken one has yet to look: nothing more to wake
        assert (early.woken, late.woken) == (True, False)
        assert await asyncio.wait_for(first, TIMEOUT) is True
        assert not second.done()
        registry.pass_on(1)  # it leased a full batch: the next one looks too
        assert await asyncio.wait_for(second, TIMEOUT) is True
    registry.notify(1)  # no waiters: nothing happens
