"""The SQS bench's load generator, a process of its own (``python -m bench.sqs.clients``):
``threads`` clients of one door, one client per thread, as an SQS user's program (boto3) or a
REST user's (httpx) runs them.

It speaks one JSON document a line. On stdin, first the spec: ``door`` (``sqs`` or ``rest``),
``base``, ``threads``, ``messages``, ``batch``, ``warmup_messages`` and the door's own (``sqs``:
``access_key_id``, ``secret_access_key``, ``queue_url``; ``rest``: ``token``, ``queue_path``).
It makes its clients and warms them up (a small produce and consume, not counted), then answers
``{"ready": …}``; then each ``produce`` or ``consume`` line runs that phase on ``messages`` and
answers its result; ``exit`` ends it. The harness reads the CPU of every process around each
phase, so the process's start-up and the warm-up are outside the figures.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from bench.stats import percentile

REGION = "eu-west-1"
CONSUME_DEADLINE_S = 600.0
"""A consume that has not seen every message by then stops (and its check fails)."""
EMPTY_PAUSE_S = 0.002
"""Pause after an empty receive while other clients still hold the last messages."""
MAX_ERRORS = 50
"""A client that met this many failed requests in a phase stops (and the phase's check fails)."""


class Door(Protocol):
    """One client of a door: the three calls a producer and a consumer make."""

    def send(self, bodies: list[str]) -> tuple[int, int]:
        """Send ``bodies`` in one request: (accepted, refused)."""
        ...

    def receive(self, count: int) -> list[tuple[str, Any]]:
        """Up to ``count`` messages in one request: (message id, what deletes it)."""
        ...

    def delete(self, handles: list[Any]) -> tuple[int, int]:
        """Delete (acknowledge) messages in one request: (deleted, refused)."""
        ...


class SqsDoor:
    """A boto3 SQS client (a session of its own: one per thread), retries off."""

    def __init__(self, spec: dict[str, Any]) -> None:
        import boto3
        from botocore.config import Config

        session = boto3.session.Session()
        self.client = session.client(
            "sqs",
            endpoint_url=f"{spec['base']}/sqs",
            region_name=REGION,
            aws_access_key_id=spec["access_key_id"],
            aws_secret_access_key=spec["secret_access_key"],
            config=Config(retries={"total_max_attempts": 1}, read_timeout=60),
        )
        self.url = spec["queue_url"]

    def send(self, bodies: list[str]) -> tuple[int, int]:
        answer = self.client.send_message_batch(
            QueueUrl=self.url,
            Entries=[{"Id": str(i), "MessageBody": body} for i, body in enumerate(bodies)],
        )
        return len(answer.get("Successful", [])), len(answer.get("Failed", []))

    def receive(self, count: int) -> list[tuple[str, Any]]:
        answer = self.client.receive_message(
            QueueUrl=self.url, MaxNumberOfMessages=count, WaitTimeSeconds=0
        )
        return [(m["MessageId"], m["ReceiptHandle"]) for m in answer.get("Messages", [])]

    def delete(self, handles: list[Any]) -> tuple[int, int]:
        answer = self.client.delete_message_batch(
            QueueUrl=self.url,
            Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles)],
        )
        return len(answer.get("Successful", [])), len(answer.get("Failed", []))


class RestDoor:
    """An httpx client of the REST API with the namespace's bearer token."""

    def __init__(self, spec: dict[str, Any]) -> None:
        import httpx

        self.http = httpx.Client(
            base_url=spec["base"],
            headers={
                "Authorization": f"Bearer {spec['token']}",
                "Content-Type": "application/json",
            },
            timeout=60,
        )
        self.path = spec["queue_path"]

    def _post(self, path: str, body: dict[str, Any], status: int) -> Any:
        answer = self.http.post(self.path + path, content=json.dumps(body).encode())
        if answer.status_code != status:
            raise RuntimeError(f"{path}: {answer.status_code} {answer.text[:200]}")
        return answer.json()

    def send(self, bodies: list[str]) -> tuple[int, int]:
        answer = self._post("/messages", {"messages": [{"payload": b} for b in bodies]}, 201)
        created = sum(1 for m in answer["messages"] if m["created"])
        return created, len(bodies) - created

    def receive(self, count: int) -> list[tuple[str, Any]]:
        answer = self._post("/dequeue", {"count": count}, 200)
        return [(m["id"], {"id": m["id"], "lease_id": m["lease_id"]}) for m in answer["messages"]]

    def delete(self, handles: list[Any]) -> tuple[int, int]:
        answer = self._post("/ack", {"complete": handles}, 200)
        ok = sum(1 for r in answer["results"] if r["ok"])
        return ok, len(handles) - ok


DOORS: dict[str, Callable[[dict[str, Any]], Door]] = {"sqs": SqsDoor, "rest": RestDoor}


# --- the phases (pure of any door: tests drive them with an in-memory one) --------------------


def split(total: int, parts: int) -> list[int]:
    """``total`` shared as evenly as can be by ``parts`` (the first ones get the rest)."""
    share, rest = divmod(total, parts)
    return [share + (1 if i < rest else 0) for i in range(parts)]


def batches(n: int, size: int) -> list[int]:
    """The request sizes that send ``n`` messages ``size`` at a time (the last one shorter)."""
    full, rest = divmod(n, size)
    return [size] * full + ([rest] if rest else [])


def body(tag: str, client: int, seq: int) -> str:
    """A message's body: small, unique in the run, the same text through either door."""
    return json.dumps({"p": tag, "c": client, "i": seq}, separators=(",", ":"))


