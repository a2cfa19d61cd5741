"""Per-token rate limits across real server processes: a server with two worker processes and a
second server share one database (the embedded default's). The limit is counted in PostgreSQL,
so the token gets its allowance once, not once per process; a change of it, made through one
server, applies to the very next request on every connection of every process.

The limit used is one request per 100 s: a token's first request of a kind is allowed and every
other one within the test is refused, whatever the machine's speed (no wall-clock boundary).
"""

from __future__ import annotations

import httpx
import pytest

from tests.test_coherence_serve import created, http_clients, new_token, servers

__all__ = ["servers"]

ROUNDS = 4
SLOW = 0.01  # requests per second
QUEUES = "/v1/namespaces/shop/queues"
MESSAGES = f"{QUEUES}/jobs/messages"


def statuses(clients: list[httpx.Client], send: str) -> list[int]:
    """ROUNDS requests on every connection, in turn: a read (GET) or a write (an enqueue)."""
    found = []
    for _ in range(ROUNDS):
        for client in clients:
            if send == "read":
                answer = client.get(QUEUES)
            else:
                answer = client.post(MESSAGES, json={"messages": [{}]})
            if answer.status_code == 429:
                assert answer.json()["error"]["code"] == "rate_limited"
                assert 1 <= int(answer.headers["Retry-After"]) <= 100
            found.append(answer.status_code)
    return found


@pytest.mark.slow
def test_a_token_limit_holds_across_processes_and_changes_at_once(
    servers: tuple[list[str], httpx.Client],
) -> None:
    bases, admin = servers
    created(admin.post("/v1/namespaces", json={"name": "shop"}))
    created(admin.put(f"{QUEUES}/jobs", json={}))
    secret, token_id = new_token(admin, "shop")
    limits = f"/v1/namespaces/shop/tokens/{token_id}"
    with http_clients(bases, secret) as clients:
        # Unlimited: every process serves it (and now remembers the token as unlimited).
        assert set(statuses(clients, "read")) == {200}

        # Limited through the other server: one read in all, wherever it lands.
        with httpx.Client(base_url=bases[1], headers=admin.headers, timeout=30) as other:
            answer = created(other.patch(limits, json={"read_rate": SLOW}))
            assert answer.json()["read_rate"] == SLOW
        reads = statuses(clients, "read")
        assert sorted(set(reads)) == [200, 429]
        assert reads.count(200) == 1, reads
        assert set(statuses(clients, "write")) == {201}  # writes have no limit

        # Writes limited, reads lifted: at once, everywhere.
        created(admin.patch(limits, json={"read_rate": None, "write_rate": SLOW}))
        assert set(statuses(clients, "read")) == {200}
        writes = statuses(clients, "write")
        assert writes.count(201) == 1, writes
        assert set(writes) == {201, 429}
