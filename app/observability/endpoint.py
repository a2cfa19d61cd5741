"""``GET /metrics`` (Prometheus text format, no token); the HTTP timing middleware is in
:mod:`app.observability.http`.

A scrape renders the process metrics (this process's, or with several workers every worker's,
added up from the shared directory) and the database-wide gauges of
:mod:`app.observability.database`, exactly once each.
"""

from __future__ import annotations

from collections.abc import Iterable
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
from app.observability.database import DatabaseCollector, Reading
from app.observability.server import ServerMetrics

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


def render(reading: Reading, now: float) -> bytes:
    """The exposition text of one scrape: process metrics, then the database ``reading``."""
    registry = CollectorRegistry(auto_describe=False)
    path = multiprocess.directory()
    if path is not None:
        multiprocess.forget_dead_workers(path)
        MultiProcessCollector(registry, path)  # type: ignore[no-untyped-call]
    else:
        registry.register(_ProcessRegistry())
    registry.register(DatabaseCollector(reading, now))
    return generate_latest(registry)


# Not in the OpenAPI document: API.md lists it, and unlike the documented operations it answers
# 200 while the database is down (sundial_database_up 0), which tests/api/test_outage.py would
# have to be told about.
@get("/metrics", media_type=MEDIA_TYPE, include_in_schema=False)
async def metrics_endpoint(request: ASGIConnection[Any, Any, Any, Any]) -> Response[bytes]:
    """Prometheus metrics, in the text exposition format (docs/monitoring.md lists them)."""
    metrics = server_metrics(request)
    reading = await metrics.database.reading()
    return Response(render(reading, metrics.database.recent.clock()), media_type=MEDIA_TYPE)


HANDLERS = [metrics_endpoint]

__all__ = ["HANDLERS", "render"]
