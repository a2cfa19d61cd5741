"""Celery over the SQS door: a Celery app whose broker is Sundial through kombu's SQS transport
(``sqs://key:secret@host:port``, which reaches the door at the server's root), with a real
worker consuming through kombu's asynchronous SQS client. No Sundial code on the Celery side."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from celery import Celery
from celery.contrib.testing.worker import start_worker

from tests.sqs.conftest import REGION, AccessKey

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_a_celery_worker_runs_tasks_sent_through_the_sqs_door(
    sqs_server: str, access_key: AccessKey
) -> None:
    """Tasks sent with ``delay`` reach a worker through Sundial and their results come back,
    each task run once."""
    host = sqs_server.removeprefix("http://")
    secret = quote(access_key.secret_access_key, safe="")
    app = Celery(
        "orders",
        broker=f"sqs://{access_key.access_key_id}:{secret}@{host}",
        backend="cache+memory://",
    )
    app.conf.broker_transport_options = {
        "region": REGION,
        "is_secure": False,
        "wait_time_seconds": 1,
        "polling_interval": 0.1,
    }
    runs: list[int] = []

    @app.task
    def square(x: int) -> int:
        runs.append(x)
        return x * x

    with start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING"):
        results = [square.delay(n) for n in range(10)]
        assert [r.get(timeout=30) for r in results] == [n * n for n in range(10)]
    assert sorted(runs) == list(range(10))
