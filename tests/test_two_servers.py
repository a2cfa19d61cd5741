"""Two ``sundial serve`` processes on one database: an exclusive queue stays exclusive.

The first server starts the embedded PostgreSQL in the shared data directory; the second finds it
running and uses it. Sixteen consumers, half on each server, dequeue (1 to 5 at a time, long
polling) and complete 200 messages of 20 exclusive values while a watcher polls the database for
two running messages of one value. Exclusivity is checked twice: by the watcher, and from the
consumers' side (the time between receiving a message and sending its completion never overlaps
another such interval of the same value).
"""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.processes import free_port
from tests.test_serve import serve

MESSAGES = 200
VALUES = 20
CONSUMERS = 16
RUN_SECONDS = 40.0
VIOLATIONS = (
    "SELECT exclusive_value, count(*) FROM messages WHERE state = 'running'"
    " GROUP BY 1 HAVING count(*) > 1"
)


@dataclass
class Run:
    """What the consumers and the watcher saw."""

    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    received: list[str] = field(default_factory=list)  # message ids, in dequeue order
    completed: list[str] = field(default_factory=list)
    by_server: Counter[str] = field(default_factory=Counter)  # base URL -> messages dequeued
    intervals: dict[str, list[tuple[float, float, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )  # value -> (received, completing, message id)
    errors: list[str] = field(default_factory=list)
    violations: list[tuple[str, int]] = field(default_factory=list)
    polls: int = 0


def consume(run: Run, base: str, queue: str, headers: dict[str, str], seed: int) -> None:
    """Dequeue 1-5 messages at a time and complete each, until every message is done."""
    rng = random.Random(seed)
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        while not run.done.is_set():
            answer = client.post(
                f"{queue}/dequeue", json={"count": rng.randint(1, 5), "wait_seconds": 1}
            )
            received = time.monotonic()
            if answer.status_code != 200:
                with run.lock:
                    run.errors.append(f"dequeue {answer.status_code}: {answer.text}")
                return
            messages = answer.json()["messages"]
            with run.lock:
                run.received += [m["id"] for m in messages]
                run.by_server[base] += len(messages)
            for message in messages:
                time.sleep(rng.uniform(0, 0.003))  # the work
                completing = time.monotonic()
                done = client.post(
                    f"{queue}/messages/{message['id']}/complete",
                    json={"lease_id": message["lease_id"]},
                )
                with run.lock:
                    value = message["metadata"]["customer"]
                    run.intervals[value].append((received, completing, message["id"]))
                    if done.status_code != 200:
                        run.errors.append(f"complete {done.status_code}: {done.text}")
                        return
                    run.completed.append(message["id"])
                    if len(run.completed) >= MESSAGES:
                        run.done.set()


def watch(run: Run, dsn: str, started: threading.Event) -> None:
    """Poll the database for two running messages of one exclusive value."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        started.set()
        while not run.done.is_set():
            run.violations += conn.execute(VIOLATIONS).fetchall()
            run.polls += 1
            run.done.wait(0.002)


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[Path, str, str]]:
    """Two servers sharing one data directory (so one database): the data dir and their URLs.

    The first one stops the embedded database it started when it exits, so it exits first."""
    data_dir = tmp_path / "data"
    with ExitStack() as second, ExitStack() as first:
        one = first.enter_context(serve(data_dir, free_port()))
        two = second.enter_context(serve(data_dir, free_port()))
        yield data_dir, one, two


@pytest.mark.slow
def test_exclusive_queue_across_two_servers(two_servers: tuple[Path, str, str]) -> None:
    data_dir, one, two = two_servers
    headers = {"Authorization": f"Bearer {(data_dir / 'admin-token').read_text().strip()}"}
    cluster = json.loads((data_dir / "postgres" / "cluster.json").read_text())
    dsn = f"host=127.0.0.1 port={cluster['port']} user=sundial dbname=sundial"

    queue = "/v1/namespaces/two/queues/ex"
    created = httpx.post(f"{one}/v1/namespaces", json={"name": "two"}, headers=headers)
    assert created.status_code == 201, created.text
    config = {"kind": "exclusive", "exclusive_key": "customer"}
    assert httpx.put(f"{two}{queue}", json=config, headers=headers).status_code == 201
    rng = random.Random(7)
    messages = [
        {
            "id": f"m{i:03}",
            "priority": rng.randint(0, 3),
            "metadata": {"customer": f"c{i % VALUES}"},
        }
        for i in range(MESSAGES)
    ]
    for base, batch in ((one, messages[::2]), (two, messages[1::2])):
        answer = httpx.post(f"{base}{queue}/messages", json={"messages": batch}, headers=headers)
        assert answer.status_code == 201, answer.text

    run = Run()
    watching = threading.Event()
    watcher = threading.Thread(target=watch, args=(run, dsn, watching))
    watcher.start()
    assert watching.wait(10)
    consumers = [
        threading.Thread(target=consume, args=(run, (one, two)[i % 2], queue, headers, i))
        for i in range(CONSUMERS)
    ]
    for consumer in consumers:
        consumer.start()
    finished = run.done.wait(RUN_SECONDS)
    run.done.set()  # stop everyone, also after a failure
    for thread in [*consumers, watcher]:
        thread.join(timeout=30)
        assert not thread.is_alive()

    assert run.errors == []
    assert finished, f"only {len(run.completed)} of {MESSAGES} completed in {RUN_SECONDS}s"
    assert run.violations == []
    assert run.polls > 10
    ids = sorted(m["id"] for m in messages)
    assert sorted(run.received) == ids  # each message dequeued exactly once
    assert sorted(run.completed) == ids  # and completed exactly once
    assert run.by_server[one] > 0
    assert run.by_server[two] > 0
    for value, intervals in run.intervals.items():
        intervals.sort()
        for (_, end, first), (start, _, second) in itertools.pairwise(intervals):
            assert end < start, f"{first} and {second} of {value} ran at the same time"

    detail = httpx.get(f"{one}{queue}", headers=headers).json()
    assert {s: n for s, n in detail["counts"].items() if n} == {"completed": MESSAGES}
