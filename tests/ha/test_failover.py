"""A real ``sundial serve`` on a pg_auto_failover formation (``sundial dev-cluster``: a monitor,
a primary and its synchronous standby) rides through the failover of its database.

One formation for the whole run (``tests/ha/conftest.py``) and one server for the module; each
test leaves the formation healthy (a primary and a caught-up standby) for the next. The
guarantees under sustained traffic and repeated faults are the fault campaign's (``tests/faults``,
``--ha``); these tests pin down what the server does around one failover: long polls keep
waking, clients get 503 with ``Retry-After`` and never a 500, the Python client retries through
it, nothing acknowledged is lost, the scheduler leads on the new primary, a killed node rejoins,
metrics and the dashboard answer again, and a commit the standby never confirmed is not
acknowledged.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from app.client import Client, RetryPolicy
from app.client.errors import SundialError
from app.embedded.formation import Formation, NodeState
from tests.conftest import ADMIN_TOKEN
from tests.ha.conftest import FAILOVER_TIMEOUT, REJOIN_TIMEOUT, healthy, stored_ids
from tests.processes import clean_env, free_port, sundial_serve, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.ha, pytest.mark.serial]

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
_ids = itertools.count()


@pytest.fixture(scope="module")
def server(formation: Formation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir = tmp_path_factory.mktemp("server")
    port = free_port()
    env = clean_env(
        SUNDIAL_DATABASE_URL=formation.sqlalchemy_url,
        SUNDIAL_ADMIN_TOKEN=ADMIN_TOKEN,
        SUNDIAL_DATA_DIR=str(data_dir),
        SUNDIAL_PORT=str(port),
        SUNDIAL_WORKERS="1",
        SUNDIAL_LEADER_POLL_SECONDS="0.5",
    )
    base = f"http://127.0.0.1:{port}"
    log = data_dir / "serve.log"
    with sundial_serve(env, log, args=["--no-migrate"]) as process:
        wait_ready(base, process, log)
        yield base
    # Whatever the failovers did, the server never answered 500 nor logged a traceback.
    text = log.read_text()
    assert "Traceback" not in text, text[-4000:]


@pytest.fixture(scope="module")
def queue(server: str) -> str:
    """A namespace's queue URL; the admin token works on it."""
    with httpx.Client(base_url=f"{server}/v1", headers=ADMIN, timeout=10) as http:
        assert http.post("/namespaces", json={"name": "ha"}).status_code == 201
        assert http.put("/namespaces/ha/queues/jobs", json={}).status_code == 201
    return f"{server}/v1/namespaces/ha/queues/jobs"


def kill_primary(formation: Formation) -> str:
    """SIGKILL the primary; return its name once another node accepts writes."""
    primary = formation.primary()
    assert primary is not None
    formation.kill_node(primary.name)
    formation.wait_until(
        lambda nodes: any(n.writable and n.name != primary.name for n in nodes),
        FAILOVER_TIMEOUT,
        "a new primary",
    )
    return primary.name


def roles(formation: Formation) -> tuple[NodeState, str]:
    """The primary now, and the name of its standby."""
    primary = formation.primary()
    assert primary is not None
    standby = next(node.name for node in formation.nodes() if node.name != primary.name)
    return primary, standby


class Producer(threading.Thread):
    """Enqueues one message per request, each with an id of its own, until stopped; records
    every answer."""

    def __init__(self, queue: str) -> None:
        super().__init__(daemon=True)
        self.queue = queue
        self.stop = threading.Event()
        self.statuses: Counter[int] = Counter()
        self.without_retry_after = 0
        self.acknowledged: list[str] = []
        self.acknowledged_after = threading.Event()

    def run(self) -> None:
        with httpx.Client(headers=ADMIN, timeout=10) as http:
            while not self.stop.is_set():
                message_id = f"m{next(_ids)}"
                body = {"messages": [{"id": message_id}]}
                try:
                    answer = http.post(f"{self.queue}/messages", json=body)
                except httpx.TransportError:
                    continue
                self.statuses[answer.status_code] += 1
                if answer.status_code == 201:
                    self.acknowledged.append(message_id)
                    self.acknowledged_after.set()
                elif answer.status_code == 503:
                    if "Retry-After" not in answer.headers:
                        self.without_retry_after += 1
                    time.sleep(0.05)  # a client honouring Retry-After briefly

    def acknowledged_from_now(self, timeout: float) -> None:
        """Wait until a message is acknowledged after this call."""
        self.acknowledged_after.clear()
        assert self.acknowledged_after.wait(timeout), f"no 201 since; answers {self.statuses}"


