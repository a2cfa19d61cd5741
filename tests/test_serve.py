"""`sundial serve` as a user runs it: a real server process on the embedded default database.

Starts the server with no database configured, uses it over HTTP, stops it, starts it again
and finds the data still there; also runs two worker processes sharing the database.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from app.embedded import LocalCluster

ROOT = Path(__file__).resolve().parents[1]
SUNDIAL = Path(sys.executable).parent / "sundial"
START_TIMEOUT = 90.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready(base: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll /readyz until the server answers (bounded); fail with the server's log if it died."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"server exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"server not ready in {START_TIMEOUT}s:\n{log.read_text()[-4000:]}")


@contextmanager
def serve(data_dir: Path, port: int, workers: int = 1) -> Iterator[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SUNDIAL_")}
    env.update(
        SUNDIAL_DATA_DIR=str(data_dir),
        SUNDIAL_PORT=str(port),
        SUNDIAL_WORKERS=str(workers),
    )
    log = data_dir.parent / f"serve-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(SUNDIAL), "serve"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, process, log)
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert process.returncode == 0, log.read_text()[-4000:]
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
