"""Bearer auth: 401 without a valid token, 403 outside the token's reach, isolation between
namespaces, revocation at once."""

from __future__ import annotations

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
    ("GET", Q + "/messages/m", None),
    ("PATCH", Q + "/messages/m", {}),
    ("DELETE", Q + "/messages/m", None),
    ("POST", Q + "/messages/m/complete", {"lease_id": "x"}),
    ("POST", Q + "/messages/m/fail", {"lease_id": "x"}),
    ("POST", Q + "/messages/m/extend", {"lease_id": "x", "lease_seconds": 5}),
    ("POST", Q + "/messages/m/cancel", {}),
    ("POST", Q + "/messages/m/requeue", {}),
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
