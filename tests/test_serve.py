"""`sundial serve` as a user runs it: a real server process on the embedded default database.

Starts the server with no database configured, uses it over HTTP, stops it, starts it again
and finds the data still there; also runs two worker processes sharing the database.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import psycopg
import pytest

from app.embedded import LocalCluster
from tests.processes import (
    assert_exited_cleanly,
    clean_env,
    free_port,
    sundial_serve,
    wait_ready,
)


@contextmanager
def serve(data_dir: Path, port: int, workers: int = 1) -> Iterator[str]:
    """``sundial serve`` on the embedded default in ``data_dir``, as a user starts it."""
    env = clean_env(
        SUNDIAL_DATA_DIR=str(data_dir), SUNDIAL_PORT=str(port), SUNDIAL_WORKERS=str(workers)
    )
    log = data_dir.parent / f"serve-{port}.log"
    base = f"http://127.0.0.1:{port}"
    with sundial_serve(env, log) as process:
        wait_ready(base, process, log)
        yield base
    assert_exited_cleanly(process, log)
    # The server stops the embedded database it started.
    assert not LocalCluster(data_dir / "postgres").is_running()


@pytest.mark.slow
def test_embedded_default_serves_and_keeps_data_across_restarts(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    port = free_port()
    with serve(data_dir, port) as base:
        admin = (data_dir / "admin-token").read_text().strip()
        headers = {"Authorization": f"Bearer {admin}"}
        assert (
            httpx.post(f"{base}/v1/namespaces", json={"name": "demo"}, headers=headers).status_code
            == 201
        )
        queue = f"{base}/v1/namespaces/demo/queues/jobs"
        assert httpx.put(queue, json={}, headers=headers).status_code == 201
        answer = httpx.post(
            f"{queue}/messages",
            json={"messages": [{"id": "kept", "payload": {"n": 1}}]},
            headers=headers,
        )
        assert answer.status_code == 201, answer.text
        # The server reaches its embedded database through the unix socket (no client address),
        # its LISTEN connection (opened at start) included.
        cluster = LocalCluster(data_dir / "postgres")
        with psycopg.connect(cluster.libpq_dsn, autocommit=True) as conn:
            server = conn.execute(
                "SELECT client_addr IS NULL AS over_socket, query FROM pg_stat_activity"
                " WHERE datname = 'sundial' AND backend_type = 'client backend'"
                " AND pid <> pg_backend_pid()"
            ).fetchall()
        assert server, "the server holds no connection"
        assert all(over_socket for over_socket, _ in server), server
        assert any(query.startswith("LISTEN") for _, query in server), server

    # Same data dir, same admin token, same message.
    with serve(data_dir, port) as base:
        assert (data_dir / "admin-token").read_text().strip() == admin
        message = httpx.get(f"{queue}/messages/kept", headers=headers)
        assert message.status_code == 200, message.text
        assert message.json()["payload"] == {"n": 1}
        assert message.json()["state"] == "pending"


@pytest.mark.slow
def test_two_workers_share_one_database(tmp_path: Path) -> None:
    with serve(tmp_path / "data", free_port(), workers=2) as base:
        admin = (tmp_path / "data" / "admin-token").read_text().strip()
        headers = {"Authorization": f"Bearer {admin}"}
        httpx.post(f"{base}/v1/namespaces", json={"name": "w"}, headers=headers)
        queue = f"{base}/v1/namespaces/w/queues/q"
        httpx.put(queue, json={}, headers=headers)
        ids = [f"m{i}" for i in range(50)]
        httpx.post(
            f"{queue}/messages", json={"messages": [{"id": i} for i in ids]}, headers=headers
        )
        seen: list[str] = []
        while len(seen) < len(ids):
            # A new connection per request, so requests spread over both workers.
            got = httpx.post(f"{queue}/dequeue", json={"count": 7}, headers=headers, timeout=10)
            assert got.json()["messages"], "messages left but none dequeued"
            seen += [m["id"] for m in got.json()["messages"]]
        assert sorted(seen) == sorted(ids)
        port = int(base.rsplit(":", 1)[1])
        # Each worker accepts on a listening socket of its own (SO_REUSEPORT), so the kernel
        # spreads connections over them: sixteen kept-alive clients reach both workers.
        listening = _listening_sockets(port)
        deadline = time.monotonic() + 60
        while len(listening) < 2 and time.monotonic() < deadline:  # the other may still start
            time.sleep(0.1)
            listening = _listening_sockets(port)
        assert len(listening) == 2, listening
        assert len(set(listening.values())) == 2, "the workers share one listening socket"
        clients = [httpx.Client(base_url=base) for _ in range(16)]
        try:
            for client in clients:
                assert client.get("/healthz").status_code == 200
            served = _established_by(port, set(listening))
        finally:
            for client in clients:
                client.close()
        assert set(served) == set(listening), served


def _listening_sockets(port: int) -> dict[int, str]:
    """The processes listening on ``port`` (the server's workers), each with the inode of its
    listening socket."""
    found = {}
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
            found[conn.pid] = os.readlink(f"/proc/{conn.pid}/fd/{conn.fd}")
    return found


def _established_by(port: int, pids: set[int]) -> dict[int, int]:
    """How many established connections to ``port`` each of ``pids`` holds."""
    served: dict[int, int] = {}
    for conn in psutil.net_connections(kind="tcp"):
        mine = conn.status == psutil.CONN_ESTABLISHED and conn.laddr.port == port
        if mine and conn.pid in pids:
            served[conn.pid] = served.get(conn.pid, 0) + 1
    return served
