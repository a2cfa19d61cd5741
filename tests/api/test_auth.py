"""Bearer auth: 401 without a valid token, 403 outside the token's reach, isolation between
namespaces, revocation at once."""

from __future__ import annotations

import logging

import pytest

from tests.api.conftest import Caller, assert_error, namespace_caller
from tests.conftest import ADMIN_TOKEN

Q = "/v1/namespaces/{ns}/queues/q"

# Every data-plane endpoint: (method, path under the queue, body).
DATA_PLANE = [
    ("GET", "/v1/namespaces/{ns}/queues", None),
    ("PUT", Q, {}),
    ("GET", Q, None),
    ("PATCH", Q, {"enqueue_paused": True}),
    ("DELETE", Q, None),
    ("POST", Q + "/purge", {}),
    ("POST", Q + "/messages", {"messages": [{}]}),
    ("GET", Q + "/messages", None),
    ("POST", Q + "/dequeue", {}),
    ("POST", Q + "/ack", {}),
    ("POST", Q + "/requeue", {}),
    ("POST", Q + "/dead-letters/delete", {}),
    ("GET", Q + "/messages/m", None),
    ("PATCH", Q + "/messages/m", {}),
    ("DELETE", Q + "/messages/m", None),
    ("POST", Q + "/messages/m/complete", {"lease_id": "x"}),
    ("POST", Q + "/messages/m/fail", {"lease_id": "x"}),
    ("POST", Q + "/messages/m/extend", {"lease_id": "x", "lease_seconds": 5}),
    ("POST", Q + "/messages/m/cancel", {}),
    ("POST", Q + "/messages/m/requeue", {}),
    ("POST", "/v1/namespaces/{ns}/dequeue", {"queues": ["q"]}),
]

ADMIN_PLANE = [
    ("POST", "/v1/namespaces", {"name": "gamma"}),
    ("GET", "/v1/namespaces", None),
    ("DELETE", "/v1/namespaces/{ns}", None),
    ("POST", "/v1/namespaces/{ns}/tokens", {}),
    ("GET", "/v1/namespaces/{ns}/tokens", None),
    ("DELETE", "/v1/namespaces/{ns}/tokens/00000000-0000-0000-0000-000000000000", None),
]


BAD_HEADERS = [
    {},
    {"Authorization": ""},
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer "},
    {"Authorization": f"Basic {ADMIN_TOKEN}"},
    {"Authorization": "Bearer sdl_unknown"},
    {"Authorization": "Bearer not-a-token"},
    {"Authorization": f"Bearer {ADMIN_TOKEN}x"},
    {"Authorization": "Bearer " + "sdl_" + "x" * 300},
]


async def test_missing_or_unknown_token_is_401(anonymous: Caller) -> None:
    for headers in BAD_HEADERS:
        for path in ("/v1/namespaces", "/v1/namespaces/alpha/queues/q/messages"):
            response = await anonymous.get(path, headers=headers)
            assert_error(response, 401, "unauthorized")
            assert response.headers["www-authenticate"] == "Bearer"


async def test_scheme_is_case_insensitive(anonymous: Caller) -> None:
    response = await anonymous.get(
        "/v1/namespaces", headers={"Authorization": f"bearer {ADMIN_TOKEN}"}
    )
    assert response.status_code == 200


async def test_namespace_token_cannot_touch_another_namespace(admin: Caller, alpha: Caller) -> None:
    beta = await namespace_caller(admin, "beta")
    await alpha.put(Q.format(ns="alpha"), json={})
    await beta.put(Q.format(ns="beta"), json={})
    for method, path, body in DATA_PLANE:
        # each way round, and for a namespace that does not exist
        for caller, namespace in ((alpha, "beta"), (beta, "alpha"), (alpha, "nowhere")):
            response = await caller.request(method, path.format(ns=namespace), json=body)
            assert_error(response, 403, "forbidden")
    # Nothing was changed by the refused calls.
    for ns in ("alpha", "beta"):
        assert (await admin.get(Q.format(ns=ns))).json()["enqueue_paused"] is False


async def test_namespace_token_cannot_use_admin_plane(admin: Caller, alpha: Caller) -> None:
    for method, path, body in ADMIN_PLANE:
        response = await alpha.request(method, path.format(ns="alpha"), json=body)
        assert_error(response, 403, "forbidden")
    assert [n["name"] for n in (await admin.get("/v1/namespaces")).json()["namespaces"]] == [
        "alpha"
    ]


