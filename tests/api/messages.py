"""What the message tests of the API share: the fields a message and a lease show, the queues,
enqueue and dequeue calls many of them start with, and a message read back."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tests.api.conftest import Caller

MESSAGE_FIELDS = {
    "id", "state", "priority", "payload", "metadata", "attempts", "max_attempts",
    "lease_seconds", "lease_id", "lease_expires_at", "visible_at", "expires_at", "enqueued_at",
    "updated_at", "finished_at", "last_error", "exclusive_value",
}  # fmt: skip
LEASED_FIELDS = {
    "id", "lease_id", "lease_expires_at", "attempt", "priority", "payload", "metadata",
    "enqueued_at", "remaining_attempts", "expires_at", "ttl_remaining_seconds", "waited_seconds",
}  # fmt: skip


async def make_queues(caller: Caller, *names: str, **config: Any) -> None:
    """Create the queues ``names`` of namespace ``alpha``, each with ``config`` (201 expected)."""
    for name in names:
        response = await caller.put(f"/v1/namespaces/alpha/queues/{name}", json=config)
        assert response.status_code == 201, response.text


async def enqueue(caller: Caller, queue: str, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    """Enqueue ``messages`` into ``queue`` (201 expected); the answer's per-message outcomes."""
    response = await caller.post(f"{queue}/messages", json={"messages": list(messages)})
    assert response.status_code == 201, response.text
    result: list[dict[str, Any]] = response.json()["messages"]
    return result


async def dequeue(caller: Caller, queue: str, **body: Any) -> list[dict[str, Any]]:
    """Dequeue from ``queue`` with this request ``body`` (200 expected); the leased messages."""
    response = await caller.post(f"{queue}/dequeue", json=body)
    assert response.status_code == 200, response.text
    result: list[dict[str, Any]] = response.json()["messages"]
    return result


async def get_message(caller: Caller, queue: str, message_id: str) -> dict[str, Any]:
    """The message ``message_id`` of ``queue`` as ``GET`` shows it (200 expected)."""
    response = await caller.get(f"{queue}/messages/{message_id}")
    assert response.status_code == 200, response.text
    message: dict[str, Any] = response.json()
    return message


def parse(stamp: str) -> datetime:
    """A timestamp of the API's answers, as a datetime."""
    return datetime.fromisoformat(stamp)
