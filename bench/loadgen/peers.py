"""The load generator's modes for the baselines: the raw LISTEN/NOTIFY wake-up of PostgreSQL and
PgQueuer's enqueue, consumer loop and wake-up. asyncpg and pgqueuer are imported by the mode that
uses them, so the Sundial modes run without them (``--no-peer``)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from datetime import timedelta
from typing import Any

from bench.loadgen.measure import Window, encode, latencies, now

# --- raw PostgreSQL ------------------------------------------------------------------------------


async def notify_wake(spec: dict[str, Any]) -> dict[str, Any]:
    """Raw PostgreSQL: LISTEN on one connection, NOTIFY + COMMIT on another, commit → callback."""
    import asyncpg

    listener = await asyncpg.connect(spec["dsn_uri"])
    sender = await asyncpg.connect(spec["dsn_uri"])
    got: dict[str, float] = {}
    event = asyncio.Event()

    def on_notify(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
        got[payload] = time.time()
        event.set()

    await listener.add_listener("bench_raw_wake", on_notify)
    lat = []
    for i in range(spec["samples"]):
        event.clear()
        await sender.execute(f"NOTIFY bench_raw_wake, 'n{i}'")
        t = time.time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), 2)
        if f"n{i}" in got:
            lat.append((got[f"n{i}"] - t) * 1000)
        await asyncio.sleep(spec.get("interval", 0.02) * random.uniform(0.5, 1.5))
    await listener.close()
    await sender.close()
    return {"messages": len(lat), "latency_ms": {"wake": latencies(lat)}}


# --- PgQueuer ------------------------------------------------------------------------------------


async def pgq_enqueue(spec: dict[str, Any]) -> dict[str, Any]:
    """PgQueuer's batch enqueue API (``Queries.enqueue`` with lists), one asyncpg connection per
    client, back to back."""
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries

    clients, batch = spec["clients"], spec["batch"]
    window = Window(spec["warmup"], spec["duration"])
    counted = 0
    total = 0
    lat: list[float] = []

    async def client(n: int) -> None:
        nonlocal counted, total
        conn = await asyncpg.connect(spec["dsn_uri"])
        queries = Queries(AsyncpgDriver(conn))
        seq = 0
        while not window.over():
            payloads = [encode({"c": n, "i": seq + k}) for k in range(batch)]
            seq += batch
            t0 = now()
            if batch == 1:
                ids = await queries.enqueue("bench", payloads[0], 0)
            else:
                ids = await queries.enqueue(["bench"] * batch, payloads, [0] * batch)
            t1 = now()
            total += len(ids)
            if window.inside(t0, t1):
                counted += len(ids)
                lat.append((t1 - t0) * 1000)
        await conn.close()

    await asyncio.gather(*(client(n) for n in range(clients)))
    return {
        "messages": counted,
        "rate": counted / window.duration,
        "enqueued_total": total,
        "latency_ms": {"enqueue": latencies(lat)},
    }


async def _pgq_remaining(conn: Any) -> int:
    """Jobs still in the pgqueuer table (a job row is deleted when its completion is logged)."""
    return int(await conn.fetchval("SELECT count(*) FROM pgqueuer"))


async def pgq_process(spec: dict[str, Any]) -> dict[str, Any]:
    """PgQueuer's own consumer loop (``QueueManager.run``), ``clients`` managers in this
    process, each on its own asyncpg connection, with a no-op entrypoint. Throughput is the
    drop of the pgqueuer table (a job row is deleted when its completion is logged) over the
    window, read on a separate connection."""
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries, QueueManager

    clients, batch = spec["clients"], spec["batch"]
    managers = []
    for _ in range(clients):
        conn = await asyncpg.connect(spec["dsn_uri"])
        qm = QueueManager(Queries(AsyncpgDriver(conn)))

        @qm.entrypoint("bench")
        async def handler(job: Any) -> None:
            return None

        managers.append((qm, conn))
    monitor = await asyncpg.connect(spec["dsn_uri"])
    runs = [
        asyncio.create_task(qm.run(batch_size=batch, dequeue_timeout=timedelta(seconds=1)))
        for qm, _ in managers
    ]
    await asyncio.sleep(spec["warmup"])
    before = await _pgq_remaining(monitor)
    t0 = now()
    after, t1 = before, t0
    while now() < t0 + spec["duration"]:  # sample until the window ends or the backlog is gone
        await asyncio.sleep(0.1)
        after, t1 = await _pgq_remaining(monitor), now()
        if after == 0:
            break
    for qm, _ in managers:
        qm.shutdown.set()
    await asyncio.gather(*runs, return_exceptions=True)
    for _, conn in managers:
        await conn.close()
    remaining = await _pgq_remaining(monitor)
    await monitor.close()
    done = before - after
    return {
        "messages": done,
        "rate": done / max(0.001, t1 - t0),
        "measured_s": t1 - t0,
        "remaining": remaining,
        "ran_out": after == 0,
    }


async def pgq_wake(spec: dict[str, Any]) -> dict[str, Any]:
    """PgQueuer: enqueue returns (committed) → the job's entrypoint starts, one consumer."""
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries, QueueManager

    conn = await asyncpg.connect(spec["dsn_uri"])
    qm = QueueManager(Queries(AsyncpgDriver(conn)))
    started: dict[int, float] = {}
    arrived = asyncio.Event()

    @qm.entrypoint("bench_wake")
    async def handler(job: Any) -> None:
        started[int(job.id)] = time.time()
        arrived.set()

    run = asyncio.create_task(qm.run(batch_size=1, dequeue_timeout=timedelta(seconds=30)))
    await asyncio.sleep(1.0)
    producer = Queries(AsyncpgDriver(await asyncpg.connect(spec["dsn_uri"])))
    committed: dict[int, float] = {}
    for _ in range(spec["samples"]):
        (jid,) = await producer.enqueue("bench_wake", b"{}", 0)
        committed[int(jid)] = time.time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(arrived.wait(), 2)
        arrived.clear()
        await asyncio.sleep(spec.get("interval", 0.02) * random.uniform(0.5, 1.5))
    qm.shutdown.set()
    await asyncio.gather(run, return_exceptions=True)
    lat = [(started[k] - committed[k]) * 1000 for k in committed if k in started]
    return {"messages": len(lat), "latency_ms": {"wake": latencies(lat)}}