async def test_isolation_of_data(admin: Caller, alpha: Caller) -> None:
    beta = await namespace_caller(admin, "beta")
    await alpha.put(Q.format(ns="alpha"), json={})
    await beta.put(Q.format(ns="beta"), json={})
    await alpha.post(Q.format(ns="alpha") + "/messages", json={"messages": [{"id": "a"}]})
    # Same queue name, other namespace: nothing of alpha's is visible to beta.
    response = await beta.post(Q.format(ns="beta") + "/dequeue", json={"count": 10})
    assert response.json() == {"messages": []}
    response = await beta.get(Q.format(ns="beta") + "/messages/a")
    assert_error(response, 404, "not_found")
    # The admin reaches both.
    response = await admin.get(Q.format(ns="alpha") + "/messages/a")
    assert response.status_code == 200


async def test_revoked_token_fails_at_once(admin: Caller, alpha: Caller) -> None:
    assert (await alpha.get("/v1/namespaces/alpha/queues")).status_code == 200
    (token,) = (await admin.get("/v1/namespaces/alpha/tokens")).json()["tokens"]
    await admin.delete(f"/v1/namespaces/alpha/tokens/{token['id']}")
    assert_error(await alpha.get("/v1/namespaces/alpha/queues"), 401, "unauthorized")


async def test_operations_need_no_token(anonymous: Caller) -> None:
    assert (await anonymous.get("/healthz")).status_code == 200
    assert (await anonymous.get("/readyz")).status_code == 200
    assert (await anonymous.get("/schema/openapi.json")).status_code == 200


async def test_matrix_of_every_endpoint_and_every_kind_of_caller(admin: Caller) -> None:
    """Every endpoint by {no token, bad token, revoked token, other namespace's token, own
    namespace's token, admin}: the expected class of answer for each cell."""
    alpha = await namespace_caller(admin, "alpha")
    beta = await namespace_caller(admin, "beta")
    issued = (await admin.post("/v1/namespaces/alpha/tokens", json={"label": "doomed"})).json()
    revoked = Caller(admin.client, admin.app, issued["token"], namespace="alpha")
    await admin.delete(f"/v1/namespaces/alpha/tokens/{issued['id']}")
    assert_error(await revoked.get("/v1/namespaces/alpha/queues"), 401, "unauthorized")
    no_token = Caller(admin.client, admin.app, None)
    bad_token = Caller(admin.client, admin.app, "sdl_not-a-real-token")

    def expect(caller: str, plane: str) -> int | None:
        """The status a cell must have, or None for "passes auth" (any non-401/403)."""
        if caller in ("none", "bad", "revoked"):
            return 401
        if caller == "admin" or (caller == "own" and plane == "data"):
            return None
        return 403

    callers = {
        "none": no_token,
        "bad": bad_token,
        "revoked": revoked,
        "other": beta,
        "own": alpha,
        "admin": admin,
    }
    cells = 0
    for plane, endpoints in (("data", DATA_PLANE), ("admin", ADMIN_PLANE)):
        for method, path, body in endpoints:
            for name, caller in callers.items():
                if plane == "admin" and method == "DELETE" and name in ("own", "admin"):
                    continue  # would delete the namespace the rest of the matrix uses
                response = await caller.request(method, path.format(ns="alpha"), json=body)
                wanted = expect(name, plane)
                cell = f"{method} {path} as {name}: {response.status_code} {response.text}"
                if wanted is None:
                    assert response.status_code not in (401, 403), cell
                    assert response.status_code < 500, cell
                else:
                    assert response.status_code == wanted, cell
                cells += 1
    assert cells >= 140


async def test_token_secrets_never_reach_the_logs(
    admin: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    alpha = await namespace_caller(admin, "alpha")
    await alpha.put(Q.format(ns="alpha"), json={})
    await alpha.post(Q.format(ns="alpha") + "/messages", json={"messages": [{"id": "a"}]})
    await alpha.get("/v1/namespaces/beta/queues")  # refused: 403
    wrong = Caller(admin.client, admin.app, alpha.token + "x")
    await wrong.get("/v1/namespaces/alpha/queues")  # refused: 401
    assert caplog.records, "nothing was logged: the check would be empty"
    for secret in (ADMIN_TOKEN, alpha.token):
        assert secret is not None
        assert secret not in caplog.text
