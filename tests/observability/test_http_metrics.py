"""The HTTP timing middleware (app.observability.http): the metrics, labels and counting rules
of Litestar's Prometheus middleware, which it replaced."""

from __future__ import annotations

import httpx
from litestar import Litestar, get
from litestar.params import FromPath
from prometheus_client import REGISTRY

from app.observability.http import http_metrics


@get("/boom/{x:str}")
async def boom(x: FromPath[str]) -> None:
    raise RuntimeError(x)


@get("/fine/{x:str}")
async def fine(x: FromPath[str]) -> str:
    return x


@get("/metrics")
async def scrape() -> str:
    return ""


def sample(name: str, method: str, path: str, status: int) -> float:
    labels = {"method": method, "path": path, "status_code": str(status), "app_name": "sundial"}
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_counts_by_route_template_errors_apart_and_skips_scrapes() -> None:
    app = Litestar([boom, fine, scrape], middleware=[http_metrics], logging_config=None)
    names = (
        "sundial_http_requests_total",
        "sundial_http_requests_error_total",
        "sundial_http_request_duration_seconds_count",
    )
    keys = [("GET", "/boom/{x}", 500), ("GET", "/fine/{x}", 200), ("GET", "/metrics", 200)]
    before = {(n, k): sample(n, *k) for n in names for k in keys}
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        assert (await client.get("/boom/a")).status_code == 500
        assert (await client.get("/fine/a")).status_code == 200
        assert (await client.get("/fine/b")).status_code == 200
        assert (await client.get("/metrics")).status_code == 200

    def moved(name: str, key: tuple[str, str, int]) -> float:
        return sample(name, *key) - before[(name, key)]

    assert moved("sundial_http_requests_total", keys[0]) == 1
    assert moved("sundial_http_requests_error_total", keys[0]) == 1
    assert moved("sundial_http_request_duration_seconds_count", keys[0]) == 1
    assert moved("sundial_http_requests_total", keys[1]) == 2
    assert moved("sundial_http_requests_error_total", keys[1]) == 0
    assert moved("sundial_http_request_duration_seconds_count", keys[1]) == 2
    assert all(moved(name, keys[2]) == 0 for name in names)
    # In progress: labelled with status 200 (not known yet), back to 0 once answered.
    assert sample("sundial_http_requests_in_progress", "GET", "/fine/{x}", 200) == 0
