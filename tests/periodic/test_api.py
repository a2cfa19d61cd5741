"""The REST API of periodic jobs end to end: create, read, list, change, pause, trigger, delete;
bad input is a 400 naming the field; unknown namespace, queue or job a 404; a job fires through
the scheduler's tick into its queue, where a consumer dequeues it."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api.conftest import Caller, assert_error, namespace_caller
from tests.periodic.helpers import set_next_run, tick

BASE = "/v1/namespaces/alpha/periodic"
JOB = {
    "queue": "q",
    "schedule": "*/5 * * * *",
    "timezone": "Europe/Paris",
    "payload": {"report": "daily"},
    "metadata": {"kind": "report"},
    "priority": 3,
    "ttl_seconds": 300,
    "max_attempts": 2,
    "lease_seconds": 60,
}
FIELDS = {
    *JOB,
    "namespace",
    "name",
    "paused",
    "next_run_at",
    "last_run_at",
    "last_message_id",
    "last_error",
    "created_at",
    "updated_at",
}


async def test_create_read_list_change_delete(alpha: Caller, queue: str) -> None:
    created = await alpha.put(f"{BASE}/nightly", json=JOB)
    assert created.status_code == 201, created.text
    body = created.json()
    assert set(body) == FIELDS
    assert {k: body[k] for k in JOB} == JOB
    assert (body["name"], body["namespace"], body["paused"]) == ("nightly", "alpha", False)
    assert body["last_run_at"] is None
    assert body["last_error"] is None

    again = await alpha.put(f"{BASE}/nightly", json=JOB)
    assert again.status_code == 200
    assert again.json() == body  # the same spec again changes nothing, updated_at included
    changed = await alpha.put(f"{BASE}/nightly", json={**JOB, "priority": 7})
    assert changed.json()["updated_at"] > body["updated_at"]
    assert changed.json()["next_run_at"] == body["next_run_at"]
    restored = (await alpha.put(f"{BASE}/nightly", json=JOB)).json()
    same = await alpha.patch(f"{BASE}/nightly", json={"paused": False, "priority": 3})
    assert same.json() == restored  # a PATCH that changes nothing leaves updated_at

    got = await alpha.get(f"{BASE}/nightly")
    assert got.status_code == 200
    assert {k: got.json()[k] for k in JOB} == JOB

    await alpha.put(f"{BASE}/hourly", json={"queue": "q", "schedule": "@hourly"})
    listed = await alpha.get(BASE)
    assert [j["name"] for j in listed.json()["periodic"]] == ["hourly", "nightly"]
    assert (await alpha.get(BASE, params={"queue": "other"})).json() == {"periodic": []}
    minimal = (await alpha.get(f"{BASE}/hourly")).json()
    assert minimal["payload"] is None
    assert minimal["timezone"] == "UTC"
    assert minimal["priority"] is None

    paused = await alpha.patch(f"{BASE}/nightly", json={"paused": True, "priority": None})
    assert paused.status_code == 200, paused.text
    assert paused.json()["paused"] is True
    assert paused.json()["priority"] is None
    assert paused.json()["schedule"] == JOB["schedule"]

    rescheduled = await alpha.patch(f"{BASE}/nightly", json={"schedule": "@daily"})
    assert rescheduled.json()["schedule"] == "@daily"
    assert rescheduled.json()["next_run_at"] != body["next_run_at"]

    assert (await alpha.delete(f"{BASE}/nightly")).status_code == 204
    assert_error(await alpha.get(f"{BASE}/nightly"), 404, "not_found")
    assert_error(await alpha.delete(f"{BASE}/nightly"), 404, "not_found")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schedule": "61 * * * *"}, "schedule"),
        ({"schedule": "* * * * * *"}, "schedule"),
        ({"schedule": "@reboot"}, "schedule"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"queue": "no queue"}, "queue"),
        ({"priority": "high"}, "priority"),
        ({"ttl_seconds": 0}, "ttl_seconds"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"lease_seconds": 10**6}, "lease_seconds"),
        ({"metadata": {"k": 1}}, "metadata"),
        ({"extra": 1}, "extra"),
    ],
)
async def test_bad_input_is_a_400_naming_the_field(
    alpha: Caller, queue: str, change: dict[str, object], field: str
) -> None:
    response = await alpha.put(f"{BASE}/job", json={**JOB, **change})
    assert_error(response, 400, "validation_error", field)
    assert_error(await alpha.get(f"{BASE}/job"), 404, "not_found")


async def test_bad_patch_changes_nothing(alpha: Caller, queue: str) -> None:
    await alpha.put(f"{BASE}/job", json=JOB)
    response = await alpha.patch(f"{BASE}/job", json={"paused": True, "schedule": "nope"})
    assert_error(response, 400, "validation_error", "schedule")
    assert (await alpha.get(f"{BASE}/job")).json()["paused"] is False
    assert_error(await alpha.patch(f"{BASE}/nope", json={"paused": True}), 404, "not_found")


async def test_a_bad_name_is_a_400(alpha: Caller, queue: str) -> None:
    assert_error(await alpha.put(f"{BASE}/-bad", json=JOB), 400, "validation_error", "name")


async def test_unknown_queue_or_namespace_is_a_404(
    admin: Caller, alpha: Caller, queue: str
) -> None:
    response = await alpha.put(f"{BASE}/job", json={**JOB, "queue": "missing"})
    assert_error(response, 404, "not_found")
    response = await admin.put("/v1/namespaces/nowhere/periodic/job", json=JOB)
    assert_error(response, 404, "not_found")
    assert_error(await admin.get("/v1/namespaces/nowhere/periodic"), 404, "not_found")
    await alpha.put(f"{BASE}/job", json=JOB)
    response = await alpha.patch(f"{BASE}/job", json={"queue": "missing"})
    assert_error(response, 404, "not_found")


async def test_another_namespace_token_is_refused(admin: Caller, alpha: Caller, queue: str) -> None:
    beta = await namespace_caller(admin, "beta")
    assert_error(await beta.put(f"{BASE}/job", json=JOB), 403, "forbidden")
    assert_error(await beta.get(BASE), 403, "forbidden")


async def test_trigger_and_the_tick_enqueue_messages_a_consumer_gets(
    alpha: Caller, queue: str, engine: AsyncEngine
) -> None:
    await alpha.put(f"{BASE}/job", json={**JOB, "schedule": "* * * * *"})
    triggered = await alpha.post(f"{BASE}/job/trigger")
    assert triggered.status_code == 201, triggered.text
    trigger_id = triggered.json()["id"]
    assert trigger_id.startswith("cron:job:trigger:")

    await set_next_run(engine, "job", "now() - interval '1 second'")
    assert await tick(engine) == 1
    job = (await alpha.get(f"{BASE}/job")).json()
    assert job["last_message_id"].startswith("cron:job:")
    assert job["last_run_at"] is not None

    leased = await alpha.post(f"{queue}/dequeue", json={"count": 10})
    assert leased.status_code == 200, leased.text
    messages = leased.json()["messages"]
    assert {m["id"] for m in messages} == {trigger_id, job["last_message_id"]}
    assert all(m["payload"] == {"report": "daily"} for m in messages)
    assert all(m["metadata"] == {"kind": "report"} for m in messages)


async def test_trigger_of_a_paused_queue_is_a_409(alpha: Caller, queue: str) -> None:
    await alpha.put(f"{BASE}/job", json=JOB)
    await alpha.patch(queue, json={"enqueue_paused": True})
    assert_error(await alpha.post(f"{BASE}/job/trigger"), 409, "queue_paused")
    assert_error(await alpha.post(f"{BASE}/nope/trigger"), 404, "not_found")


async def test_trigger_missing_an_exclusive_key_is_a_400_whatever_the_queue_name(
    alpha: Caller,
) -> None:
    exclusive = {"kind": "exclusive", "exclusive_key": "tenant"}
    created = await alpha.put("/v1/namespaces/alpha/queues/held-paused", json=exclusive)
    assert created.status_code == 201, created.text
    await alpha.put(f"{BASE}/job", json={**JOB, "queue": "held-paused"})
    assert_error(await alpha.post(f"{BASE}/job/trigger"), 400, "validation_error", "metadata")


async def test_the_routes_are_in_the_openapi_document(alpha: Caller) -> None:
    document = (await alpha.get("/schema/openapi.json")).json()
    paths = document["paths"]
    assert {"put", "get", "patch", "delete"} <= set(paths["/v1/namespaces/{ns}/periodic/{name}"])
    assert "get" in paths["/v1/namespaces/{ns}/periodic"]
    assert "post" in paths["/v1/namespaces/{ns}/periodic/{name}/trigger"]
    assert "PeriodicOut" in document["components"]["schemas"]