def _note(problems: list[str], error: Exception) -> None:
    """Keep the first few failed requests' errors, for the report."""
    if len(problems) < 5:
        problems.append(f"{type(error).__name__}: {error}"[:300])


def _latencies(ms: list[float]) -> dict[str, float | None]:
    return {"p50": percentile(ms, 50), "p99": percentile(ms, 99)}


def _together(doors: Sequence[Door], work: Callable[[int, Door], None]) -> float:
    """Run ``work`` on every door in a thread of its own, released at once; the wall time from
    the release until the last one is done."""
    barrier = threading.Barrier(len(doors) + 1)

    def run(i: int, door: Door) -> None:
        barrier.wait()
        work(i, door)

    threads = [threading.Thread(target=run, args=(i, d)) for i, d in enumerate(doors)]
    for thread in threads:
        thread.start()
    barrier.wait()
    t0 = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - t0


def produce(doors: Sequence[Door], total: int, batch: int, tag: str = "m") -> dict[str, Any]:
    """Every client sends its share of ``total`` messages, ``batch`` per request, back to back;
    the messages accepted per second of the whole phase."""
    shares = split(total, len(doors))
    lock = threading.Lock()
    tally = {"messages": 0, "refused": 0, "errors": 0, "requests": 0}
    lat: list[float] = []
    problems: list[str] = []

    def work(i: int, door: Door) -> None:
        seq, mine, refused, errors, times = 0, 0, 0, 0, []
        for size in batches(shares[i], batch):
            bodies = [body(tag, i, seq + k) for k in range(size)]
            seq += size
            t0 = time.perf_counter()
            try:
                ok, bad = door.send(bodies)
            except Exception as error:  # noqa: BLE001 — counted, whatever the request met
                _note(problems, error)
                errors += 1
                refused += size
                if errors >= MAX_ERRORS:
                    break
                continue
            times.append((time.perf_counter() - t0) * 1000)
            mine += ok
            refused += bad
        with lock:
            tally["messages"] += mine
            tally["refused"] += refused
            tally["errors"] += errors
            tally["requests"] += len(times) + errors
            lat.extend(times)

    wall = _together(doors, work)
    return {
        **tally,
        "wall_s": wall,
        "rate": tally["messages"] / wall if wall else 0.0,
        "latency_ms": _latencies(lat),
        "problems": problems,
    }


def consume(
    doors: Sequence[Door],
    total: int,
    batch: int,
    deadline_s: float = CONSUME_DEADLINE_S,
) -> dict[str, Any]:
    """Every client receives up to ``batch`` messages and deletes them in one request, back to
    back, until ``total`` messages were received; the messages deleted per second of the whole
    phase, and what a check needs: duplicates, refusals, errors, empty receives."""
    lock = threading.Lock()
    state = {"received": 0}
    tally = {"messages": 0, "refused": 0, "errors": 0, "requests": 0, "empty": 0}
    ids: list[str] = []
    lat: list[float] = []
    problems: list[str] = []
    deadline = time.monotonic() + deadline_s
    timed_out = [False]

    def work(i: int, door: Door) -> None:
        mine, refused, errors, empty, requests, seen, times = 0, 0, 0, 0, 0, [], []
        while True:
            with lock:
                if state["received"] >= total:
                    break
            if time.monotonic() > deadline:
                timed_out[0] = True
                break
            if errors >= MAX_ERRORS:
                break
            t0 = time.perf_counter()
            requests += 1
            try:
                got = door.receive(batch)
            except Exception as error:  # noqa: BLE001 — counted, whatever the request met
                _note(problems, error)
                errors += 1
                continue
            if not got:
                empty += 1
                time.sleep(EMPTY_PAUSE_S)  # the last messages are held by other clients
                continue
            with lock:
                state["received"] += len(got)
            seen += [message_id for message_id, _ in got]
            requests += 1
            try:
                ok, bad = door.delete([handle for _, handle in got])
            except Exception as error:  # noqa: BLE001 — counted, whatever the request met
                _note(problems, error)
                errors += 1
                refused += len(got)
                continue
            times.append((time.perf_counter() - t0) * 1000)
            mine += ok
            refused += bad
        with lock:
            tally["messages"] += mine
            tally["refused"] += refused
            tally["errors"] += errors
            tally["requests"] += requests
            tally["empty"] += empty
            ids.extend(seen)
            lat.extend(times)

    wall = _together(doors, work)
    return {
        **tally,
        "received": len(ids),
        "duplicates": len(ids) - len(set(ids)),
        "timed_out": timed_out[0],
        "wall_s": wall,
        "rate": tally["messages"] / wall if wall else 0.0,
        "latency_ms": _latencies(lat),
        "problems": problems,
    }


def _say(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document) + "\n")
    sys.stdout.flush()


def main() -> int:
    """Read the spec, make and warm the clients, then run the phases the harness asks for."""
    spec = json.loads(sys.stdin.readline())
    make = DOORS[spec["door"]]
    doors = [make(spec) for _ in range(spec["threads"])]
    warm = spec["warmup_messages"]
    warmup = {
        "produce": produce(doors, warm, spec["batch"], tag="w"),
        "consume": consume(doors, warm, spec["batch"]),
    }
    _say({"ready": True, "warmup": warmup})
    for line in sys.stdin:
        command = line.strip()
        if command == "produce":
            _say(produce(doors, spec["messages"], spec["batch"]))
        elif command == "consume":
            _say(consume(doors, spec["messages"], spec["batch"]))
        elif command == "exit":
            break
        else:
            raise SystemExit(f"unknown command {command!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
