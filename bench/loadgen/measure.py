"""What every mode of the load generator measures with: the timed window, the latency summary,
the JSON codec and the HTTP session to the server."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import msgspec

from bench.stats import percentile

if TYPE_CHECKING:
    import aiohttp

encode = msgspec.json.encode
decode = msgspec.json.decode
now = time.perf_counter


def latencies(values: list[float]) -> dict[str, float | None]:
    """Count, p50, p99 and max of ``values`` (milliseconds)."""
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values) if values else None,
    }


class Window:
    """The measured interval, after the warm-up. The warm-up starts now or, with ``start_at``
    (a ``time.monotonic()`` reading of any process on this machine), then: load generators run
    side by side (bench/pools/) measure the same interval."""

    def __init__(self, warmup: float, duration: float, start_at: float | None = None) -> None:
        begin = now() if start_at is None else now() + max(0.0, start_at - time.monotonic())
        self.start = begin + warmup
        self.end = self.start + duration
        self.duration = duration

    def inside(self, t0: float, t1: float) -> bool:
        return t0 >= self.start and t1 <= self.end

    def over(self) -> bool:
        return now() >= self.end


def open_session(spec: dict[str, Any], clients: int) -> aiohttp.ClientSession:
    """An HTTP session to the server of ``spec`` with its token, ``clients`` (+2) connections."""
    # Imported here: aiohttp comes with the bench extra, and the window and the latency summary
    # above are also used where it is not installed (tests/unit, run by ./dev test).
    import aiohttp

    return aiohttp.ClientSession(
        base_url=spec["base"],
        headers={
            "Authorization": f"Bearer {spec['token']}",
            "Content-Type": "application/json",
        },
        connector=aiohttp.TCPConnector(limit=clients + 2, force_close=False),
        timeout=aiohttp.ClientTimeout(total=60),
    )
