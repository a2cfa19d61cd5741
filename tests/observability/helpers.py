"""What the tests of ``GET /metrics`` share: a scrape parsed with prometheus_client's own
parser into samples, and the figures read from them.

Process metrics live in the test process's global registry and add up over the tests of a run,
so counters are compared before and after; the database gauges are this test's database only.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from app.observability.server import ServerMetrics
from tests.api.conftest import Caller

DOC = Path(__file__).resolve().parents[2] / "docs" / "monitoring.md"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(caller: Caller) -> Samples:
    """``GET /metrics`` as ``caller`` (200, Prometheus text format), parsed."""
    response = await caller.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(response.text)


def parse(body: str) -> Samples:
    """Every sample of a Prometheus text ``body``, by name and labels."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly these ``labels``; 0 when there is none."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def server_metrics(caller: Caller) -> ServerMetrics:
    """The metrics of the app ``caller`` talks to."""
    found: ServerMetrics = caller.app.state.metrics
    return found
