"""The traffic: producers and consumers against both servers, recording into the history.

Producers enqueue batches with client-chosen ids and retry a failed batch with the same ids;
consumers long-poll, then complete, fail, die holding the lease or stall past it, alone or through
``POST …/ack`` (docs/reliability.md, "The system under test").
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from datetime import datetime
from typing import Any

import httpx

from tests.faults.config import (
    EXCLUSIVE,
    EXCLUSIVE_KEY,
    NAMESPACE,
    SIMPLE,
    CampaignConfig,
    HarnessError,
)
from tests.faults.history import AckAttempt, Delivery, EnqueueAck, History
from tests.faults.servers import ServerProcess


def _timestamp(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


class Workload:
    """Producers and consumers against both servers, recording everything into the history."""

    def __init__(
        self,
        config: CampaignConfig,
        servers: list[ServerProcess],
        history: History,
        token: str,
        deadline: float,
    ) -> None:
        self.config = config
        self.servers = servers
        self.history = history
        self.rng = random.Random(config.seed)
        self.deadline = deadline
        self.clients = {
            s.name: httpx.AsyncClient(
                base_url=f"{s.base}/v1/namespaces/{NAMESPACE}/queues",
                headers={"Authorization": f"Bearer {token}"},
                timeout=httpx.Timeout(5.0, connect=1.0),
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            )
            for s in servers
        }
        self.stop_producing = asyncio.Event()
        self.stop_consuming = asyncio.Event()
        self.draining = False
        self.stall_tasks: set[asyncio.Task[None]] = set()
        self._next = 0
        self._serial = 0
        self._tasks: list[asyncio.Task[None]] = []

    # --- plumbing

    def pick(self, avoid: str | None = None) -> ServerProcess | None:
        up = [s for s in self.servers if s.up and s.name != avoid] or [
            s for s in self.servers if s.up
        ]
        if not up:
            return None
        self._next += 1
        return up[self._next % len(up)]

    def expired(self) -> bool:
        return time.monotonic() > self.deadline

    async def request(
        self, server: ServerProcess, endpoint: str, path: str, body: dict[str, Any]
    ) -> tuple[int | None, Any, float, float]:
        """POST and record the answer's status; (None, None, …) when no answer came."""
        sent = time.time()
        try:
            answer = await self.clients[server.name].post(path, json=body)
        except httpx.HTTPError as error:
            self.history.statuses[f"{endpoint} {type(error).__name__}"] += 1
            return None, None, sent, time.time()
        received = time.time()
        self.history.statuses[f"{endpoint} {answer.status_code}"] += 1
        if answer.status_code >= 500 and answer.status_code != 503:
            self.history.server_errors.append(
                f"{time.strftime('%H:%M:%S')} {endpoint} on {server.name}: "
                f"{answer.status_code} {answer.text[:300]}"
            )
        try:
            data = answer.json()
        except ValueError:
            data = None
        return answer.status_code, data, sent, received

    def start(self) -> None:
        config = self.config
        for n in range(config.simple_producers):
            self._spawn(self.producer(SIMPLE, f"s{n}"))
        for n in range(config.exclusive_producers):
            self._spawn(self.producer(EXCLUSIVE, f"x{n}"))
        for _ in range(config.simple_consumers):
            self._spawn(self.consumer(SIMPLE))
        for _ in range(config.exclusive_consumers):
            self._spawn(self.consumer(EXCLUSIVE))

    def _spawn(self, coro: Any) -> None:
        self._tasks.append(asyncio.create_task(coro))

    async def stop(self) -> None:
        self.stop_producing.set()
        self.stop_consuming.set()
        tasks = [*self._tasks, *self.stall_tasks]
        _, pending = await asyncio.wait(tasks, timeout=20) if tasks else (set(), set())
        for task in pending:
            task.cancel()
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise HarnessError("a workload task failed") from task.exception()
        for client in self.clients.values():
            await client.aclose()

    async def stop_producers(self) -> None:
        self.stop_producing.set()
        producers = [t for t in self._tasks if t.get_name().startswith("producer")]
        if producers:
            await asyncio.wait(producers, timeout=20)

    # --- producers

    def new_messages(self, queue: str, prefix: str, count: int) -> list[dict[str, Any]]:
        messages = []
        for _ in range(count):
            self._serial += 1
            message: dict[str, Any] = {
                "id": f"{prefix}-{self._serial}",
                "payload": {"n": self._serial},
                "priority": self.rng.randrange(1000),
            }
            if self.rng.random() < 0.1:
                message["delay_seconds"] = 1
            if queue == EXCLUSIVE:
                value = f"v{self.rng.randrange(self.config.exclusive_values)}"
                message["metadata"] = {EXCLUSIVE_KEY: value}
            messages.append(message)
        return messages

    async def producer(self, queue: str, prefix: str) -> None:
        asyncio.current_task().set_name(f"producer {prefix}")  # type: ignore[union-attr]
        while not self.stop_producing.is_set() and not self.expired():
            batch = self.new_messages(queue, prefix, self.rng.randint(1, self.config.batch_max))
            await self.enqueue(queue, batch)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.stop_producing.wait(),
                    self.rng.uniform(0.5, 1.5) * self.config.produce_interval,
                )

    async def enqueue(
        self,
        queue: str,
        messages: list[dict[str, Any]],
        first: ServerProcess | None = None,
        first_retry_delay: float = 0.0,
    ) -> list[str]:
        """Enqueue a batch, retrying with the same ids until a 2xx (bounded: 10 s, 40 tries).

        ``first`` is the server of the first attempt; ``first_retry_delay`` holds back the first
        retry. Returns the outcome of every attempt (``201``, ``503``, ``ReadError``, ...).
        """
        now = time.time()
        keys = [(queue, m["id"]) for m in messages]
        for key in keys:
            self.history.attempted.setdefault(key, now)
        outcomes: list[str] = []
        give_up = time.monotonic() + 10
        server = first
        for _ in range(40):
            if time.monotonic() > give_up or self.expired():
                break
            server = server or self.pick()
            if server is None:
                await asyncio.sleep(0.1)
                continue
            status, data, _, received = await self.request(
                server, "enqueue", f"/{queue}/messages", {"messages": messages}
            )
            outcomes.append(str(status) if status is not None else "no answer")
            if status is not None and 200 <= status < 300:
                for item in data["messages"]:
                    self.history.enqueues.append(
                        EnqueueAck(
                            queue, item["id"], item["created"], item["state"], server.name, received
                        )
                    )
                return outcomes
            if status is not None and status < 500 and status != 429:
                self.history.rejected.append(f"enqueue {queue}: {status} {data}")
                break
            server = self.pick(avoid=server.name)
            await asyncio.sleep(self.rng.uniform(0.05, 0.2) + first_retry_delay)
            first_retry_delay = 0.0
        self.history.unacknowledged.update(keys)
        return outcomes

    # --- consumers

    async def consumer(self, queue: str) -> None:
        lease = self.config.lease_seconds
        while not self.stop_consuming.is_set() and not self.expired():
            server = self.pick()
            if server is None:
                await asyncio.sleep(0.1)
                continue
            count = 20 if self.draining else self.rng.randint(1, 5)
            body = {"count": count, "lease_seconds": lease, "wait_seconds": 1}
            status, data, sent, received = await self.request(
                server, "dequeue", f"/{queue}/dequeue", body
            )
            if status != 200:
                await asyncio.sleep(self.rng.uniform(0.05, 0.2))
                continue
            deliveries = [
                Delivery(
                    queue=queue,
                    id=m["id"],
                    lease_id=m["lease_id"],
                    attempt=m["attempt"],
                    server=server.name,
                    requested=sent,
                    received=received,
                    lease_expires_at=_timestamp(m["lease_expires_at"]),
                    lease_seconds=lease,
                    exclusive_value=m["metadata"].get(EXCLUSIVE_KEY)
                    if queue == EXCLUSIVE
                    else None,
                )
                for m in data["messages"]
            ]
            self.history.deliveries += deliveries
            await self.process(queue, deliveries)

    def intent(self) -> str:
        if self.draining:
            return "drain"
        roll = self.rng.random()
        if roll < 0.08:
            return "fail"
        if roll < 0.12:
            return "die"
        if roll < 0.16 and len(self.stall_tasks) < 8:
            return "stall"
        return "complete"

    async def process(self, queue: str, deliveries: list[Delivery]) -> None:
        for d in deliveries:
            d.intent = self.intent()
        for d in deliveries:
            if d.intent == "stall":
                task = asyncio.create_task(self.stall(queue, d))
                self.stall_tasks.add(task)
                task.add_done_callback(self.stall_tasks.discard)
        todo = [d for d in deliveries if d.intent in ("complete", "fail", "drain")]
        if not todo:
            return
        if self.draining:
            batch = True  # the drain only needs throughput
        else:
            batch = len(todo) > 1 and self.rng.random() < 0.25
            for _ in todo:
                await asyncio.sleep(self.rng.uniform(0.0, 0.08))  # the work
        if batch:
            todo = await self.ack_batch(queue, todo)
        for d in todo:
            await self.ack(queue, d, "fail" if d.intent == "fail" else "complete")

    async def stall(self, queue: str, d: Delivery) -> None:
        """A consumer that pauses past its lease (GC, swap...), then tries to complete."""
        await asyncio.sleep(max(0.0, d.lease_expires_at - time.time()) + self.rng.uniform(0.2, 0.6))
        await self.ack(queue, d, "complete")

    async def ack(self, queue: str, d: Delivery, kind: str) -> None:
        """Complete or fail one lease; retry only while the outcome is unknown (bounded)."""
        give_up = d.lease_expires_at + 1.0
        avoid = None
        for attempt in range(5):
            server = self.pick(avoid=avoid)
            if server is None:
                await asyncio.sleep(0.1)
                continue
            body: dict[str, Any] = {"lease_id": d.lease_id}
            if kind == "fail":
                body["error"] = "harness nack"
            status, data, sent, received = await self.request(
                server, kind, f"/{queue}/messages/{d.id}/{kind}", body
            )
            code = data.get("error", {}).get("code") if isinstance(data, dict) else None
            d.acks.append(
                AckAttempt(kind, sent, received if status else None, status, code, server.name)
            )
            if status is not None and status < 500 and status != 429:
                return
            if time.time() > give_up or self.expired():
                return
            avoid = server.name
            await asyncio.sleep(0.1 * (attempt + 1))

    async def ack_batch(self, queue: str, todo: list[Delivery]) -> list[Delivery]:
        """POST …/ack for all of them; returns those whose outcome stayed unknown."""
        server = self.pick()
        if server is None:
            return todo
        body = {
            "complete": [{"id": d.id, "lease_id": d.lease_id} for d in todo if d.intent != "fail"],
            "fail": [
                {"id": d.id, "lease_id": d.lease_id, "error": "harness nack"}
                for d in todo
                if d.intent == "fail"
            ],
        }
        status, data, sent, received = await self.request(server, "ack", f"/{queue}/ack", body)
        if status != 200:
            for d in todo:
                kind = "fail" if d.intent == "fail" else "complete"
                d.acks.append(AckAttempt(kind, sent, None, status, None, server.name, "batch"))
            return todo if status is None or status >= 500 else []
        results = data["results"]
        items = [d for d in todo if d.intent != "fail"] + [d for d in todo if d.intent == "fail"]
        for d, item in zip(items, results, strict=True):
            kind = "fail" if d.intent == "fail" else "complete"
            assert item["id"] == d.id
            status_code = 200 if item["ok"] else 409 if item["error"] == "lease_mismatch" else 404
            d.acks.append(
                AckAttempt(
                    kind, sent, received, status_code, item.get("error"), server.name, "batch"
                )
            )
        return []
