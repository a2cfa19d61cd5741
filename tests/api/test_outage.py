"""The database goes away and comes back: the server answers 503 ``unavailable`` (never 500)
while it is gone and recovers by itself when it returns.

The application runs as in production: ``create_app`` builds its own engine (pool with
``pool_pre_ping``), notification listener and background scheduler from the settings, on a
private PostgreSQL cluster (:class:`LocalCluster`) that the tests stop, start and whose
connections they kill. While the database is down every operation must answer the documented
503 (checked against the served OpenAPI document); after it returns, the pool, the scheduler and
the LISTEN connection must come back without help.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from litestar import Litestar
from sqlalchemy import text

from app.bootstrap.server import create_app
from app.embedded import LocalCluster
from app.store import migrate
from tests.api.conftest import Caller, assert_error, make_settings, serve
from tests.conftest import ADMIN_TOKEN

RECOVERY_SECONDS = 30.0
TIMEOUT = 15.0
NOTIFICATION_SECONDS = 5.0  # a woken long poll answers well within this; its fallback is 60 s


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A private PostgreSQL cluster with the schema at head, for this module's tests."""
    cluster = LocalCluster(Path(tmp_path_factory.mktemp("outage")) / "postgres")
    cluster.start()
    try:
        migrate.upgrade(cluster.sqlalchemy_url)
        yield cluster
    finally:
        cluster.stop(mode="immediate")


@pytest.fixture
def app(cluster: LocalCluster) -> Litestar:
    """The app with everything of its own (no engine= given), scheduler included."""
    return create_app(make_settings(cluster.sqlalchemy_url, scheduler_enabled=True, pool_size=5))


@pytest.fixture
async def admin(app: Litestar) -> AsyncIterator[Caller]:
    """The admin's caller, with the app's lifespan running."""
    async with serve(app) as client:
        yield Caller(client, app, ADMIN_TOKEN)


async def make_namespace(admin: Caller, name: str) -> tuple[Caller, str]:
    """Namespace ``name`` with a queue ``q``; a caller with a token of it, and the queue's path."""
    assert (await admin.post("/v1/namespaces", json={"name": name})).status_code == 201
    issued = await admin.post(f"/v1/namespaces/{name}/tokens", json={})
    assert issued.status_code == 201, issued.text
    caller = Caller(admin.client, admin.app, issued.json()["token"], namespace=name)
    base = f"/v1/namespaces/{name}/queues/q"
    assert (await caller.put(base, json={})).status_code == 201
    return caller, base


async def enqueue(caller: Caller, base: str, message_id: str) -> httpx.Response:
    return await caller.post(f"{base}/messages", json={"messages": [{"id": message_id}]})


async def dequeue(caller: Caller, base: str, **body: Any) -> httpx.Response:
    return await caller.post(f"{base}/dequeue", json=body, timeout=30)


def assert_unavailable(response: httpx.Response) -> None:
    assert_error(response, 503, "unavailable")
    assert int(response.headers["Retry-After"]) >= 1


async def wait_ready(caller: Caller) -> None:
    """Poll /readyz until it answers 200 (bounded); every answer is 200 or 503."""
    deadline = time.monotonic() + RECOVERY_SECONDS
    while True:
        response = await caller.get("/readyz")
        if response.status_code == 200:
            return
        assert_unavailable(response)
        assert time.monotonic() < deadline, "the server did not recover"
        await asyncio.sleep(0.2)


async def assert_long_poll_woken_by_notification(
    caller: Caller, base: str, message_id: str
) -> None:
    """A consumer that parks now is woken by an enqueue: only a notification on the
    listener's connection can do that in time (the fallback timer is 60 s, the wait 20 s)."""
    runtime = caller.runtime
    runtime.waiters.fallback_seconds = 60
    queue = await runtime.service.get_queue_or_404(caller.namespace, "q")
    consumer = asyncio.create_task(dequeue(caller, base, wait_seconds=20))
    await asyncio.wait_for(runtime.waiters.wait_for_waiting(queue.id, 1), TIMEOUT)
    assert (await enqueue(caller, base, message_id)).status_code == 201
    answer = await asyncio.wait_for(consumer, NOTIFICATION_SECONDS)
    assert answer.status_code == 200, answer.text
    assert [m["id"] for m in answer.json()["messages"]] == [message_id]


