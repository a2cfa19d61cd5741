"""Queues: PUT (create / idempotent update), GET one and all, PATCH, DELETE, purge."""

from __future__ import annotations

from tests.api.conftest import Caller, assert_error

BASE = "/v1/namespaces/alpha/queues"
STATES = {"invisible", "pending", "running", "completed", "canceled", "errored"}
CONFIG = {
    "kind": "simple",
    "exclusive_key": None,
    "filter_key": None,
    "filter_keys": [],
    "ordering": "priority",
    "lease_seconds": 30,
    "delay_seconds": 0,
    "max_attempts": 3,
    "retry_delay_seconds": 0,
    "retry_delay_max_seconds": 3600,
    "retention_seconds": 604800,
    "enqueue_paused": False,
    "dequeue_paused": False,
    "dead_letter_queue": None,
}


async def test_put_creates_then_is_idempotent(alpha: Caller) -> None:
    response = await alpha.put(f"{BASE}/q", json={})
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {*CONFIG, "name", "namespace", "created_at", "updated_at"}
    assert {k: body[k] for k in CONFIG} == CONFIG
    assert (body["name"], body["namespace"]) == ("q", "alpha")

    again = await alpha.put(f"{BASE}/q", json={})
    assert again.status_code == 200
    assert again.json() == body

    changed = await alpha.put(f"{BASE}/q", json={"lease_seconds": 60, "max_attempts": 5})
    assert changed.status_code == 200
    assert changed.json()["lease_seconds"] == 60
    assert changed.json()["max_attempts"] == 5
    # PUT is the whole configuration: what is left out goes back to its default.
    reset = await alpha.put(f"{BASE}/q", json={"max_attempts": 5})
    assert reset.json()["lease_seconds"] == 30


async def test_put_cannot_change_kind_or_key(alpha: Caller) -> None:
    await alpha.put(f"{BASE}/q", json={})
    response = await alpha.put(f"{BASE}/q", json={"kind": "exclusive", "exclusive_key": "p"})
    assert_error(response, 409, "conflict")
    await alpha.put(f"{BASE}/x", json={"kind": "exclusive", "exclusive_key": "p"})
    response = await alpha.put(f"{BASE}/x", json={"kind": "exclusive", "exclusive_key": "other"})
    assert_error(response, 409, "conflict")
    await alpha.put(f"{BASE}/f", json={"filter_key": "tenant"})
    for changed in ({}, {"filter_key": "region"}):
        response = await alpha.put(f"{BASE}/f", json=changed)
        assert_error(response, 409, "conflict")
    response = await alpha.patch(f"{BASE}/f", json={"filter_key": "region"})
    assert_error(response, 400, "validation_error", "filter_key")
    assert (await alpha.get(f"{BASE}/f")).json()["filter_key"] == "tenant"
    # A second key cannot be added later, nor the keys reordered.
    for changed in ({"filter_keys": ["tenant", "region"]}, {"filter_keys": ["region", "tenant"]}):
        response = await alpha.put(f"{BASE}/f", json=changed)
        assert_error(response, 409, "conflict")
    response = await alpha.patch(f"{BASE}/f", json={"filter_keys": ["tenant", "region"]})
    assert_error(response, 400, "validation_error", "filter_keys")


async def test_two_filter_keys(alpha: Caller) -> None:
    created = await alpha.put(f"{BASE}/two", json={"filter_keys": ["tenant", "region"]})
    assert created.status_code == 201
    assert (created.json()["filter_key"], created.json()["filter_keys"]) == (
        "tenant",
        ["tenant", "region"],
    )
    # filter_key alongside filter_keys is the same first key: the same configuration.
    same = {"filter_key": "tenant", "filter_keys": ["tenant", "region"]}
    assert (await alpha.put(f"{BASE}/two", json=same)).status_code == 200
    one = await alpha.put(f"{BASE}/one", json={"filter_keys": ["tenant"]})
    assert one.json()["filter_key"] == "tenant"
    assert (await alpha.put(f"{BASE}/one", json={"filter_key": "tenant"})).status_code == 200


async def test_put_validation(alpha: Caller) -> None:
    response = await alpha.put(f"{BASE}/q", json={"kind": "exclusive"})
    assert_error(response, 400, "validation_error", "exclusive_key")
    response = await alpha.put(f"{BASE}/q", json={"kind": "fifo"})
    assert_error(response, 400, "validation_error", "kind")
    response = await alpha.put(f"{BASE}/q", json={"lease_seconds": 0})
    assert_error(response, 400, "validation_error", "lease_seconds")
    response = await alpha.put(f"{BASE}/q", json={"lease_seconds": "30"})
    assert_error(response, 400, "validation_error", "lease_seconds")
    response = await alpha.put(f"{BASE}/q", json={"enqueue_paused": 1})
    assert_error(response, 400, "validation_error", "enqueue_paused")
    response = await alpha.put(f"{BASE}/q", json={"filter_key": ""})
    assert_error(response, 400, "validation_error", "filter_key")
    response = await alpha.put(f"{BASE}/q", json={"filter_key": "k" * 65})
    assert_error(response, 400, "validation_error", "filter_key")
    for keys in (["a", "b", "c"], ["a", "a"], ["a", ""], ["k" * 65], "a"):
        response = await alpha.put(f"{BASE}/q", json={"filter_keys": keys})
        assert_error(response, 400, "validation_error", "filter_keys")
    response = await alpha.put(f"{BASE}/q", json={"filter_keys": ["a", 1]})
    assert_error(response, 400, "validation_error", "filter_keys[1]")
    response = await alpha.put(f"{BASE}/q", json={"filter_key": "a", "filter_keys": ["b", "a"]})
    assert_error(response, 400, "validation_error", "filter_keys")
    assert (await alpha.get(f"{BASE}/q")).status_code == 404  # nothing half-applied
    response = await alpha.put(f"{BASE}/q", json={"color": "red"})
    assert_error(response, 400, "validation_error", "color")
    response = await alpha.put(f"{BASE}/bad name!", json={})
    assert_error(response, 400, "validation_error", "queue")


