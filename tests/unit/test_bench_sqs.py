"""The SQS bench's pure parts: how the generator shares the work and drives its clients (against
an in-memory door), the order of the doors, the figures and ratios, and the report."""

from __future__ import annotations

import json
import threading
from collections import deque
from typing import Any

import pytest

from bench.sqs.clients import batches, body, consume, produce, split
from bench.sqs.model import BEST, BOTH, REST, SQS, figures, order, summarise, trip
from bench.sqs.report import render_report


class MemoryDoor:
    """A door over one in-memory queue shared by every client: sends append, receives lease
    from the front, deletes drop leased messages. ``fail_every`` makes every n-th send fail."""

    def __init__(self, queue: MemoryQueue, fail_every: int = 0) -> None:
        self.queue = queue
        self.fail_every = fail_every
        self.sends = 0

    def send(self, bodies: list[str]) -> tuple[int, int]:
        self.sends += 1
        if self.fail_every and self.sends % self.fail_every == 0:
            raise RuntimeError("503 unavailable")
        with self.queue.lock:
            for text in bodies:
                self.queue.pending.append((f"m{len(self.queue.bodies)}", text))
                self.queue.bodies.append(text)
        return len(bodies), 0

    def receive(self, count: int) -> list[tuple[str, Any]]:
        with self.queue.lock:
            got = [self.queue.pending.popleft() for _ in range(min(count, len(self.queue.pending)))]
            self.queue.leased.update(got)
        return [(message_id, message_id) for message_id, _ in got]

    def delete(self, handles: list[Any]) -> tuple[int, int]:
        with self.queue.lock:
            ok = sum(1 for h in handles if self.queue.leased.pop(h, None) is not None)
            self.queue.deleted += ok
        return ok, len(handles) - ok


class MemoryQueue:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: deque[tuple[str, str]] = deque()
        self.leased: dict[str, str] = {}
        self.bodies: list[str] = []
        self.deleted = 0


def test_the_work_is_shared_evenly_in_batches() -> None:
    assert split(6_000, 4) == [1_500] * 4
    assert split(10, 4) == [3, 3, 2, 2]
    assert sum(split(20_001, 7)) == 20_001
    assert batches(25, 10) == [10, 10, 5]
    assert batches(20, 10) == [10, 10]
    assert batches(0, 10) == []


def test_bodies_are_small_unique_json_text() -> None:
    texts = {body(tag, c, i) for tag in ("w", "m") for c in range(4) for i in range(100)}
    assert len(texts) == 800
    assert json.loads(body("m", 3, 7)) == {"p": "m", "c": 3, "i": 7}
    assert len(body("m", 3, 19_999)) < 32


def test_produce_then_consume_delivers_every_message_once() -> None:
    queue = MemoryQueue()
    doors = [MemoryDoor(queue) for _ in range(4)]
    sent = produce(doors, 1_003, 10)
    assert sent["messages"] == 1_003
    assert sent["requests"] == 3 * 26 + 25  # shares 251, 251, 251 (26 requests), 250 (25)
    assert sent["errors"] == sent["refused"] == 0
    assert sent["rate"] == pytest.approx(1_003 / sent["wall_s"])
    assert len(set(queue.bodies)) == 1_003
    got = consume(doors, 1_003, 10)
    assert got["messages"] == got["received"] == 1_003
    assert got["duplicates"] == 0
    assert not got["timed_out"]
    assert queue.deleted == 1_003
    assert not queue.pending
    assert not queue.leased
    assert got["latency_ms"]["p50"] is not None


def test_failed_requests_are_counted_and_kept() -> None:
    queue = MemoryQueue()
    sent = produce([MemoryDoor(queue, fail_every=3)], 100, 10)
    # 10 requests, the 3rd, 6th and 9th failed: 70 sent, 30 refused.
    assert sent["messages"] == 70
    assert sent["refused"] == 30
    assert sent["errors"] == 3
    assert sent["problems"][0] == "RuntimeError: 503 unavailable"


def test_a_consume_that_cannot_see_every_message_stops_at_its_deadline() -> None:
    queue = MemoryQueue()
    doors = [MemoryDoor(queue) for _ in range(2)]
    produce(doors, 50, 10)
    got = consume(doors, 60, 10, deadline_s=0.2)
    assert got["timed_out"]
    assert got["messages"] == 50
    assert got["empty"] > 0


def test_sqs_and_rest_alternate_back_to_back() -> None:
    assert order(0) == (SQS, REST, BEST)
    assert order(1) == (REST, SQS, BEST)
    assert order(2) == order(0)


