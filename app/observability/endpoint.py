"""``GET /metrics`` (Prometheus text format); the HTTP timing middleware is in
:mod:`app.observability.http`.

A scrape renders the process metrics (this process's, or with several workers every worker's,
added up from the shared directory) and the database-wide gauges of every pool
(:mod:`app.observability.database`), exactly once each, with per-queue series of the queues that
exist in the pools that answer when the scrape is answered (:mod:`app.observability.existing`).

Open by default; with ``SUNDIAL_METRICS_TOKEN`` set, a scrape must present
``Authorization: Bearer <that token>`` (else 401 ``unauthorized``).
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from litestar import Response, get
from litestar.connection import ASGIConnection
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Metric,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from app.observability import multiprocess
from app.observability.database import DatabaseCollector, PoolReading
from app.observability.existing import ExistingQueuesOnly
from app.observability.server import ServerMetrics
from app.web import throttle
from app.web.credentials import bearer_token
from app.web.errors import UnauthorizedError

# The classic text format (prometheus_client's CONTENT_TYPE_PLAIN_0_0_4), which every scraper
# reads; Litestar appends the "; charset=utf-8" itself.
MEDIA_TYPE = "text/plain; version=0.0.4"


class _ProcessRegistry(Collector):
    """This process's default registry, as one collector of a scrape's registry."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def server_metrics(connection: ASGIConnection[Any, Any, Any, Any]) -> ServerMetrics:
    """The metrics objects of the app serving ``connection``."""
    value: ServerMetrics = connection.app.state.metrics
    return value


def render(readings: Mapping[str, PoolReading], existing: Collection[int] | None = None) -> bytes:
    """The exposition text of one scrape: process metrics, then each pool's database reading
    (``readings`` by pool name), with per-queue series of the queues whose ids are in
    ``existing`` only (None: no such series)."""
    registry = CollectorRegistry(auto_describe=False)
    source: Collector
    path = multiprocess.directory()
    if path is not None:
        multiprocess.forget_dead_workers(path)
        source = MultiProcessCollector(None, path)  # type: ignore[no-untyped-call]
    else:
        source = _ProcessRegistry()
    registry.register(ExistingQueuesOnly(source, existing))
    registry.register(DatabaseCollector(readings, existing))
    return generate_latest(registry)


async def check_token(request: ASGIConnection[Any, Any, Any, Any], expected: str) -> None:
    """Let the scrape through only with ``Authorization: Bearer <expected>``. A wrong token
    counts as a failed authentication of the client's address, like a wrong API token
    (:mod:`app.web.throttle`).

    Raises:
        RateLimitedError: the address failed authentication too often (429).
        UnauthorizedError: no such header, or another token (compared in constant time).
    """
    await throttle.check(request)
    if not hmac.compare_digest(bearer_token(request).encode(), expected.encode()):
        await throttle.count_failure(request)
        raise UnauthorizedError("/metrics needs the metrics token (SUNDIAL_METRICS_TOKEN)")


# Not in the OpenAPI document: docs/api.md lists it with the other operations endpoints, and
# unlike the documented operations it answers 200 while the database is down
# (sundial_database_up 0), which tests/api/test_outage.py would have to be told about.
@get("/metrics", media_type=MEDIA_TYPE, include_in_schema=False)
async def metrics_endpoint(request: ASGIConnection[Any, Any, Any, Any]) -> Response[bytes]:
    """Prometheus metrics, in the text exposition format (docs/monitoring.md lists them)."""
    metrics = server_metrics(request)
    if metrics.token is not None:
        await check_token(request, metrics.token)
    # Both at once, so a pool that does not answer costs one timeout, not two. The queues that
    # exist are read after the request arrived, never cached.
    readings, existing = await asyncio.gather(metrics.readings(), metrics.existing_queues())
    return Response(render(readings, existing), media_type=MEDIA_TYPE)


HANDLERS = [metrics_endpoint]

__all__ = ["HANDLERS", "render"]
