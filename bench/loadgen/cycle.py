"""The load generator's ``cycle`` mode: ``clients`` consumers, each one request per message,
``POST …/ack`` completing the message it holds and leasing the next (``dequeue: {count: 1}``),
back to back over a prefilled backlog."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from bench.loadgen.measure import Window, decode, encode, latencies, now, open_session


async def cycle(spec: dict[str, Any]) -> dict[str, Any]:
    """Complete-and-lease-next, one message per request."""
    clients, base = spec["clients"], spec["queue_path"]
    window = Window(spec["warmup"], spec["duration"])
    counted = 0
    completed_total = 0
    errors = 0
    duplicates = 0
    seen: set[str] = set()
    lat: list[float] = []
    ran_out: list[float | None] = [None]

    async def consumer(session: aiohttp.ClientSession) -> None:
        nonlocal counted, completed_total, errors, duplicates
        held: list[dict[str, str]] = []
        while not window.over() or held:
            last = window.over()  # past the window: complete what is held, lease nothing
            body: dict[str, Any] = {"complete": held}
            if not last:
                body["dequeue"] = {"count": 1}
            t0 = now()
            async with session.post(base + "/ack", data=encode(body)) as answer:
                data = await answer.read()
            t1 = now()
            if answer.status != 200:
                errors += 1
                continue
            reply = decode(data)
            ok = sum(1 for r in reply["results"] if r["ok"])
            errors += len(held) - ok
            completed_total += ok
            if window.inside(t0, t1):
                counted += ok
                lat.append((t1 - t0) * 1000)
            held = [{"id": m["id"], "lease_id": m["lease_id"]} for m in reply.get("messages", [])]
            for m in held:
                if m["id"] in seen:
                    duplicates += 1
                seen.add(m["id"])
            if not held and not last:
                if t0 >= window.start and ran_out[0] is None:
                    ran_out[0] = t0  # the backlog is gone: the window ends here
                return

    async with open_session(spec, clients) as session:
        await asyncio.gather(*(consumer(session) for _ in range(clients)))
    measured = window.duration
    if ran_out[0] is not None:
        measured = max(0.001, min(window.end, ran_out[0]) - window.start)
    return {
        "messages": counted,
        "rate": counted / measured,
        "measured_s": measured,
        "ran_out": ran_out[0] is not None,
        "completed_total": completed_total,
        "errors": errors,
        "duplicates": duplicates,
        "latency_ms": {"dequeue": latencies(lat)},
    }
