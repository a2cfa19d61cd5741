"""Two ``sundial serve`` processes on one replicated database, with clients that know both: the
server that leads the scheduler is killed with SIGKILL while traffic flows through both.

The producers and the consumer are Python clients given both URLs (each in its own order, so
both servers carry traffic). After the kill they go on through the survivor by themselves:
nothing acknowledged is lost, every message is completed, and the surviving server's scheduler
takes the lead (a lease left behind by the dead server is released by it).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import psycopg
import pytest

from app.client import Client, RetryPolicy
from app.client.errors import SundialError
from app.embedded.formation import Formation
from tests.conftest import ADMIN_TOKEN
from tests.ha.conftest import stored_ids
from tests.processes import clean_env, free_port, sundial_serve, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.ha, pytest.mark.serial]

MESSAGES_PER_PRODUCER = 300
PATIENT = RetryPolicy(attempts=100, max_seconds=60, initial_wait=0.05, max_wait=1)
QUEUE = "pair/jobs"


def leader_pid(formation: Formation) -> int | None:
    """The process id of the server whose scheduler leads now (its node id is host:pid:…)."""
    with psycopg.connect(formation.libpq_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT node_id FROM scheduler_nodes"
            " WHERE is_leader AND heartbeat_at > now() - interval '2 seconds'"
        ).fetchall()
    return int(rows[0][0].split(":")[1]) if len(rows) == 1 else None


def wait_for_leader(formation: Formation, among: set[int], timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while (pid := leader_pid(formation)) not in among:
        assert time.monotonic() < deadline, f"no scheduler of {among} leads (now: {pid})"
        time.sleep(0.1)
    assert pid is not None
    return pid


@pytest.fixture
def two_servers(formation: Formation, tmp_path: Path) -> Iterator[dict[int, tuple[str, object]]]:
    """Both servers: their pid -> (base URL, process)."""
    servers: dict[int, tuple[str, object]] = {}
    with ExitStack() as stack:
        for name in ("a", "b"):
            port = free_port()
            env = clean_env(
                SUNDIAL_DATABASE_URL=formation.sqlalchemy_url,
                SUNDIAL_ADMIN_TOKEN=ADMIN_TOKEN,
                SUNDIAL_DATA_DIR=str(tmp_path / name),
                SUNDIAL_PORT=str(port),
                SUNDIAL_WORKERS="1",
                SUNDIAL_LEADER_POLL_SECONDS="0.5",
                SUNDIAL_SCHEDULER_TICK_SECONDS="0.1",
            )
            base = f"http://127.0.0.1:{port}"
            log = tmp_path / f"serve-{name}.log"
            process = stack.enter_context(sundial_serve(env, log, args=["--no-migrate"]))
            wait_ready(base, process, log)
            servers[process.pid] = (base, process)
        yield servers


def test_killing_the_leading_server_loses_nothing_and_moves_the_lead(
    formation: Formation, two_servers: dict[int, tuple[str, object]]
) -> None:
    urls = [base for base, _ in two_servers.values()]
    with Client(urls, ADMIN_TOKEN, retry=PATIENT) as admin:
        admin.create_namespace("pair")
        admin.put_queue(QUEUE, lease_seconds=2)
    leader = wait_for_leader(formation, set(two_servers))
    survivor = next(pid for pid in two_servers if pid != leader)

    errors: list[Exception] = []
    produced: list[str] = []
    completed: set[str] = set()
    producing_done = threading.Event()

    def produce(order: list[str], prefix: str) -> None:
        try:
            with Client(order, ADMIN_TOKEN, retry=PATIENT) as client:
                for n in range(MESSAGES_PER_PRODUCER):
                    message_id = f"{prefix}-{n}"
                    client.enqueue(QUEUE, {"n": n}, id=message_id)
                    produced.append(message_id)
        except (SundialError, OSError) as error:
            errors.append(error)

    def consume() -> None:
        try:
            with Client(urls, ADMIN_TOKEN, retry=PATIENT) as client:
                while not (producing_done.is_set() and completed >= set(produced)):
                    try:
                        leased = client.dequeue(QUEUE, count=10, wait_seconds=1)
                    except (SundialError, httpx.TransportError):
                        # Dequeue is not retried by the client (a lease may have been granted
                        # when the connection broke: it expires and the message comes back).
                        # The server it was on may just have been killed: ask again.
                        continue
                    for message in leased:
                        client.complete(QUEUE, message.id, message.lease_id)
                        completed.add(message.id)
        except (SundialError, OSError) as error:
            errors.append(error)

    producers = [
        threading.Thread(target=produce, args=(urls, "ab")),
        threading.Thread(target=produce, args=(urls[::-1], "ba")),
    ]
    consumer = threading.Thread(target=consume)
    for thread in (*producers, consumer):
        thread.start()
    while len(produced) < 100 and not errors:
        time.sleep(0.01)
    os.kill(leader, signal.SIGKILL)
    for thread in producers:
        thread.join(timeout=120)
    producing_done.set()
    consumer.join(timeout=120)

    assert not errors, errors
    assert len(produced) == 2 * MESSAGES_PER_PRODUCER
    assert set(produced) <= stored_ids(formation)
    assert completed >= set(produced)
    assert wait_for_leader(formation, {survivor}) == survivor
