"""One message as a resource over HTTP: get, patch and delete, and what a delete does to the
message's lease."""

from __future__ import annotations

from tests.api.conftest import PAYLOAD_LIMIT, Caller, assert_error
from tests.api.messages import MESSAGE_FIELDS, dequeue, enqueue, parse


async def test_get_patch_delete_message(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a", "priority": 3, "payload": [1], "ttl_seconds": 3600})
    response = await alpha.get(f"{queue}/messages/a")
    assert response.status_code == 200
    message = response.json()
    assert set(message) == MESSAGE_FIELDS
    assert message["state"] == "pending"
    assert message["attempts"] == 0
    assert message["max_attempts"] == 3
    assert message["lease_seconds"] == 30
    assert message["lease_id"] is None
    assert message["expires_at"] is not None
    for stamp in ("visible_at", "enqueued_at", "updated_at", "expires_at"):
        assert parse(message[stamp]).tzinfo is not None

    url = f"{queue}/messages/a"
    visible_at = "2099-01-01T00:00:00+00:00"
    patched = await alpha.patch(
        url,
        json={"priority": 1, "payload": {"v": 2}, "metadata": {"k": "v"}, "visible_at": visible_at},
    )
    assert patched.status_code == 200
    body = patched.json()
    assert (body["priority"], body["payload"], body["metadata"]) == (1, {"v": 2}, {"k": "v"})
    assert body["state"] == "invisible"
    assert parse(body["visible_at"]) == parse(visible_at)
    assert (await alpha.patch(url, json={"payload": None})).json()["payload"] is None
    assert (await alpha.patch(url, json={})).json()["priority"] == 1
    assert_error(
        await alpha.patch(url, json={"priority": "1"}), 400, "validation_error", "priority"
    )
    assert_error(
        await alpha.patch(url, json={"state": "pending"}), 400, "validation_error", "state"
    )
    assert_error(
        await alpha.patch(url, json={"payload": "x" * PAYLOAD_LIMIT}), 413, "payload_too_large"
    )

    await alpha.patch(url, json={"visible_at": "2000-01-01T00:00:00Z"})
    await dequeue(alpha, queue)
    assert_error(await alpha.patch(url, json={"priority": 0}), 409, "invalid_state")

    assert (await alpha.delete(url)).status_code == 204
    assert_error(await alpha.get(url), 404, "not_found")
    assert_error(await alpha.delete(url), 404, "not_found")
    assert_error(await alpha.patch(url, json={}), 404, "not_found")


async def test_delete_running_message_invalidates_lease(alpha: Caller, queue: str) -> None:
    await enqueue(alpha, queue, {"id": "a"})
    (leased,) = await dequeue(alpha, queue)
    assert (await alpha.delete(f"{queue}/messages/a")).status_code == 204
    response = await alpha.post(
        f"{queue}/messages/a/complete", json={"lease_id": leased["lease_id"]}
    )
    assert_error(response, 404, "not_found")
