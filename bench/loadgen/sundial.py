"""The load generator's modes that go through Sundial's HTTP API: enqueue, dequeue + ack, the
long-poll wake-up, delayed messages and the soak."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from typing import Any

import aiohttp

from bench.loadgen.measure import Window, decode, encode, latencies, now, open_session
from bench.stats import percentile

# --- Sundial: enqueue ----------------------------------------------------------------------------


async def enqueue(spec: dict[str, Any]) -> dict[str, Any]:
    """``clients`` producers, each POSTing ``batch`` messages per request, back to back."""
    clients, batch, path = spec["clients"], spec["batch"], spec["queue_path"] + "/messages"
    window = Window(spec["warmup"], spec["duration"], spec.get("start_at"))
    counted = 0
    acked_total = 0
    errors = 0
    lat: list[float] = []

    async def client(session: aiohttp.ClientSession, n: int) -> None:
        nonlocal counted, acked_total, errors
        seq = 0
        while not window.over():
            body = encode({"messages": [{"payload": {"c": n, "i": seq + k}} for k in range(batch)]})
            seq += batch
            t0 = now()
            async with session.post(path, data=body) as answer:
                data = await answer.read()
                t1 = now()
            if answer.status != 201:
                errors += 1
                continue
            created = sum(1 for m in decode(data)["messages"] if m["created"])
            acked_total += created
            if window.inside(t0, t1):
                counted += created
                lat.append((t1 - t0) * 1000)

    async with open_session(spec, clients) as session:
        await asyncio.gather(*(client(session, n) for n in range(clients)))
    return {
        "messages": counted,
        "rate": counted / window.duration,
        "enqueued_total": acked_total,
        "errors": errors,
        "latency_ms": {"enqueue": latencies(lat)},
    }


# --- Sundial: dequeue + ack ----------------------------------------------------------------------


async def process(spec: dict[str, Any]) -> dict[str, Any]:
    """``clients`` consumers: dequeue ``batch``, then acknowledge them all (batch ack for
    batch > 1, per-message complete for batch 1), back to back. With ``drain`` they stop when
    a dequeue comes back empty instead of at the end of the window."""
    clients, batch, base = spec["clients"], spec["batch"], spec["queue_path"]
    drain = spec.get("drain", False)
    window = Window(spec.get("warmup", 0), spec.get("duration", 3600), spec.get("start_at"))
    bodies = []
    for flt in spec.get("filters") or [None]:
        request: dict[str, Any] = {"count": batch}
        if flt:
            request["metadata"] = flt
        if spec.get("wait_seconds"):
            request["wait_seconds"] = spec["wait_seconds"]
        bodies.append(encode(request))
    per_message = batch == 1 and not spec.get("batch_ack", False)
    counted = 0
    completed_total = 0
    errors = 0
    empty = 0
    seen: set[str] = set()
    duplicates = 0
    lat_dequeue: list[float] = []
    lat_ack: list[float] = []

    async def client(session: aiohttp.ClientSession, n: int) -> None:
        nonlocal counted, completed_total, errors, empty, duplicates
        dequeue_body = bodies[n % len(bodies)]
        while drain or not window.over():
            t0 = now()
            async with session.post(base + "/dequeue", data=dequeue_body) as answer:
                data = await answer.read()
            t1 = now()
            if answer.status != 200:
                errors += 1
                continue
            messages = decode(data)["messages"]
            if window.inside(t0, t1):
                lat_dequeue.append((t1 - t0) * 1000)
            if not messages:
                empty += 1
                if t0 >= window.start and ran_out[0] is None:
                    ran_out[0] = t0  # the backlog is gone: the window ends here
                if drain or not spec.get("wait_seconds"):
                    if drain:
                        return
                    await asyncio.sleep(0.01)
                continue
            for m in messages:
                if m["id"] in seen:
                    duplicates += 1
                seen.add(m["id"])
            if per_message:
                m = messages[0]
                async with session.post(
                    f"{base}/messages/{m['id']}/complete", data=encode({"lease_id": m["lease_id"]})
                ) as answer:
                    await answer.read()
                ok = 1 if answer.status == 200 else 0
            else:
                body = encode(
                    {"complete": [{"id": m["id"], "lease_id": m["lease_id"]} for m in messages]}
                )
                async with session.post(base + "/ack", data=body) as answer:
                    data = await answer.read()
                ok = (
                    sum(1 for r in decode(data)["results"] if r["ok"])
                    if answer.status == 200
                    else 0
                )
            t2 = now()
            errors += len(messages) - ok
            completed_total += ok
            if window.inside(t0, t2):
                counted += ok
                lat_ack.append((t2 - t1) * 1000)

    started = now()
    ran_out: list[float | None] = [None]
    async with open_session(spec, clients) as session:
        await asyncio.gather(*(client(session, n) for n in range(clients)))
    elapsed = now() - started
    measured = window.duration
    if ran_out[0] is not None:
        measured = max(0.001, min(window.end, ran_out[0]) - window.start)
    return {
        "messages": counted,
        "rate": completed_total / elapsed if drain else counted / measured,
        "measured_s": measured,
        "ran_out": ran_out[0] is not None,
        "completed_total": completed_total,
        "elapsed_s": elapsed,
        "errors": errors,
        "empty_dequeues": empty,
        "duplicates": duplicates,
        "latency_ms": {"dequeue": latencies(lat_dequeue), "ack": latencies(lat_ack)},
    }


# --- Sundial: long-poll wake-up ------------------------------------------------------------------


async def wake(spec: dict[str, Any]) -> dict[str, Any]:
    """``clients`` consumers long-poll an empty queue; one message at a time is committed with
    Sundial's own enqueue SQL shape (INSERT + pg_notify in one transaction), and the time from
    the COMMIT returning to the first consumer response carrying that message is recorded."""
    import psycopg

    samples, queue_id, base = spec["samples"], spec["queue_id"], spec["queue_path"]
    committed: dict[str, float] = {}
    received: dict[str, float] = {}
    done = asyncio.Event()
    arrived = asyncio.Event()
    body = encode({"count": 1, "wait_seconds": 5})

    async def consumer(session: aiohttp.ClientSession) -> None:
        while not done.is_set():
            async with session.post(base + "/dequeue", data=body) as answer:
                data = await answer.read()
            t = time.time()
            for m in decode(data).get("messages", []):
                received[m["id"]] = t
                arrived.set()
                async with session.post(
                    f"{base}/messages/{m['id']}/complete", data=encode({"lease_id": m["lease_id"]})
                ) as answer:
                    await answer.read()

    async with open_session(spec, spec["clients"]) as session:
        tasks = [asyncio.create_task(consumer(session)) for _ in range(spec["clients"])]
        await asyncio.sleep(1.0)  # every consumer is waiting
        conn = await psycopg.AsyncConnection.connect(spec["dsn"])
        for i in range(samples):
            mid = f"wake-{i}"
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO messages (queue_id, id, priority, state, visible_at, payload)"
                    " VALUES (%s, %s, 0, 'pending', now(), '{}')",
                    (queue_id, mid),
                )
                await conn.execute("SELECT pg_notify('sundial_ready', %s)", (str(queue_id),))
            committed[mid] = time.time()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(arrived.wait(), 2)
            arrived.clear()
            await asyncio.sleep(spec.get("interval", 0.02) * random.uniform(0.5, 1.5))
        await conn.close()
        done.set()
        await asyncio.sleep(0.2)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    lat = [(received[k] - committed[k]) * 1000 for k in committed if k in received]
    return {
        "messages": len(lat),
        "missing": samples - len(lat),
        "latency_ms": {"wake": latencies(lat)},
    }


# --- Sundial: delayed messages -------------------------------------------------------------------


async def delays(spec: dict[str, Any]) -> dict[str, Any]:
    """Consumers long-poll (count 100, wait 1 s) while prefilled invisible messages come due;
    lateness = response time - the message's visible_at (carried in its payload as ``due``)."""
    expected, base = spec["expected"], spec["queue_path"]
    body = encode({"count": 100, "wait_seconds": 1})
    lateness: list[float] = []
    completed = 0
    deadline = now() + spec["timeout"]

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal completed
        while len(lateness) < expected and now() < deadline:
            async with session.post(base + "/dequeue", data=body) as answer:
                data = await answer.read()
            t = time.time()
            messages = decode(data).get("messages", [])
            if not messages:
                continue
            lateness.extend((t - m["payload"]["due"]) * 1000 for m in messages)
            ack = encode(
                {"complete": [{"id": m["id"], "lease_id": m["lease_id"]} for m in messages]}
            )
            async with session.post(base + "/ack", data=ack) as answer:
                data = await answer.read()
            completed += sum(1 for r in decode(data)["results"] if r["ok"])

    async with open_session(spec, spec["clients"]) as session:
        await asyncio.gather(*(client(session) for _ in range(spec["clients"])))
    return {
        "messages": len(lateness),
        "completed_total": completed,
        "early": sum(1 for x in lateness if x < -5),
        "latency_ms": {"lateness": latencies(lateness)},
    }