def _phase(rate: float, messages: int, server: float, postgres: float, client: float) -> Any:
    return {
        "messages": messages,
        "rate": rate,
        "latency_ms": {"p50": 10.0, "p99": 20.0},
        "cpu": {
            "wall_s": messages / rate,
            "server_cpu_s": server,
            "postgres_cpu_s": postgres,
            "generator_cpu_s": client,
            "machine_busy_s": 2 * messages / rate,
        },
    }


def test_figures_are_cpu_per_message_of_each_process() -> None:
    f = figures(_phase(1_000.0, 4_000, 2.0, 1.0, 0.4))
    assert f["server_us"] == pytest.approx(500.0)
    assert f["database_us"] == pytest.approx(250.0)
    assert f["generator_us"] == pytest.approx(100.0)
    assert f["total_us"] == pytest.approx(850.0)
    # 4 s at 2 cores busy: 8 CPU-s, 3.4 of them ours.
    assert f["busy_cores"] == pytest.approx(2.0)
    assert f["others_cores"] == pytest.approx((8.0 - 3.4) / 4)
    assert f["p99_ms"] == 20.0


def test_a_trip_is_a_produce_then_a_consume() -> None:
    produced = figures(_phase(1_000.0, 4_000, 2.0, 1.0, 0.4))
    consumed = figures(_phase(500.0, 4_000, 4.0, 2.0, 0.8))
    t = trip(produced, consumed)
    assert t["rate"] == pytest.approx(1 / (1 / 1_000 + 1 / 500))
    assert t["server_us"] == pytest.approx(1_500.0)
    assert t["database_us"] == pytest.approx(750.0)
    assert t["p50_ms"] is None


def _runs() -> list[dict[str, Any]]:
    # Run 1 on a quiet machine, run 2 on a busy one (half the rates): the ratios stay.
    runs = []
    for scale in (1.0, 0.5):
        runs.append(
            {
                "order": list(order(len(runs))),
                SQS: {
                    "produce": _phase(800 * scale, 6_000, 2.4, 1.0, 1.2),
                    "consume": _phase(400 * scale, 6_000, 4.8, 2.0, 2.4),
                },
                REST: {
                    "produce": _phase(1_000 * scale, 6_000, 1.2, 1.0, 0.6),
                    "consume": _phase(800 * scale, 6_000, 2.4, 1.8, 1.2),
                },
                BEST: {
                    "produce": _phase(8_000 * scale, 6_000, 0.2, 0.2, 0.1),
                    "consume": _phase(5_000 * scale, 6_000, 0.3, 0.4, 0.2),
                },
            }
        )
    return runs


def test_summary_takes_the_ratios_run_by_run() -> None:
    s = summarise(_runs())
    assert s["n"] == 2
    produce_ = s["phases"]["produce"]
    assert produce_["doors"][SQS]["rate"] == pytest.approx(600.0)  # median of 800 and 400
    assert produce_["sqs_rest"]["rate"]["median"] == pytest.approx(0.8)
    assert produce_["sqs_rest"]["rate"]["min"] == pytest.approx(0.8)
    assert produce_["sqs_rest"]["server_us"]["median"] == pytest.approx(2.0)
    assert produce_["sqs_best_rate"]["median"] == pytest.approx(0.1)
    consume_ = s["phases"]["consume"]
    assert consume_["sqs_rest"]["rate"]["median"] == pytest.approx(0.5)
    assert consume_["sqs_rest"]["database_us"]["median"] == pytest.approx(2.0 / 1.8)
    both = s["phases"][BOTH]
    sqs_trip = 1 / (1 / 800 + 1 / 400)
    rest_trip = 1 / (1 / 1_000 + 1 / 800)
    assert both["sqs_rest"]["rate"]["median"] == pytest.approx(sqs_trip / rest_trip)
    assert both["sqs_rest"]["server_us"]["median"] == pytest.approx(2.0)


def test_summary_of_no_runs() -> None:
    s = summarise([])
    assert s["n"] == 0
    assert s["phases"]["produce"]["doors"] == {}
    assert s["phases"]["produce"]["sqs_rest"]["rate"]["median"] is None


def test_report_tables() -> None:
    res = {
        "mode": "quick",
        "elapsed_s": 60.0,
        "sizes": {"messages": 6_000, "threads": 4, "batch": 10, "best_batch": 100},
        "machine": {"cores": 2},
        "runs": _runs(),
        "checks": [{"check": "x", "ok": True}, {"check": "y", "ok": False}],
    }
    report = render_report(res)
    assert "| produce | SQS door (boto3), 10 per request | 600 | 400 | 167 | 200 |" in report
    assert "| produce | REST API (httpx), 100 per request | 6,000 |" in report
    assert "| consume | 0.500 (0.500-0.500) | 2.000 (2.000-2.000) |" in report
    assert "run 2 (rest → sqs → rest_b100): produce 400/500/4,000" in report
    assert "Correctness checks: 1/2 passed." in report
    assert "- FAILED: y:" in report