async def test_database_down_is_503_and_the_server_recovers_by_itself(
    admin: Caller, cluster: LocalCluster
) -> None:
    alpha, base = await make_namespace(admin, "outage")
    assert (await enqueue(alpha, base, "before")).status_code == 201
    assert (await admin.get("/readyz")).status_code == 200
    listener = alpha.runtime.listener
    connections, port = listener.connections, cluster.port

    await asyncio.to_thread(cluster.stop, mode="immediate")

    assert_unavailable(await admin.get("/readyz"))
    assert (await admin.get("/healthz")).status_code == 200  # the process itself is fine
    assert_unavailable(await enqueue(alpha, base, "during"))  # namespace token: looked up
    assert_unavailable(await enqueue(admin, base, "during"))  # admin token: not looked up
    assert_unavailable(await dequeue(alpha, base))
    assert_unavailable(await dequeue(alpha, base, wait_seconds=2))
    assert_unavailable(await alpha.get(base))
    assert_unavailable(await admin.get("/v1/namespaces"))

    await asyncio.to_thread(cluster.start)
    assert cluster.port == port
    await wait_ready(admin)

    assert (await enqueue(alpha, base, "after")).status_code == 201
    got = await dequeue(alpha, base, count=10)
    assert got.status_code == 200, got.text
    leased = {m["id"]: m["lease_id"] for m in got.json()["messages"]}
    assert set(leased) == {"before", "after"}  # "before" survived the crash; "during" never was
    for message_id, lease_id in leased.items():
        done = await alpha.post(
            f"{base}/messages/{message_id}/complete", json={"lease_id": lease_id}
        )
        assert done.status_code == 200, done.text

    await asyncio.wait_for(listener.wait_connected(connections + 1), RECOVERY_SECONDS)
    await assert_long_poll_woken_by_notification(alpha, base, "woken")


