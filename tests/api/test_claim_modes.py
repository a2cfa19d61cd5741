"""The claim's modes over HTTP: OR filters (a list of values in a dequeue's ``metadata``) on
``POST …/dequeue``, the ack's next dequeue and a long poll, refused with the offending value
named; and a queue's ``ordering``, fixed at creation, shown and described in OpenAPI."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.api.conftest import Caller, assert_error
from tests.api.messages import dequeue, enqueue

BASE = "/v1/namespaces/alpha/queues"


async def test_a_list_in_the_dequeue_filter_matches_any_of_its_values(alpha: Caller) -> None:
    queue = f"{BASE}/tags"
    assert (await alpha.put(queue, json={"filter_key": "tag"})).status_code == 201
    await enqueue(
        alpha,
        queue,
        {"id": "a", "priority": 3, "metadata": {"tag": "A"}},
        {"id": "b", "priority": 1, "metadata": {"tag": "B"}},
        {"id": "c", "priority": 2, "metadata": {"tag": "C"}},
        {"id": "a2", "priority": 4, "metadata": {"tag": "A", "env": "prod"}},
    )

    leased = await dequeue(alpha, queue, count=10, metadata={"tag": ["A", "B"]})
    assert [m["id"] for m in leased] == ["b", "a", "a2"]
    response = await alpha.post(
        f"{queue}/ack",
        json={
            "complete": [{"id": m["id"], "lease_id": m["lease_id"]} for m in leased],
            "dequeue": {"count": 5, "metadata": {"tag": ["C", "D"]}},
        },
    )
    assert response.status_code == 200, response.text
    assert [m["id"] for m in response.json()["messages"]] == ["c"]
    # A long poll with a list: answered at once when one is ready.
    await enqueue(alpha, queue, {"id": "d", "metadata": {"tag": "D"}})
    polled = await dequeue(alpha, queue, wait_seconds=5, metadata={"tag": ["X", "D"]})
    assert [m["id"] for m in polled] == ["d"]


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        ({"tag": ["A", "B", "C", "\u0000"]}, "metadata.tag[3]"),
        ({"tag": []}, "metadata.tag"),
        ({"tag": [f"v{i}" for i in range(33)]}, "metadata.tag"),
        ({"tag": [1, 2]}, "metadata"),
        ({"tag": {"A": "B"}}, "metadata"),
        ({"a": ["1", "2", "3", "4", "5", "6"], "b": ["1", "2", "3", "4", "5", "6"]}, "metadata"),
    ],
)
async def test_a_bad_list_is_a_400_naming_it(
    alpha: Caller, queue: str, metadata: dict[str, Any], field: str
) -> None:
    await enqueue(alpha, queue, {"id": "m", "metadata": {"tag": "A"}})

    response = await alpha.post(f"{queue}/dequeue", json={"metadata": metadata})
    assert_error(response, 400, "validation_error", field)
    response = await alpha.post(
        f"{queue}/ack", json={"complete": [], "dequeue": {"metadata": metadata}}
    )
    assert_error(response, 400, "validation_error", f"dequeue.{field}")
    assert [m["id"] for m in await dequeue(alpha, queue)] == ["m"]  # nothing was leased


async def test_ordering_is_set_at_creation_shown_and_fixed(alpha: Caller) -> None:
    queue = f"{BASE}/due"
    created = await alpha.put(queue, json={"ordering": "due"})
    assert created.status_code == 201, created.text
    assert created.json()["ordering"] == "due"
    assert (await alpha.get(queue)).json()["ordering"] == "due"
    listed = (await alpha.get(BASE)).json()["queues"]
    assert [q["ordering"] for q in listed if q["name"] == "due"] == ["due"]

    for changed in ({}, {"ordering": "priority"}):
        assert_error(await alpha.put(queue, json=changed), 409, "conflict")
    assert_error(
        await alpha.patch(queue, json={"ordering": "priority"}), 400, "validation_error", "ordering"
    )
    assert_error(
        await alpha.put(f"{BASE}/bad", json={"ordering": "fifo"}),
        400,
        "validation_error",
        "ordering",
    )
    assert (await alpha.put(queue, json={"ordering": "due", "lease_seconds": 9})).status_code == 200


async def test_a_due_ordered_queue_serves_by_visible_time_first(alpha: Caller) -> None:
    now = datetime.now(UTC)
    for name, ordering in (("by-priority", "priority"), ("by-due", "due")):
        queue = f"{BASE}/{name}"
        await alpha.put(queue, json={"ordering": ordering})
        # The same priority for all; "late" is enqueued first but became visible last.
        await enqueue(alpha, queue, {"id": "late", "priority": 0, "visible_at": _ago(now, 1)})
        await enqueue(
            alpha,
            queue,
            *({"id": f"b{i}", "priority": 0, "visible_at": _ago(now, 10)} for i in range(3)),
        )
    by_priority = await dequeue(alpha, f"{BASE}/by-priority", count=10)
    by_due = await dequeue(alpha, f"{BASE}/by-due", count=10)
    assert [m["id"] for m in by_priority] == ["late", "b0", "b1", "b2"]
    assert [m["id"] for m in by_due] == ["b0", "b1", "b2", "late"]


def _ago(now: datetime, seconds: int) -> str:
    return (now - timedelta(seconds=seconds)).isoformat()


async def test_openapi_describes_the_ordering_and_the_lists(anonymous: Caller) -> None:
    doc = (await anonymous.get("/schema/openapi.json")).json()

    def body(path: str, method: str) -> dict[str, Any]:
        schema = doc["paths"][path][method]["requestBody"]["content"]["application/json"]
        found: dict[str, Any] = schema["schema"]
        while "$ref" in found:
            found = doc["components"]["schemas"][found["$ref"].rsplit("/", 1)[1]]
        return found

    put = body("/v1/namespaces/{ns}/queues/{queue}", "put")
    assert set(put["properties"]["ordering"]["enum"]) == {"priority", "due"}
    wanted = body("/v1/namespaces/{ns}/queues/{queue}/dequeue", "post")["properties"]["metadata"]
    assert {"type": "string"} in wanted["additionalProperties"]["anyOf"]
    assert {"type": "array", "items": {"type": "string"}} in wanted["additionalProperties"]["anyOf"]