# --- Sundial: soak (producers and consumers together) --------------------------------------------


async def soak(spec: dict[str, Any]) -> dict[str, Any]:
    """Producers at a fixed total rate (batch 10) and consumers (dequeue 10 + ack, long poll)
    running together for ``duration`` seconds; the orchestrator samples RSS and table size."""
    base, rate, clients = spec["queue_path"], spec["rate"], spec["clients"]
    end = now() + spec["duration"]
    enqueued = 0
    completed = 0
    per_producer = rate / 2 / 10  # requests per second per producer
    latency_ms: dict[str, list[float]] = {"enqueue": [], "dequeue": [], "ack": []}

    async def producer(session: aiohttp.ClientSession) -> None:
        nonlocal enqueued
        nxt = now()
        while now() < end:
            body = encode({"messages": [{"payload": {"k": k}} for k in range(10)]})
            started = now()
            async with session.post(base + "/messages", data=body) as answer:
                data = await answer.read()
            latency_ms["enqueue"].append((now() - started) * 1000)
            if answer.status == 201:
                enqueued += sum(1 for m in decode(data)["messages"] if m["created"])
            nxt += 1 / per_producer
            await asyncio.sleep(max(0.0, nxt - now()))

    async def consumer(session: aiohttp.ClientSession) -> None:
        nonlocal completed
        body = encode({"count": 10, "wait_seconds": 1})
        while now() < end + 3 and (now() < end or completed < enqueued):
            started = now()
            async with session.post(base + "/dequeue", data=body) as answer:
                data = await answer.read()
            messages = decode(data).get("messages", [])
            if not messages:
                continue  # a long poll that timed out: its duration is not a latency
            latency_ms["dequeue"].append((now() - started) * 1000)
            ack = encode(
                {"complete": [{"id": m["id"], "lease_id": m["lease_id"]} for m in messages]}
            )
            started = now()
            async with session.post(base + "/ack", data=ack) as answer:
                data = await answer.read()
            latency_ms["ack"].append((now() - started) * 1000)
            completed += sum(1 for r in decode(data)["results"] if r["ok"])

    async with open_session(spec, clients + 2) as session:
        await asyncio.gather(
            producer(session), producer(session), *(consumer(session) for _ in range(clients))
        )
    percentiles = {
        f"{kind}_{name}_ms": round(percentile(values, q), 2)
        for kind, values in latency_ms.items()
        if values
        for name, q in (("p50", 50), ("p99", 99))
    }
    return {
        "messages": completed,
        "enqueued_total": enqueued,
        "completed_total": completed,
        **percentiles,
    }