async def test_killed_connections_are_replaced(admin: Caller, cluster: LocalCluster) -> None:
    alpha, base = await make_namespace(admin, "terminated")
    # Fill the pool with a few connections, then let them sit idle.
    answers = await asyncio.gather(*(alpha.get(base) for _ in range(4)))
    assert all(a.status_code == 200 for a in answers)
    listener = alpha.runtime.listener
    connections, listener_pid = listener.connections, listener.backend_pid
    assert listener_pid is not None

    with psycopg.connect(cluster.libpq_dsn, autocommit=True) as conn:
        killed = conn.execute(
            "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        ).fetchall()
    assert listener_pid in {pid for pid, _ in killed}
    assert len(killed) >= 3, killed  # the listener, the scheduler's and the pool's
    assert all(ok for _, ok in killed)

    answers = [
        await alpha.get(base),
        await enqueue(alpha, base, "a"),
        await alpha.get(f"{base}/messages/a"),
        await dequeue(alpha, base),
        await admin.get("/readyz"),
        await admin.get("/v1/namespaces"),
    ]
    statuses = [a.status_code for a in answers]
    assert statuses.count(503) <= 1, statuses
    for answer in answers:
        if answer.status_code == 503:
            assert_unavailable(answer)
    assert answers[-1].status_code == 200
    if statuses[1] == 503:  # the one 503 was the enqueue: it may be retried
        assert (await enqueue(alpha, base, "a")).status_code == 201
        assert (await dequeue(alpha, base)).json()["messages"]

    await asyncio.wait_for(listener.wait_connected(connections + 1), TIMEOUT)
    assert listener.backend_pid not in (None, listener_pid)
    await assert_long_poll_woken_by_notification(alpha, base, "woken")


async def test_killed_connections_cost_the_hot_path_one_request(
    admin: Caller, cluster: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    # Enqueue, dequeue and complete run on the pooled driver connections directly: the first
    # to find its connection dead must have every older pooled connection replaced, as
    # SQLAlchemy does on its own path, or each dead connection would fail one request.
    alpha, base = await make_namespace(admin, "hot-path")
    assert (await enqueue(alpha, base, "before")).status_code == 201
    # Four connections idle in the pool, all to be killed.
    engine = alpha.runtime.engine
    held = [await engine.connect() for _ in range(4)]
    for conn in held:
        await conn.execute(text("SELECT 1"))
    for conn in held:
        await conn.close()
    with psycopg.connect(cluster.libpq_dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        )
    statuses = [(await enqueue(alpha, base, f"after-{i}")).status_code for i in range(4)]
    assert statuses.count(503) <= 1, statuses
    assert statuses[-1] == 201
    # The broken connection was closed cleanly, not left to the pool's error log.
    assert "Exception terminating connection" not in caplog.text
    leased = (await dequeue(alpha, base, count=1)).json()["messages"]
    done = await alpha.post(
        f"{base}/messages/{leased[0]['id']}/complete", json={"lease_id": leased[0]["lease_id"]}
    )
    assert done.status_code == 200, done.text


UUID = "00000000-0000-4000-8000-000000000000"  # a well-formed token or lease id
# A valid body for each operation that takes one, so that the request gets past validation.
BODIES: dict[str, Any] = {
    "POST /v1/namespaces": {"name": "other"},
    "POST /v1/namespaces/{ns}/tokens": {},
    "PUT /v1/namespaces/{ns}/queues/{queue}": {},
    "PATCH /v1/namespaces/{ns}/queues/{queue}": {"lease_seconds": 60},
    "POST /v1/namespaces/{ns}/queues/{queue}/purge": {},
    "POST /v1/namespaces/{ns}/queues/{queue}/messages": {"messages": [{"id": "m"}]},
    "POST /v1/namespaces/{ns}/queues/{queue}/dequeue": {},
    "POST /v1/namespaces/{ns}/queues/{queue}/ack": {"complete": [{"id": "m", "lease_id": UUID}]},
    "POST /v1/namespaces/{ns}/queues/{queue}/requeue": {},
    "POST /v1/namespaces/{ns}/queues/{queue}/dead-letters/delete": {},
    "PATCH /v1/namespaces/{ns}/queues/{queue}/messages/{message_id}": {"priority": 1},
    "POST /v1/namespaces/{ns}/queues/{queue}/messages/{message_id}/complete": {"lease_id": UUID},
    "POST /v1/namespaces/{ns}/queues/{queue}/messages/{message_id}/fail": {"lease_id": UUID},
    "POST /v1/namespaces/{ns}/queues/{queue}/messages/{message_id}/extend": {
        "lease_id": UUID,
        "lease_seconds": 30,
    },
    "POST /v1/namespaces/{ns}/queues/{queue}/messages/{message_id}/cancel": {"force": True},
    "POST /v1/namespaces/{ns}/queues/{queue}/messages/{message_id}/requeue": {},
    "POST /v1/namespaces/{ns}/queues/{queue}/messages/{message_id}/lease": {},
    "POST /v1/namespaces/{ns}/dequeue": {"queues": ["q"]},
    "PATCH /v1/namespaces/{ns}/tokens/{token_id}": {"read_rate": 10},
    "PUT /v1/namespaces/{ns}/periodic/{name}": {"queue": "q", "schedule": "@hourly"},
    "PATCH /v1/namespaces/{ns}/periodic/{name}": {"paused": True},
    "PUT /v1/namespaces/{ns}/topics/{topic}": {"subscriptions": ["q"]},
    "PUT /v1/namespaces/{ns}/topics/{topic}/subscriptions/{queue}": {},
    "POST /v1/namespaces/{ns}/topics/{topic}/messages": {"messages": [{"id": "m"}]},
}
NEEDS_NO_DATABASE = {"GET /healthz"}


async def test_every_operation_answers_a_documented_503(
    admin: Caller, cluster: LocalCluster
) -> None:
    """With the database down, every operation of the document answers 503 ``unavailable`` with
    ``Retry-After`` (healthz excepted), and the document lists that 503."""
    alpha, _ = await make_namespace(admin, "documented")
    document = (await admin.get("/schema/openapi.json")).json()
    operations = [
        (method.upper(), path, spec["responses"])
        for path, methods in document["paths"].items()
        for method, spec in methods.items()
    ]
    assert set(BODIES) <= {f"{method} {path}" for method, path, _ in operations}

    await asyncio.to_thread(cluster.stop, mode="immediate")
    try:
        wrong, undocumented = [], []
        for method, path, responses in operations:
            name = f"{method} {path}"
            url = path.format(
                ns="documented", queue="q", message_id="m", token_id=UUID, name="j", topic="t"
            )
            caller = admin if path.startswith("/v1/namespaces") and "queues" not in path else alpha
            answer = await caller.request(method, url, json=BODIES.get(name))
            if name in NEEDS_NO_DATABASE:
                assert answer.status_code == 200, answer.text
                continue
            if answer.status_code != 503 or "Retry-After" not in answer.headers:
                wrong.append(f"{method} {url}: {answer.status_code} {answer.text}")
            else:
                assert_unavailable(answer)
            if str(answer.status_code) not in responses:
                undocumented.append(
                    f"{name}: {answer.status_code} (documented: {sorted(responses)})"
                )
    finally:
        await asyncio.to_thread(cluster.start)
        await wait_ready(admin)
    assert wrong == [], "\n".join(wrong)
    assert undocumented == [], "\n".join(["answers not in the OpenAPI document:", *undocumented])
