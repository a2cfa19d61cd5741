"""The writers that watch a failover: a steady producer through the server (whose gaps between
2xx answers are the write outage) and a probe committing straight to the database (the
database's own share of it)."""

from __future__ import annotations

import asyncio
import bisect
import threading
import time
from collections import Counter
from itertools import pairwise
from typing import Any

import aiohttp
import psycopg

PROBE_PAUSE = 0.01
"""Seconds between two commits of the database-alone probe (:class:`SqlProbe`)."""
PRODUCERS = 4
"""Concurrent requesters of the steady producer during the fault injection."""
REQUEST_TIMEOUT = 1.0
"""Seconds a producer's request may take; one a failover left hanging is abandoned and retried."""
RETRY_PAUSE = 0.02
"""Seconds between a failed request and its retry. Deliberately not the server's Retry-After:
the gap then measures the server's recovery, not a client's back-off."""
STEADY_GAP = 0.5
"""The service is steady while 2xx answers come less than this many seconds apart..."""
STEADY_SPAN = 2.0
"""...for this many seconds: required before each fault and, after it, to call it over."""


class Producer(threading.Thread):
    """Enqueues one message per request, from ``PRODUCERS`` concurrent requesters, until
    stopped. Each message has an id of its own, resent as is until acknowledged, so a retry of
    a request whose answer was lost cannot store it twice. Records when every 2xx answer came
    (``time.monotonic``) and every failure."""

    def __init__(self, base: str, token: str, queue_path: str) -> None:
        super().__init__(name="producer", daemon=True)
        self.base = base
        self.token = token
        self.path = f"{queue_path}/messages"
        self.stopping = threading.Event()
        self.ok_times: list[float] = []
        self.acknowledged: list[str] = []
        self.failures: list[tuple[float, str]] = []
        self.steady_since = float("inf")

    def run(self) -> None:
        asyncio.run(self._produce())

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=REQUEST_TIMEOUT + 5)

    async def _produce(self) -> None:
        async with aiohttp.ClientSession(
            base_url=self.base,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
        ) as session:
            await asyncio.gather(*(self._requester(session, n) for n in range(PRODUCERS)))

    async def _requester(self, session: aiohttp.ClientSession, n: int) -> None:
        seq = 0
        while not self.stopping.is_set():
            message_id = f"out-{n}-{seq}"
            body = {"messages": [{"id": message_id, "payload": {"n": n, "seq": seq}}]}
            try:
                async with session.post(self.path, json=body) as answer:
                    await answer.read()
                outcome = str(answer.status)
            except (aiohttp.ClientError, TimeoutError) as error:
                outcome = type(error).__name__
            now = time.monotonic()
            if outcome.startswith("2"):
                if now - (self.ok_times[-1] if self.ok_times else -1e9) > STEADY_GAP:
                    self.steady_since = now
                self.ok_times.append(now)
                self.acknowledged.append(message_id)
                seq += 1
            else:
                self.failures.append((now, outcome))
                await asyncio.sleep(RETRY_PAUSE)

    def wait_steady(self, after: float, timeout: float) -> float:
        """Wait until 2xx answers have come less than ``STEADY_GAP`` apart for ``STEADY_SPAN``
        seconds since ``after`` (or before it); when that steady stretch began.

        Raises:
            TimeoutError: not within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            now = time.monotonic()
            since = max(self.steady_since, after)
            last = self.ok_times[-1] if self.ok_times else -1e9
            if now - since >= STEADY_SPAN and now - last < STEADY_GAP:
                return since
            if not self.is_alive():
                raise RuntimeError("the producer stopped")
            if now > deadline:
                raise TimeoutError(
                    f"writes not steady within {timeout:.0f} s; last failures {self.failures[-5:]}"
                )
            time.sleep(0.05)

    def failures_between(self, start: float, end: float) -> dict[str, int]:
        return dict(Counter(what for t, what in self.failures if start <= t <= end))


class SqlProbe(threading.Thread):
    """The database alone, for comparison: one connection through the formation's multi-host
    DSN (as the server's) commits a write (``SELECT txid_current()``, which assigns a
    transaction id, so its commit waits for the standby) every ``PROBE_PAUSE`` seconds,
    reconnecting after any error. Records when each commit returned."""

    def __init__(self, dsn: str) -> None:
        super().__init__(name="sql-probe", daemon=True)
        self.dsn = dsn
        self.stopping = threading.Event()
        self.ok_times: list[float] = []

    def run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        while not self.stopping.is_set():
            try:
                if conn is None:
                    conn = psycopg.connect(self.dsn, connect_timeout=2, autocommit=True)
                conn.execute("SELECT txid_current()")
                self.ok_times.append(time.monotonic())
                pause = PROBE_PAUSE
            except psycopg.Error:
                if conn is not None:
                    conn.close()
                conn = None
                pause = RETRY_PAUSE
            self.stopping.wait(pause)
        if conn is not None:
            conn.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=10)


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest interval between consecutive 2xx answers, from the last one before
    ``start`` to the first one after ``end``."""
    ordered = sorted(times)
    first = max(bisect.bisect_right(ordered, start) - 1, 0)
    last = bisect.bisect_left(ordered, end) + 1
    return max((b - a for a, b in pairwise(ordered[first:last])), default=float("nan"))