def test_long_polls_wake_on_the_new_primary_after_a_switchover(
    formation: Formation, server: str, queue: str
) -> None:
    formation.switchover()
    # The server's first statements on the new primary may still meet the old connections.
    deadline = time.monotonic() + FAILOVER_TIMEOUT
    with httpx.Client(headers=ADMIN, timeout=10) as http:
        while http.get(f"{queue}").status_code != 200:
            assert time.monotonic() < deadline, "the server never reached the new primary"
            time.sleep(0.1)
        result: dict[str, httpx.Response] = {}

        def long_poll() -> None:
            with httpx.Client(headers=ADMIN, timeout=30) as own:
                result["answer"] = own.post(f"{queue}/dequeue", json={"wait_seconds": 20})

        waiting = threading.Thread(target=long_poll)
        started = time.monotonic()
        waiting.start()
        # The wait is registered on the new primary by the server's LISTEN connection (the
        # multi-host URL used to be mangled for it, so it never connected).
        with psycopg.connect(formation.libpq_dsn, autocommit=True) as conn:
            while not conn.execute(
                "SELECT 1 FROM queue_listeners l JOIN pg_stat_activity a ON a.pid = l.listener_pid"
            ).fetchall():
                assert time.monotonic() - started < 15, "the long poll never listened"
                time.sleep(0.05)
        answer = http.post(f"{queue}/messages", json={"messages": [{"id": "wake-me"}]})
        assert answer.status_code == 201, answer.text
        waiting.join(timeout=30)
    assert [m["id"] for m in result["answer"].json()["messages"]] == ["wake-me"]
    # Woken by the notification, not by the end of its 20 s wait.
    assert time.monotonic() - started < 15


def test_a_killed_primary_costs_503s_then_service_resumes_and_the_node_rejoins(
    formation: Formation, server: str, queue: str
) -> None:
    producer = Producer(queue)
    producer.start()
    try:
        producer.acknowledged_from_now(FAILOVER_TIMEOUT)
        killed = kill_primary(formation)
        producer.acknowledged_from_now(FAILOVER_TIMEOUT)  # service resumed by itself
    finally:
        producer.stop.set()
        producer.join(timeout=30)
    # Clients were told to come back later while no node accepted writes; never a 500.
    assert set(producer.statuses) <= {201, 503}, producer.statuses
    assert producer.statuses[503] > 0, "the outage was not observed"
    assert producer.without_retry_after == 0
    # Every acknowledged enqueue survived the loss of the primary (synchronous replication).
    assert set(producer.acknowledged) <= stored_ids(formation)

    # The killed node comes back as the standby of the new primary.
    formation.start_node(killed)
    nodes = formation.wait_until(healthy, REJOIN_TIMEOUT, f"{killed} rejoining")
    assert next(n for n in nodes if n.name == killed).reported == "secondary"

    # What reads the database answers again: metrics, the dashboard, the admin plane.
    with httpx.Client(base_url=server, headers=ADMIN, timeout=10) as http:
        assert http.get("/metrics").status_code == 200
        assert http.get("/dashboard/login").status_code == 200
        assert http.get("/v1/namespaces").status_code == 200
        assert http.get("/readyz").status_code == 200


def test_the_scheduler_leads_on_the_new_primary(formation: Formation, server: str) -> None:
    killed = kill_primary(formation)
    leader = (
        "SELECT node_id FROM scheduler_nodes"
        " WHERE is_leader AND heartbeat_at > now() - interval '3 seconds'"
    )
    deadline = time.monotonic() + FAILOVER_TIMEOUT
    rows: list[tuple[str]] = []
    while not rows:
        assert time.monotonic() < deadline, "no scheduler leads on the new primary"
        try:
            with psycopg.connect(formation.libpq_dsn, autocommit=True, connect_timeout=3) as conn:
                rows = conn.execute(leader).fetchall()
        except psycopg.OperationalError:
            pass
        time.sleep(0.1)
    assert len(rows) == 1
    formation.start_node(killed)


def test_the_python_client_rides_through_a_switchover(
    formation: Formation, server: str, queue: str
) -> None:
    ids = [f"client-{n}" for n in range(400)]
    done: list[str] = []
    errors: list[Exception] = []
    patient = RetryPolicy(attempts=60, max_seconds=60, initial_wait=0.05, max_wait=1)

    def produce() -> None:
        try:
            with Client(server, ADMIN_TOKEN, retry=patient) as client:
                for message_id in ids:
                    client.enqueue("ha/jobs", {"n": message_id}, id=message_id)
                    done.append(message_id)
        except (SundialError, httpx.HTTPError) as error:  # reported below
            errors.append(error)

    producing = threading.Thread(target=produce)
    producing.start()
    while len(done) < 50 and producing.is_alive():
        time.sleep(0.01)
    formation.switchover()
    producing.join(timeout=120)
    assert not errors, errors
    assert done == ids
    assert set(ids) <= stored_ids(formation)


