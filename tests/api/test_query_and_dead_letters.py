"""A queue's messages over HTTP: the query (filters, order, cursors, validation) and the requeue
of dead letters."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Caller, assert_error
from tests.api.messages import MESSAGE_FIELDS, dequeue, enqueue


async def test_query(alpha: Caller, queue: str) -> None:
    await enqueue(
        alpha,
        queue,
        *({"id": f"m{i}", "priority": i, "metadata": {"even": str(i % 2 == 0)}} for i in range(7)),
    )
    await dequeue(alpha, queue, count=2)  # m0, m1 running
    url = f"{queue}/messages"

    page = (await alpha.get(url)).json()
    assert [m["id"] for m in page["messages"]] == [f"m{i}" for i in reversed(range(7))]
    assert page["next_cursor"] is None
    assert set(page["messages"][0]) == MESSAGE_FIELDS

    def ids(response: Any) -> list[str]:
        assert response.status_code == 200, response.text
        return [m["id"] for m in response.json()["messages"]]

    assert ids(await alpha.get(url, params={"state": "running"})) == ["m1", "m0"]
    assert ids(await alpha.get(url, params=[("state", "running"), ("state", "completed")])) == [
        "m1",
        "m0",
    ]
    assert len(ids(await alpha.get(url, params={"state": "running,pending"}))) == 7
    assert ids(await alpha.get(url, params={"metadata.even": "True", "state": "pending"})) == [
        "m6",
        "m4",
        "m2",
    ]
    params = {"priority_gte": "2", "priority_lt": "5", "order": "priority"}
    assert ids(await alpha.get(url, params=params)) == ["m2", "m3", "m4"]
    assert ids(await alpha.get(url, params={"priority_lt": "-1"})) == []

    seen: list[str] = []
    params = {"order": "priority", "limit": "3"}
    while True:
        page = (await alpha.get(url, params=params)).json()
        seen += [m["id"] for m in page["messages"]]
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    assert seen == [f"m{i}" for i in range(7)]
    first = (await alpha.get(url, params={"limit": "4"})).json()
    second = (await alpha.get(url, params={"limit": "4", "cursor": first["next_cursor"]})).json()
    assert [m["id"] for m in first["messages"] + second["messages"]] == [
        f"m{i}" for i in reversed(range(7))
    ]

    bad = [
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "1.5"}, "limit"),
        ({"priority_lt": "1e3"}, "priority_lt"),
        ({"priority_gte": " 1"}, "priority_gte"),
        ({"priority_gte": "99999999999999999999"}, "priority_gte"),
        ({"state": "done"}, "state[0]"),
        ({"state": "pending,done"}, "state[1]"),
        ({"order": "random"}, "order"),
        ({"cursor": "garbage!"}, "cursor"),
        ({"metadata.": "x"}, "metadata"),
    ]
    for params_, field in bad:
        assert_error(await alpha.get(url, params=params_), 400, "validation_error", field)
    response = await alpha.get("/v1/namespaces/alpha/queues/nope/messages")
    assert_error(response, 404, "not_found")


async def test_requeue_dead_letters(alpha: Caller) -> None:
    queue = "/v1/namespaces/alpha/queues/d"
    await alpha.put(queue, json={"max_attempts": 1})
    await enqueue(alpha, queue, {"id": "a"}, {"id": "b"}, {"id": "c"})
    for message in await dequeue(alpha, queue, count=3):
        await alpha.post(
            f"{queue}/messages/{message['id']}/fail", json={"lease_id": message["lease_id"]}
        )
    response = await alpha.post(f"{queue}/requeue", json={"ids": ["a"]})
    assert response.status_code == 200
    assert response.json() == {"requeued": 1}
    assert (await alpha.get(f"{queue}/messages/a")).json()["state"] == "pending"
    response = await alpha.post(f"{queue}/requeue", json={"states": ["errored"], "limit": 1})
    assert response.json() == {"requeued": 1}
    assert (await alpha.post(f"{queue}/requeue")).json() == {"requeued": 1}
    assert (await alpha.post(f"{queue}/requeue")).json() == {"requeued": 0}
    for body, field in [
        ({"states": ["pending"]}, "states[0]"),
        ({"states": ["nope"]}, "states[0]"),
        ({"ids": ["bad id"]}, "ids[0]"),
        ({"limit": 0}, "limit"),
    ]:
        assert_error(
            await alpha.post(f"{queue}/requeue", json=body), 400, "validation_error", field
        )
