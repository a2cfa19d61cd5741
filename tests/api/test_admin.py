"""Admin plane: namespaces and tokens."""

from __future__ import annotations

from tests.api.conftest import Caller, assert_error, namespace_caller

TOKEN_FIELDS = {
    "id",
    "label",
    "created_at",
    "expires_at",
    "kind",
    "access_key_id",
    "read_rate",
    "write_rate",
}


async def test_create_list_delete_namespace(admin: Caller) -> None:
    response = await admin.post("/v1/namespaces", json={"name": "alpha", "description": "A"})
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "alpha"
    assert body["description"] == "A"
    assert body["created_at"].endswith("Z") or "+" in body["created_at"]

    await admin.post("/v1/namespaces", json={"name": "beta"})
    response = await admin.get("/v1/namespaces")
    assert response.status_code == 200
    assert [n["name"] for n in response.json()["namespaces"]] == ["alpha", "beta"]

    response = await admin.delete("/v1/namespaces/alpha")
    assert response.status_code == 204
    assert response.content == b""
    response = await admin.get("/v1/namespaces")
    assert [n["name"] for n in response.json()["namespaces"]] == ["beta"]
    assert_error(await admin.delete("/v1/namespaces/alpha"), 404, "not_found")


async def test_duplicate_namespace_is_conflict(admin: Caller) -> None:
    await admin.post("/v1/namespaces", json={"name": "alpha"})
    assert_error(await admin.post("/v1/namespaces", json={"name": "alpha"}), 409, "conflict")


async def test_namespace_name_is_validated(admin: Caller) -> None:
    response = await admin.post("/v1/namespaces", json={"name": "-bad name"})
    assert_error(response, 400, "validation_error", "name")
    response = await admin.post("/v1/namespaces", json={})
    assert_error(response, 400, "validation_error", "name")
    response = await admin.post("/v1/namespaces", json={"name": 5})
    assert_error(response, 400, "validation_error", "name")


async def test_delete_namespace_removes_queues_and_tokens(admin: Caller, alpha: Caller) -> None:
    await alpha.put("/v1/namespaces/alpha/queues/q", json={})
    await alpha.post("/v1/namespaces/alpha/queues/q/messages", json={"messages": [{}]})
    assert (await admin.delete("/v1/namespaces/alpha")).status_code == 204
    assert_error(await alpha.get("/v1/namespaces/alpha/queues"), 401, "unauthorized")
    await admin.post("/v1/namespaces", json={"name": "alpha"})
    response = await admin.get("/v1/namespaces/alpha/queues")
    assert response.json() == {"queues": []}


async def test_issue_list_revoke_token(admin: Caller) -> None:
    await admin.post("/v1/namespaces", json={"name": "alpha"})
    response = await admin.post(
        "/v1/namespaces/alpha/tokens",
        json={"label": "worker", "expires_at": "2999-01-01T00:00:00+02:00"},
    )
    assert response.status_code == 201
    issued = response.json()
    assert set(issued) == {"token", *TOKEN_FIELDS}
    assert issued["label"] == "worker"
    assert issued["token"].startswith("sdl_")
    assert (issued["kind"], issued["access_key_id"]) == ("bearer", None)
    assert issued["expires_at"].startswith("2998-12-31T22:00:00")

    response = await admin.get("/v1/namespaces/alpha/tokens")
    assert response.status_code == 200
    (listed,) = response.json()["tokens"]
    assert set(listed) == TOKEN_FIELDS
    assert listed["id"] == issued["id"]
    assert issued["token"] not in response.text

    caller = Caller(admin.client, admin.app, issued["token"])
    assert (await caller.get("/v1/namespaces/alpha/queues")).status_code == 200
    response = await admin.delete(f"/v1/namespaces/alpha/tokens/{issued['id']}")
    assert response.status_code == 204
    assert_error(await caller.get("/v1/namespaces/alpha/queues"), 401, "unauthorized")
    assert (await admin.get("/v1/namespaces/alpha/tokens")).json() == {"tokens": []}


async def test_token_errors(admin: Caller) -> None:
    assert_error(await admin.post("/v1/namespaces/nope/tokens", json={}), 404, "not_found")
    assert_error(await admin.get("/v1/namespaces/nope/tokens"), 404, "not_found")
    await admin.post("/v1/namespaces", json={"name": "alpha"})
    response = await admin.delete("/v1/namespaces/alpha/tokens/not-a-uuid")
    assert_error(response, 404, "not_found")
    response = await admin.delete(
        "/v1/namespaces/alpha/tokens/00000000-0000-0000-0000-000000000000"
    )
    assert_error(response, 404, "not_found")
    response = await admin.post(
        "/v1/namespaces/alpha/tokens", json={"expires_at": "2030-01-01T00:00:00"}
    )
    assert_error(response, 400, "validation_error", "expires_at")
    response = await admin.post("/v1/namespaces/alpha/tokens", json={"label": 3})
    assert_error(response, 400, "validation_error", "label")


async def test_token_of_one_namespace_cannot_be_revoked_through_another(admin: Caller) -> None:
    alpha = await namespace_caller(admin, "alpha")
    await admin.post("/v1/namespaces", json={"name": "beta"})
    (token,) = (await admin.get("/v1/namespaces/alpha/tokens")).json()["tokens"]
    response = await admin.delete(f"/v1/namespaces/beta/tokens/{token['id']}")
    assert_error(response, 404, "not_found")
    assert (await alpha.get("/v1/namespaces/alpha/queues")).status_code == 200


async def test_expired_token_is_unauthorized(admin: Caller) -> None:
    await admin.post("/v1/namespaces", json={"name": "alpha"})
    response = await admin.post(
        "/v1/namespaces/alpha/tokens", json={"expires_at": "2000-01-01T00:00:00Z"}
    )
    caller = Caller(admin.client, admin.app, response.json()["token"])
    assert_error(await caller.get("/v1/namespaces/alpha/queues"), 401, "unauthorized")