def test_a_commit_its_standby_never_confirmed_is_not_acknowledged(
    formation: Formation, server: str, queue: str
) -> None:
    # The standby freezes and the monitor is gone, so the primary keeps waiting for the
    # standby's confirmation (its connection is open: the primary does not demote itself).
    # Cancelling the waiting statement makes PostgreSQL report the commit as done, with only a
    # warning: Sundial must answer that the outcome is unknown (503), not 201.
    primary, standby = roles(formation)
    formation.kill_node("monitor")
    formation.pause_node(standby)
    answers: list[httpx.Response] = []
    try:

        def enqueue() -> None:
            with httpx.Client(headers=ADMIN, timeout=60) as http:
                body = {"messages": [{"id": "unconfirmed"}]}
                answers.append(http.post(f"{queue}/messages", json=body))

        sending = threading.Thread(target=enqueue)
        sending.start()
        waiting = "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
        with psycopg.connect(formation.node_dsn(primary.name), autocommit=True) as conn:
            deadline = time.monotonic() + 30
            while not (pids := conn.execute(waiting).fetchall()):
                assert time.monotonic() < deadline, "the commit never waited for the standby"
                time.sleep(0.05)
            for (pid,) in pids:
                conn.execute("SELECT pg_cancel_backend(%s)", (pid,))
        sending.join(timeout=60)
    finally:
        formation.resume_node(standby)
        formation.start_node("monitor")
    [answer] = answers
    assert answer.status_code == 503, answer.text
    assert "Retry-After" in answer.headers
    # The outcome was unknown, and a retry with the same id settles it: the message had
    # committed on the primary, and now its standby has it too.
    with httpx.Client(headers=ADMIN, timeout=30) as http:
        again = http.post(f"{queue}/messages", json={"messages": [{"id": "unconfirmed"}]})
    assert again.status_code == 201, again.text
    assert again.json()["messages"][0]["created"] is False


def test_a_primary_lost_while_its_standby_lags_is_waited_for_not_replaced(
    formation: Formation, server: str, queue: str
) -> None:
    # The double failure: the standby stops answering, so the monitor lets the primary go on
    # alone; then the primary dies too. The standby missed what the primary acknowledged alone,
    # so the monitor must not promote it: writes are refused (503, never a 500) until the
    # primary is back, and then what it acknowledged alone is there.
    primary, standby = roles(formation)
    formation.pause_node(standby)
    try:
        formation.wait_until(
            lambda nodes: any(
                n.name == primary.name and n.settled and n.reported == "wait_primary" for n in nodes
            ),
            FAILOVER_TIMEOUT,
            "the primary going on alone",
        )
        with httpx.Client(headers=ADMIN, timeout=30) as http:
            alone = http.post(f"{queue}/messages", json={"messages": [{"id": "alone"}]})
            assert alone.status_code == 201, alone.text
            formation.kill_node(primary.name)
        formation.resume_node(standby)

        # Longer than the monitor takes to promote a standby in sync (about 7 s).
        statuses: Counter[int] = Counter()
        watched_until = time.monotonic() + 12
        with httpx.Client(headers=ADMIN, timeout=30) as http:
            while time.monotonic() < watched_until:
                body = {"messages": [{"id": f"refused-{next(_ids)}"}]}
                statuses[http.post(f"{queue}/messages", json=body).status_code] += 1
                promoted = [n for n in formation.nodes() if n.name == standby and n.writable]
                assert not promoted, promoted
                time.sleep(0.2)
        assert set(statuses) == {503}, statuses
    finally:
        formation.resume_node(standby)
        formation.start_node(primary.name)

    # The old primary is back and serves again, with the write it acknowledged alone.
    producer = Producer(queue)
    producer.start()
    try:
        producer.acknowledged_from_now(FAILOVER_TIMEOUT)
    finally:
        producer.stop.set()
        producer.join(timeout=30)
    formation.wait_until(
        lambda nodes: any(n.name == primary.name and n.writable for n in nodes),
        FAILOVER_TIMEOUT,
        "the old primary serving again",
    )
    assert "alone" in stored_ids(formation)
