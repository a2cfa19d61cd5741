"""The client's lease by id, enqueue with ``on_conflict="replace"`` and ``create_queue``, sync and
async, and the same from the command line (``sundial lease``, ``sundial enqueue --replace
--create-queue``), against a real server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.client import AsyncClient, Client, InvalidState, NewMessage, NotFound, QueuePaused
from tests.client.conftest import Sundial


def test_lease_a_message_by_its_id(q: str, client: Client) -> None:
    client.put_queue(q, kind="exclusive", exclusive_key="project")
    client.enqueue_many(
        q,
        [
            NewMessage(id="w1", payload=1, metadata={"project": "web"}),
            NewMessage(id="w2", payload=2, metadata={"project": "web"}),
        ],
    )
    leased = client.lease_message(q, "w2", lease_seconds=120)
    assert (leased.id, leased.payload, leased.attempt) == ("w2", 2, 1)
    with pytest.raises(InvalidState) as busy:
        client.lease_message(q, "w1")
    assert busy.value.details == {"state": "pending", "exclusive_value": "web"}
    with pytest.raises(InvalidState):
        client.lease_message(q, "w2")  # running
    with pytest.raises(NotFound):
        client.lease_message(q, "ghost")
    client.complete(q, "w2", leased.lease_id)
    client.update_queue(q, dequeue_paused=True)
    with pytest.raises(QueuePaused):
        client.lease_message(q, "w1")


def test_replace_a_waiting_message_and_create_the_queue_on_first_publish(
    q: str, client: Client
) -> None:
    first = client.enqueue(q, "old", id="a", create_queue=True)
    assert (first.created, first.replaced) == (True, False)
    assert client.get_queue(q).max_attempts == 3  # the defaults
    kept = client.enqueue(q, "new", id="a")
    assert (kept.created, kept.replaced, client.get_message(q, "a").payload) == (
        False,
        False,
        "old",
    )
    replaced = client.enqueue(q, "new", id="a", on_conflict="replace")
    assert (replaced.created, replaced.replaced, replaced.state) == (False, True, "pending")
    assert client.get_message(q, "a").payload == "new"
    [leased] = client.dequeue(q)
    outcomes = client.enqueue_many(
        q, [NewMessage(id="a", payload="newer"), NewMessage(id="b")], on_conflict="replace"
    )
    assert [(o.created, o.replaced, o.state) for o in outcomes] == [
        (False, False, "running"),
        (True, False, "pending"),
    ]
    assert client.get_message(q, "a").payload == leased.payload == "new"


async def test_the_async_client_does_the_same(q: str, aclient: AsyncClient) -> None:
    created = await aclient.enqueue(q, 1, id="a", create_queue=True)
    assert created.created
    [outcome] = await aclient.enqueue_many(
        q, [NewMessage(id="a", payload=2)], on_conflict="replace", create_queue=True
    )
    assert outcome.replaced
    leased = await aclient.lease_message(q, "a")
    assert (leased.id, leased.payload) == ("a", 2)
    with pytest.raises(InvalidState):
        await aclient.lease_message(q, "a")


def test_the_command_line(q: str, sundial: Sundial, client: Client, tmp_path: Path) -> None:
    made = sundial("enqueue", q, "--id", "a", "--payload", "1", "--create-queue", "--json").stdout
    assert json.loads(made) == {"id": "a", "state": "pending", "created": True}
    out = sundial("enqueue", q, "--id", "a", "--payload", "2", "--replace", "--json").stdout
    assert json.loads(out) == {"id": "a", "state": "pending", "created": False, "replaced": True}
    assert "replaced" in sundial("enqueue", q, "--id", "a", "--payload", "3", "--replace").stdout
    path = tmp_path / "messages.jsonl"
    path.write_text('{"id": "a", "payload": 4}\n{"id": "b"}\n')
    counts = sundial("enqueue", q, "--file", str(path), "--replace", "--json").stdout
    assert json.loads(counts) == {"created": 1, "existing": 1, "replaced": 1}
    leased = json.loads(sundial("lease", q, "a", "--lease", "60", "--json").stdout)
    assert (leased["id"], leased["payload"]) == ("a", 4)
    assert "invalid_state" in sundial("lease", q, "a", code=1).output
    table = sundial("lease", q, "b").stdout
    assert " b " in table
    done = json.loads(sundial("ack", q, "a", leased["lease_id"], "--json").stdout)
    assert done["state"] == "completed"
