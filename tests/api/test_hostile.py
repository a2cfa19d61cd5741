"""Hostile input, targeted: deep JSON, huge integers, unicode in ids and metadata, path
traversal in names, SQL metacharacters in every string field. Never a 5xx; what is accepted
round-trips byte for byte; what is refused is a 4xx in the error shape."""

from __future__ import annotations

import pytest

from tests.api.conftest import Caller, assert_error

SQL = "'; DROP TABLE messages; -- \" \\ % _ $1 :name"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [50, 500, 5_000, 100_000])
async def test_deep_json_payloads(alpha: Caller, queue: str, depth: int) -> None:
    body = '{"messages": [{"id": "deep", "payload": ' + nested(depth) + "}]}"
    response = await alpha.post(
        f"{queue}/messages", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code < 500, response.text
    if response.status_code == 201:
        stored = (await alpha.get(f"{queue}/messages/deep")).json()["payload"]
        for _ in range(depth - 1):
            (stored,) = stored
        assert stored == []
    else:
        assert response.status_code in (400, 413), response.text


@pytest.mark.parametrize(
    "field", ["priority", "delay_seconds", "max_attempts", "lease_seconds", "ttl_seconds"]
)
@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 10**100, 2**64])
async def test_huge_integers_are_refused_by_name(
    alpha: Caller, queue: str, field: str, value: int
) -> None:
    body = f'{{"messages": [{{"{field}": {value}}}]}}'
    response = await alpha.post(
        f"{queue}/messages", content=body, headers={"Content-Type": "application/json"}
    )
    assert_error(response, 400, "validation_error", f"messages[0].{field}")


# ".." alone is a valid id (the alphabet is [A-Za-z0-9._:-]); with a slash it is not.
@pytest.mark.parametrize("message_id", ["é", "日本", "a/b", "a b", "../etc/passwd", ""])
async def test_ids_outside_the_alphabet_are_refused(
    alpha: Caller, queue: str, message_id: str
) -> None:
    response = await alpha.post(f"{queue}/messages", json={"messages": [{"id": message_id}]})
    assert_error(response, 400, "validation_error", "messages[0].id")


async def test_unicode_metadata_and_payload_round_trip(alpha: Caller, queue: str) -> None:
    metadata = {"città": "日本語 ✓", "emoji": "🦄", "rtl": "مرحبا"}
    payload = {"text": "Ünïcödé \U0001d518\U0001d52b", "nul-looking": "\\u0000 is text here"}
    response = await alpha.post(
        f"{queue}/messages",
        json={"messages": [{"id": "u", "metadata": metadata, "payload": payload}]},
    )
    assert response.status_code == 201, response.text
    message = (await alpha.get(f"{queue}/messages/u")).json()
    assert (message["metadata"], message["payload"]) == (metadata, payload)
    found = await alpha.get(f"{queue}/messages", params={"metadata.città": "日本語 ✓"})
    assert [m["id"] for m in found.json()["messages"]] == ["u"]


# Literal "." and ".." segments are resolved by HTTP clients before sending; their
# percent-encoded forms reach the server and must be refused.
@pytest.mark.parametrize(
    "name", ["%2e%2e", "%2e", "..%2f..%2fetc", "a%2fb", "%00", "-x", ".hidden", "x" * 65]
)
async def test_path_traversal_in_names(admin: Caller, alpha: Caller, name: str) -> None:
    for caller, path in (
        (admin, f"/v1/namespaces/{name}"),
        (alpha, f"/v1/namespaces/alpha/queues/{name}"),
        (alpha, f"/v1/namespaces/alpha/queues/{name}/messages"),
    ):
        for method in ("GET", "PUT", "DELETE"):
            response = await caller.request(method, path, json={} if method == "PUT" else None)
            assert 400 <= response.status_code < 500, (method, path, response.text)
            assert set(response.json()) == {"error"}
    names = [n["name"] for n in (await admin.get("/v1/namespaces")).json()["namespaces"]]
    assert names == ["alpha"]


async def test_sql_metacharacters_in_every_string_field(admin: Caller, queue: str) -> None:
    created = await admin.post("/v1/namespaces", json={"name": "sql", "description": SQL})
    assert created.status_code == 201, created.text
    assert created.json()["description"] == SQL
    token = await admin.post("/v1/namespaces/sql/tokens", json={"label": SQL})
    assert token.json()["label"] == SQL
    base = "/v1/namespaces/sql/queues/q"
    assert (
        await admin.put(base, json={"kind": "exclusive", "exclusive_key": SQL})
    ).status_code == 201
    message = {"id": "m", "payload": {SQL: SQL}, "metadata": {SQL: SQL}}
    assert (await admin.post(f"{base}/messages", json={"messages": [message]})).status_code == 201
    leased = (await admin.post(f"{base}/dequeue", json={"metadata": {SQL: SQL}})).json()
    (got,) = leased["messages"]
    assert (got["payload"], got["metadata"]) == ({SQL: SQL}, {SQL: SQL})
    failed = await admin.post(
        f"{base}/messages/m/fail", json={"lease_id": got["lease_id"], "error": SQL}
    )
    assert failed.json()["last_error"] == SQL
    canceled = await admin.post(f"{base}/messages/m/cancel", json={"reason": SQL, "force": True})
    assert canceled.json()["last_error"] == SQL
    listed = await admin.get(f"{base}/messages", params={f"metadata.{SQL}": SQL})
    assert [m["id"] for m in listed.json()["messages"]] == ["m"]
    # Everything still stands.
    assert (await admin.get(f"{queue}/messages")).status_code == 200
