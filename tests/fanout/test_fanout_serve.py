"""An unsubscribe applies to every publish sent after its answer, across real server processes.

Two servers (the first with two workers) share one database, as in tests/test_coherence_serve.py.
Keep-alive connections spread over both publish to a topic of two queues; once an unsubscribe
is answered, no publish sent after it reaches the unsubscribed queue, whichever process serves
it, and every publish before reached both queues whole.
"""

from __future__ import annotations

import itertools
import threading

import httpx
import pytest

from tests.test_coherence_serve import created, hammer, http_clients, new_token, servers

__all__ = ["servers"]

TOPIC = "/v1/namespaces/shop/topics/orders"


@pytest.mark.slow
def test_unsubscribe_applies_at_once_in_every_process(
    servers: tuple[list[str], httpx.Client],
) -> None:
    bases, admin = servers
    created(admin.post("/v1/namespaces", json={"name": "shop"}))
    for queue in ("billing", "audit"):
        created(admin.put(f"/v1/namespaces/shop/queues/{queue}", json={}))
    created(admin.put(TOPIC, json={"subscriptions": ["billing", "audit"]}))
    secret, _ = new_token(admin, "shop")
    numbers = itertools.count()
    lock = threading.Lock()

    def publish(client: httpx.Client, _: int) -> tuple[str, frozenset[str]]:
        with lock:
            message_id = f"m{next(numbers)}"
        answer = client.post(f"{TOPIC}/messages", json={"messages": [{"id": message_id}]})
        assert answer.status_code == 201, answer.text
        [outcome] = answer.json()["messages"]
        return message_id, frozenset(q["queue"] for q in outcome["queues"])

    with http_clients(bases, secret) as clients:
        seen = hammer(
            clients,
            publish,
            lambda: created(admin.delete(f"{TOPIC}/subscriptions/audit")),
        )

    assert {queues for _, queues in seen.before} == {frozenset({"billing", "audit"})}
    assert {queues for _, queues in seen.after} == {frozenset({"billing"})}, seen.after
    stored = {
        queue: {
            m["id"]
            for m in admin.get(
                f"/v1/namespaces/shop/queues/{queue}/messages", params={"limit": 1000}
            ).json()["messages"]
        }
        for queue in ("billing", "audit")
    }
    assert stored["audit"] == {message_id for message_id, _ in seen.before}
    assert stored["billing"] == {message_id for message_id, _ in [*seen.before, *seen.after]}
