"""``/metrics`` of a real ``sundial serve --workers 2``: whichever worker answers a scrape reports
both workers' metrics added up, and a worker killed with SIGKILL leaves its counts in the totals
but not its share of the live gauges, once the supervisor has replaced it. The series of a deleted
queue or namespace are gone from the next scrape, whichever worker answers it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ADMIN_TOKEN
from tests.processes import (
    assert_exited_cleanly,
    clean_env,
    free_port,
    sundial_serve,
    wait_ready,
)

POOL_SIZE = 3
HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
DEADLINE_SECONDS = 60.0


def workers_of(server: int) -> set[int]:
    """The uvicorn worker processes (multiprocessing spawn children) of the server process."""
    children = Path(f"/proc/{server}/task/{server}/children").read_text().split()
    found = set()
    for pid in map(int, children):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if b"spawn_main" in cmdline:
            found.add(pid)
    return found


def metrics_dir(worker: int) -> Path:
    """The run's metrics directory, from the environment the worker inherited."""
    env = dict(
        item.split(b"=", 1) for item in Path(f"/proc/{worker}/environ").read_bytes().split(b"\0")
        if b"=" in item
    )  # fmt: skip
    return Path(env[b"PROMETHEUS_MULTIPROC_DIR"].decode())


def samples(base: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of one scrape (on a connection of its own, so either worker may answer)."""
    response = httpx.get(f"{base}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    ]


def scrape(base: str) -> dict[str, float]:
    """Sample name -> value, label sets summed (enough for the unlabelled and totals below)."""
    response = httpx.get(f"{base}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            key = sample.name
            if sample.labels.get("state"):
                key += ":" + sample.labels["state"]
            if sample.labels.get("path"):
                key += ":" + sample.labels["method"] + sample.labels["path"]
            totals[key] = totals.get(key, 0.0) + sample.value
    return totals


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    env = clean_env(
        SUNDIAL_DATABASE_URL=database_url,
        SUNDIAL_ADMIN_TOKEN=ADMIN_TOKEN,
        SUNDIAL_PORT=str(port),
        SUNDIAL_WORKERS="2",
        SUNDIAL_POOL_SIZE=str(POOL_SIZE),
        SUNDIAL_LOG_LEVEL="warning",
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    log = tmp_path / "serve.log"
    base = f"http://127.0.0.1:{port}"
    with sundial_serve(env, log) as process:
        wait_ready(base, process, log)
        yield base, process
    assert_exited_cleanly(process, log)


def wait_for(condition, what: str) -> None:
    """Poll a condition on the external server (bounded)."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.mark.slow
def test_two_workers_metrics_add_up_and_a_dead_worker_is_forgotten(return_directory, server):
    base, process = server
    workers = workers_of(process.pid)
    assert len(workers) == 2, workers
    # Both workers report their pool (sampled at startup): the scrape adds the two up.
    wait_for(lambda: scrape(base).get("sundial_db_pool_size") == 2 * POOL_SIZE, "both pools")
    # One series per Sundial pool (here the one database, "default"), added up over workers.
    sizes = [(labels, v) for name, labels, v in samples(base) if name == "sundial_db_pool_size"]
    assert sizes == [({"pool": "default"}, 2 * POOL_SIZE)]

    assert httpx.post(f"{base}/v1/namespaces", json={"name": "m"}, headers=HEADERS).is_success
    queue = f"{base}/v1/namespaces/m/queues/q"
    assert httpx.put(queue, json={}, headers=HEADERS).is_success
    enqueues = 20
    for n in range(enqueues):
        # A new connection per request, so requests land on both workers.
        body = {"messages": [{"id": f"m{n}"}]}
        assert httpx.post(f"{queue}/messages", json=body, headers=HEADERS).status_code == 201

    route = "POST/v1/namespaces/{ns}/queues/{queue}/messages"
    # Database gauges come from a reading each worker caches for a few seconds.
    wait_for(
        lambda: scrape(base).get("sundial_queue_messages:pending") == enqueues,
        "a fresh database reading",
    )
    # The depth is the pool's: labelled with it (each worker has its reading, so wait for one).
    pending = {"pool": "default", "namespace": "m", "queue": "q", "state": "pending"}
    wait_for(
        lambda: ("sundial_queue_messages", pending, enqueues) in samples(base),
        "the depth labelled with its pool",
    )
    for _ in range(6):  # several scrapes, answered by either worker: always the full totals
        totals = scrape(base)
        assert totals["sundial_messages_enqueued_total"] == enqueues
        assert totals[f"sundial_http_requests_total:{route}"] == enqueues
        assert totals[f"sundial_http_request_duration_seconds_count:{route}"] == enqueues
        assert totals["sundial_db_pool_size"] == 2 * POOL_SIZE

    directory = metrics_dir(min(workers))
    assert {p.name for p in directory.glob("gauge_livesum_*.db")} == {
        f"gauge_livesum_{pid}.db" for pid in workers
    }
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    wait_for(
        lambda: victim not in workers_of(process.pid) and len(workers_of(process.pid)) == 2,
        "the supervisor to replace the killed worker",
    )
    (replacement,) = workers_of(process.pid) - workers
    wait_for(
        lambda: (directory / f"gauge_livesum_{replacement}.db").exists(),
        "the replacement worker to report its gauges",
    )
    wait_for(lambda: scrape(base).get("sundial_db_pool_size") == 2 * POOL_SIZE, "two pools")
    # The killed worker's live gauges are gone (else the pools would add up to three), its
    # counts are not.
    assert not (directory / f"gauge_livesum_{victim}.db").exists()
    for _ in range(4):
        totals = scrape(base)
        assert totals["sundial_db_pool_size"] == 2 * POOL_SIZE
        assert totals["sundial_messages_enqueued_total"] == enqueues
        assert totals[f"sundial_http_requests_total:{route}"] == enqueues
    return_directory.append(directory)


def of_queue(found: list[tuple[str, dict[str, str], float]], **labels: str) -> dict[str, float]:
    """The samples carrying all of ``labels``: name (and state) -> value."""
    return {
        name + (":" + found_labels["state"] if "state" in found_labels else ""): value
        for name, found_labels, value in found
        if labels.items() <= found_labels.items()
    }


SCRAPES = 12
"""Scrapes on fresh connections after each deletion: both workers answer some of them."""


@pytest.mark.slow
def test_deleted_queues_and_namespaces_leave_the_next_scrape_of_every_worker(server):
    base, process = server
    assert len(workers_of(process.pid)) == 2
    assert httpx.post(f"{base}/v1/namespaces", json={"name": "m"}, headers=HEADERS).is_success
    enqueues = 10
    for queue in ("q", "r"):
        url = f"{base}/v1/namespaces/m/queues/{queue}"
        assert httpx.put(url, json={}, headers=HEADERS).status_code == 201
        for n in range(enqueues):  # a connection per request: both workers count some
            body = {"messages": [{"id": f"m{n}"}]}
            assert httpx.post(f"{url}/messages", json=body, headers=HEADERS).status_code == 201
    wait_for(  # both queues in the database reading of the worker that answers, twice in a row
        lambda: all(
            of_queue(samples(base), namespace="m", queue=queue).get(
                "sundial_queue_messages:pending"
            )
            == enqueues
            for queue in ("q", "r", "q", "r")
        ),
        "a database reading with both queues",
    )

    queue_q = f"{base}/v1/namespaces/m/queues/q"
    assert httpx.delete(queue_q, headers=HEADERS).status_code == 204
    for _ in range(SCRAPES):
        found = samples(base)
        assert of_queue(found, queue="q") == {}
        assert of_queue(found, namespace="m", queue="r")["sundial_messages_enqueued_total"] == 10
        assert not [labels for _, labels, _ in found if "queue_id" in labels]

    # Made again under the same name, it is a new queue: its counts start from zero, and the
    # depth of the deleted one never shows under its name.
    assert httpx.put(queue_q, json={}, headers=HEADERS).status_code == 201
    body = {"messages": [{"id": "new"}]}
    assert httpx.post(f"{queue_q}/messages", json=body, headers=HEADERS).status_code == 201
    for _ in range(SCRAPES):
        again = of_queue(samples(base), namespace="m", queue="q")
        assert again["sundial_messages_enqueued_total"] == 1
        assert again.get("sundial_queue_messages:pending", 1) == 1

    assert httpx.delete(f"{base}/v1/namespaces/m", headers=HEADERS).status_code == 204
    for _ in range(SCRAPES):
        assert of_queue(samples(base), namespace="m") == {}


@pytest.fixture
def return_directory() -> Iterator[list[Path]]:
    """Where the test puts the run's metrics directory, checked after the server stopped."""
    found: list[Path] = []
    yield found
    for directory in found:
        assert not directory.exists(), "sundial serve leaves no metrics directory behind"