async def test_put_in_missing_namespace_is_404(admin: Caller) -> None:
    response = await admin.put("/v1/namespaces/nowhere/queues/q", json={})
    assert_error(response, 404, "not_found")


async def test_get_and_list_with_counts(alpha: Caller) -> None:
    await alpha.put(f"{BASE}/b", json={})
    await alpha.put(f"{BASE}/a", json={"kind": "exclusive", "exclusive_key": "project"})
    await alpha.post(
        f"{BASE}/b/messages",
        json={"messages": [{"id": "1"}, {"id": "2"}, {"id": "3", "delay_seconds": 60}]},
    )
    await alpha.post(f"{BASE}/b/dequeue", json={})

    response = await alpha.get(BASE)
    assert response.status_code == 200
    queues = response.json()["queues"]
    assert [q["name"] for q in queues] == ["a", "b"]
    assert queues[0]["kind"] == "exclusive"
    assert queues[0]["exclusive_key"] == "project"
    assert queues[0]["counts"] == dict.fromkeys(STATES, 0)
    expected = {**dict.fromkeys(STATES, 0), "invisible": 1, "pending": 1, "running": 1}
    assert queues[1]["counts"] == expected

    response = await alpha.get(f"{BASE}/b")
    assert response.status_code == 200
    detail = response.json()
    assert detail["counts"]["invisible"] == 1
    assert detail["counts"]["pending"] == 1
    assert detail["counts"]["running"] == 1
    assert set(detail["counts"]) == STATES
    assert isinstance(detail["oldest_pending_age_seconds"], float)
    assert detail["oldest_pending_age_seconds"] >= 0

    empty = (await alpha.get(f"{BASE}/a")).json()
    assert empty["oldest_pending_age_seconds"] is None
    assert_error(await alpha.get(f"{BASE}/nope"), 404, "not_found")


async def test_list_in_missing_namespace_is_404(admin: Caller) -> None:
    assert_error(await admin.get("/v1/namespaces/nowhere/queues"), 404, "not_found")


async def test_patch(alpha: Caller) -> None:
    await alpha.put(f"{BASE}/q", json={})
    response = await alpha.patch(f"{BASE}/q", json={"enqueue_paused": True, "lease_seconds": 9})
    assert response.status_code == 200
    body = response.json()
    assert body["enqueue_paused"] is True
    assert body["lease_seconds"] == 9
    assert body["dequeue_paused"] is False
    assert (await alpha.patch(f"{BASE}/q", json={})).json()["lease_seconds"] == 9

    response = await alpha.patch(f"{BASE}/q", json={"kind": "exclusive"})
    assert_error(response, 400, "validation_error", "kind")
    response = await alpha.patch(f"{BASE}/q", json={"lease_seconds": 1.5})
    assert_error(response, 400, "validation_error", "lease_seconds")
    response = await alpha.patch(f"{BASE}/q", json={"retry_delay_seconds": -1})
    assert_error(response, 400, "validation_error", "retry_delay_seconds")
    response = await alpha.patch(f"{BASE}/q", json={"paused": True})
    assert_error(response, 400, "validation_error", "paused")
    assert_error(await alpha.patch(f"{BASE}/nope", json={}), 404, "not_found")


async def test_delete(alpha: Caller) -> None:
    await alpha.put(f"{BASE}/q", json={})
    await alpha.post(f"{BASE}/q/messages", json={"messages": [{"id": "a"}]})
    response = await alpha.delete(f"{BASE}/q")
    assert response.status_code == 204
    assert_error(await alpha.get(f"{BASE}/q"), 404, "not_found")
    assert_error(await alpha.delete(f"{BASE}/q"), 404, "not_found")
    # A queue created again under the same name starts empty.
    await alpha.put(f"{BASE}/q", json={})
    assert_error(await alpha.get(f"{BASE}/q/messages/a"), 404, "not_found")


async def test_purge(alpha: Caller, queue: str) -> None:
    await alpha.post(
        f"{queue}/messages", json={"messages": [{"id": "a"}, {"id": "b"}, {"id": "c"}]}
    )
    (leased,) = (await alpha.post(f"{queue}/dequeue", json={})).json()["messages"]
    response = await alpha.post(f"{queue}/purge", json={"states": ["pending"]})
    assert response.status_code == 200
    assert response.json() == {"deleted": 2}
    assert (await alpha.get(f"{queue}/messages/{leased['id']}")).status_code == 200
    response = await alpha.post(f"{queue}/purge")
    assert response.json() == {"deleted": 1}
    response = await alpha.post(f"{queue}/purge", json={"states": ["done"]})
    assert_error(response, 400, "validation_error", "states[0]")
    assert_error(await alpha.post(f"{BASE}/nope/purge", json={}), 404, "not_found")
