"""The router's own CPU per call, in process: a namespace lookup through
:class:`app.store.routing.PooledStore` with one pool (``default``: the router is bypassed) and
with two (the namespace on the second: the cached map is read), over stores that answer at
once. No server, no database, no sockets: what routing adds to a request's Python, which a
shared machine's end-to-end figures cannot resolve below a few percent."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

from app.store.postgres import PostgresStore
from app.store.routing import PooledStore

NAMESPACE = "bench"


class _Engine:
    def execution_options(self, **options: Any) -> _Engine:
        return self


class _Store:
    """A pool's store that answers a queue lookup at once."""

    def __init__(self, pool: str) -> None:
        self.pool = pool
        self.engine = _Engine()

    async def get_queue(self, namespace: str, name: str) -> object:
        return self


class _Map:
    """The catalogue's map, every namespace cached on ``pool``."""

    def __init__(self, pool: str) -> None:
        self.pool = pool

    def cached(self, namespace: str) -> str:
        return self.pool

    async def read(self, namespace: str) -> str:
        return self.pool


def _store(pools: tuple[str, ...], placed: str) -> PooledStore:
    store = PooledStore({name: cast(PostgresStore, _Store(name)) for name in pools})
    store.map = _Map(placed)  # type: ignore[assignment]
    return store


async def _per_call_ns(store: PooledStore, calls: int) -> float:
    for _ in range(1_000):  # warm
        await store.get_queue(NAMESPACE, "q")
    t0 = time.process_time_ns()
    for _ in range(calls):
        await store.get_queue(NAMESPACE, "q")
    return (time.process_time_ns() - t0) / calls


def measure_router(calls: int = 100_000, repeats: int = 5) -> dict[str, Any]:
    """CPU ns per routed lookup, single pool and routed, alternating ``repeats`` times; the
    medians and the difference."""

    async def main() -> dict[str, list[float]]:
        single = _store(("default",), "default")
        routed = _store(("default", "routed"), "routed")
        out: dict[str, list[float]] = {"single": [], "routed": []}
        for _ in range(repeats):
            out["single"].append(await _per_call_ns(single, calls))
            out["routed"].append(await _per_call_ns(routed, calls))
        return out

    runs = asyncio.run(main())
    single = sorted(runs["single"])[repeats // 2]
    routed = sorted(runs["routed"])[repeats // 2]
    return {
        "calls": calls,
        "runs": runs,
        "single_ns": single,
        "routed_ns": routed,
        "added_ns": routed - single,
    }
