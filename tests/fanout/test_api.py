"""Topics over HTTP: the endpoints of docs/api.md ("Topics"), their refusals, and the OpenAPI
document that lists them."""

from __future__ import annotations

from tests.api.conftest import BODY_LIMIT, Caller, assert_error, namespace_caller
from tests.api.messages import make_queues

NS = "/v1/namespaces/alpha"


async def test_topic_lifecycle_and_publish(alpha: Caller):
    await make_queues(alpha, "billing", "audit")
    response = await alpha.put(
        f"{NS}/topics/orders",
        json={"subscriptions": ["billing", {"queue": "audit", "tag_key": "kind", "tags": ["A"]}]},
    )
    assert response.status_code == 201, response.text
    topic = response.json()
    assert topic["name"] == "orders"
    assert [(s["queue"], s["tag_key"], s["tags"]) for s in topic["subscriptions"]] == [
        ("audit", "kind", ["A"]),
        ("billing", None, None),
    ]
    again = await alpha.put(f"{NS}/topics/orders", json=topic | {"subscriptions": ["billing"]})
    assert again.status_code == 400  # the body is the PUT's, not the GET's answer
    again = await alpha.put(
        f"{NS}/topics/orders",
        json={"subscriptions": ["billing", {"queue": "audit", "tag_key": "kind", "tags": ["A"]}]},
    )
    assert again.status_code == 200, again.text

    published = await alpha.post(
        f"{NS}/topics/orders/messages",
        json={
            "messages": [
                {"id": "o1", "payload": {"total": 3}, "metadata": {"kind": "A"}},
                {"id": "o2", "metadata": {"kind": "B"}},
            ]
        },
    )
    assert published.status_code == 201, published.text
    assert published.json() == {
        "messages": [
            {
                "id": "o1",
                "queues": [
                    {"queue": "audit", "state": "pending", "created": True},
                    {"queue": "billing", "state": "pending", "created": True},
                ],
            },
            {"id": "o2", "queues": [{"queue": "billing", "state": "pending", "created": True}]},
        ]
    }
    message = await alpha.get(f"{NS}/queues/audit/messages/o1")
    assert message.json()["payload"] == {"total": 3}

    listed = await alpha.get(f"{NS}/topics")
    assert [t["name"] for t in listed.json()["topics"]] == ["orders"]
    assert (await alpha.get(f"{NS}/topics/orders")).json()["subscriptions"][0]["queue"] == "audit"

    assert (await alpha.delete(f"{NS}/topics/orders/subscriptions/audit")).status_code == 204
    assert_error(await alpha.delete(f"{NS}/topics/orders/subscriptions/audit"), 404, "not_found")
    assert (await alpha.put(f"{NS}/topics/orders/subscriptions/audit")).status_code == 201
    filtered = await alpha.put(
        f"{NS}/topics/orders/subscriptions/audit", json={"tag_key": "kind", "tags": ["B"]}
    )
    assert filtered.status_code == 200, filtered.text
    assert filtered.json()["subscriptions"][0]["tags"] == ["B"]

    assert (await alpha.delete(f"{NS}/topics/orders")).status_code == 204
    assert_error(await alpha.get(f"{NS}/topics/orders"), 404, "not_found")
    assert (await alpha.get(f"{NS}/queues/billing/messages/o2")).status_code == 200


async def test_a_refusing_queue_stores_nothing_and_is_named(alpha: Caller):
    await make_queues(alpha, "a")
    await make_queues(alpha, "paused", enqueue_paused=True)
    await make_queues(alpha, "per-user", kind="exclusive", exclusive_key="user")
    body = {"subscriptions": ["a", "per-user"]}
    assert (await alpha.put(f"{NS}/topics/t", json=body)).status_code == 201

    error = assert_error(
        await alpha.post(
            f"{NS}/topics/t/messages",
            json={"messages": [{"id": "m1", "metadata": {"user": "u"}}, {"id": "m2"}]},
        ),
        400,
        "validation_error",
        "messages[1].metadata.user",
    )
    assert "per-user" in error["message"]

    assert (await alpha.put(f"{NS}/topics/t/subscriptions/paused")).status_code == 201
    error = assert_error(
        await alpha.post(
            f"{NS}/topics/t/messages", json={"messages": [{"id": "m3", "metadata": {"user": "u"}}]}
        ),
        409,
        "queue_paused",
    )
    assert "alpha/paused" in error["message"]
    for queue in ("a", "paused", "per-user"):
        listed = await alpha.get(f"{NS}/queues/{queue}/messages")
        assert listed.json()["messages"] == [], queue


async def test_bad_requests_name_the_field(alpha: Caller):
    await make_queues(alpha, "a")
    cases = [
        ({"subscriptions": ["nope"]}, "subscriptions[0].queue"),
        ({"subscriptions": [{"queue": "a", "tags": ["x"]}]}, "subscriptions[0].tag_key"),
        ({"subscriptions": [{"queue": "a", "tag_key": "k", "tags": []}]}, "subscriptions[0].tags"),
        ({"subscriptions": ["a", "a"]}, "subscriptions[1].queue"),
    ]
    for body, field in cases:
        assert_error(await alpha.put(f"{NS}/topics/t", json=body), 400, "validation_error", field)
    assert_error(await alpha.get(f"{NS}/topics/t"), 404, "not_found")
    assert (await alpha.put(f"{NS}/topics/t", json={"subscriptions": ["a"]})).status_code == 201
    assert_error(
        await alpha.post(f"{NS}/topics/t/messages", json={"messages": []}),
        400,
        "validation_error",
        "messages",
    )
    assert_error(
        await alpha.post(f"{NS}/topics/t/messages", json={"messages": [{"priority": "high"}]}),
        400,
        "validation_error",
    )
    assert_error(
        await alpha.post(f"{NS}/topics/none/messages", json={"messages": [{}]}), 404, "not_found"
    )


async def test_a_token_of_another_namespace_is_refused(alpha: Caller, admin: Caller):
    beta = await namespace_caller(admin, "beta")
    assert (await beta.get(f"{NS}/topics")).status_code == 403


async def test_openapi_lists_the_topic_endpoints(alpha: Caller):
    document = (await alpha.get("/schema/openapi.json")).json()
    paths = document["paths"]
    assert set(paths[f"{NS.replace('alpha', '{ns}')}/topics/{{topic}}"]) >= {"put", "get", "delete"}
    assert "post" in paths["/v1/namespaces/{ns}/topics/{topic}/messages"]
    assert "put" in paths["/v1/namespaces/{ns}/topics/{topic}/subscriptions/{queue}"]


async def test_an_oversized_body_is_a_413(alpha: Caller):
    body = b'{"padding": "' + b"x" * BODY_LIMIT + b'"}'
    for method, path in [
        ("PUT", f"{NS}/topics/t"),
        ("PUT", f"{NS}/topics/t/subscriptions/q"),
        ("POST", f"{NS}/topics/t/messages"),
    ]:
        assert_error(await alpha.request(method, path, content=body), 413, "payload_too_large")
