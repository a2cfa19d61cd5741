"""The express lane (app/api/express.py) answers the hot calls as Litestar's routes do.

The same script of requests (successes, each kind of error, edge paths) runs against an app
with the lane and one without it, over the same database, each in a namespace of its own; the
answers must be equal, byte for byte once lease ids and times are masked, headers included. The
lane must also really take the hot calls (else the comparison would compare Litestar with
itself), and only them.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.express import ExpressLane, route_of
from app.bootstrap.server import create_app
from tests.api.conftest import BODY_LIMIT, Caller, make_settings, namespace_caller, serve
from tests.conftest import ADMIN_TOKEN

_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
# Durations measured at the lease (how long a message waited) differ from run to run.
_SECONDS = re.compile(rb'"(waited_seconds|ttl_remaining_seconds)":[0-9.eE+-]+')

Answer = tuple[str, int, dict[str, str], bytes]


def _masked(body: bytes, namespace: str) -> bytes:
    body = body.replace(namespace.encode(), b"<ns>")
    body = _SECONDS.sub(rb'"\1":<seconds>', body)
    return _TIME.sub(b"<time>", _UUID.sub(b"<uuid>", body))


async def _script(ns: Caller, other: Caller) -> list[Answer]:
    """Every hot call, answered well and badly; what each answer was."""
    answers: list[Answer] = []
    base = f"/v1/namespaces/{ns.namespace}/queues"

    async def call(
        label: str, method: str, path: str, caller: Caller = ns, **kwargs: Any
    ) -> httpx.Response:
        response = await caller.request(method, base + path, **kwargs)
        headers = {k: v for k, v in response.headers.items() if k not in {"date", "server"}}
        if "content-length" in headers:  # the namespace's name is masked in the body
            headers["content-length"] = "<length>"
        answers.append(
            (label, response.status_code, headers, _masked(response.content, ns.namespace))
        )
        return response

    assert (await ns.put("/v1/namespaces/" + ns.namespace + "/queues/q", json={})).is_success
    one = {"messages": [{"id": "m1", "payload": {"n": 1}, "priority": 5}]}
    await call("enqueue", "POST", "/q/messages", json=one)
    await call("enqueue again", "POST", "/q/messages", json=one)
    await call(
        "enqueue two",
        "POST",
        "/q/messages",
        json={"messages": [{"id": "m2", "priority": 1}, {"priority": 2}]},
    )
    await call("enqueue bad field", "POST", "/q/messages", json={"messages": [{"priority": "x"}]})
    await call("enqueue unknown field", "POST", "/q/messages", json={"nope": 1})
    await call("enqueue not json", "POST", "/q/messages", content=b"{nope")
    await call(
        "enqueue bad utf-8", "POST", "/q/messages", content=b'{"messages": [{"payload": "\xff"}]}'
    )
    await call("enqueue too large", "POST", "/q/messages", content=b"x" * (BODY_LIMIT + 1))
    await call("enqueue no queue", "POST", "/nope/messages", json=one)
    await call("enqueue no token", "POST", "/q/messages", headers={"Authorization": ""}, json=one)
    await call("enqueue bad scheme", "POST", "/q/messages", headers={"Authorization": "Basic x"})
    await call("enqueue other namespace", "POST", "/q/messages", caller=other, json=one)
    await call("enqueue trailing slash", "POST", "/q/messages/", json=one)
    await call("dequeue bad count", "POST", "/q/dequeue", json={"count": 0})
    await call("dequeue bad wait", "POST", "/q/dequeue", json={"wait_seconds": 99})
    leased = (await call("dequeue", "POST", "/q/dequeue", json={"count": 1})).json()
    lease = leased["messages"][0]["lease_id"]
    wrong = {"lease_id": "00000000-0000-0000-0000-000000000000"}
    await call(
        "extend", "POST", "/q/messages/m1/extend", json={"lease_id": lease, "lease_seconds": 60}
    )
    await call("extend bad lease", "POST", "/q/messages/m1/extend", json=wrong)
    await call("extend no lease", "POST", "/q/messages/m1/extend", json={})
    await call("complete wrong lease", "POST", "/q/messages/m1/complete", json=wrong)
    await call("complete unknown", "POST", "/q/messages/zz/complete", json=wrong)
    await call("complete", "POST", "/q/messages/m1/complete", json={"lease_id": lease})
    await call("complete again", "POST", "/q/messages/m1/complete", json={"lease_id": lease})
    await call("unknown action", "POST", "/q/messages/m2/frobnicate", json={})
    leased = (await call("dequeue another", "POST", "/q/dequeue", json={"count": 1})).json()
    lease = leased["messages"][0]["lease_id"]
    failed = {"lease_id": lease, "error": "boom", "retry_delay_seconds": 0}
    await call("fail", "POST", "/q/messages/m2/fail", json=failed)
    await call(
        "fail bad delay", "POST", "/q/messages/m2/fail", json={**failed, "retry_delay_seconds": -1}
    )
    leased = (await call("dequeue again", "POST", "/q/dequeue", json={"count": 1})).json()
    lease = leased["messages"][0]["lease_id"]
    then = {"count": 5, "lease_seconds": 30}
    ack = {"complete": [{"id": leased["messages"][0]["id"], "lease_id": lease}], "dequeue": then}
    await call("ack and dequeue", "POST", "/q/ack", json=ack)
    await call("ack unknown", "POST", "/q/ack", json={"complete": [{"id": "zz", **wrong}]})
    await call("ack bad dequeue", "POST", "/q/ack", json={"dequeue": {"count": 0}})
    await call("ack empty wait", "POST", "/q/ack", json={"dequeue": {"wait_seconds": 1}})
    return answers


async def _answers(
    engine: AsyncEngine, database_url: str, *, lane: bool, name: str
) -> list[Answer]:
    app = create_app(make_settings(database_url, express_lane=lane), engine=engine)
    assert isinstance(app.asgi_handler, ExpressLane) is lane
    async with serve(app) as client:
        admin = Caller(client, app, ADMIN_TOKEN)
        ns = await namespace_caller(admin, name)
        other = await namespace_caller(admin, name + "x")
        return await _script(ns, other)


async def test_the_lane_answers_as_the_routes_do(engine: AsyncEngine, database_url: str) -> None:
    with_lane = await _answers(engine, database_url, lane=True, name="lane-on")
    without = await _answers(engine, database_url, lane=False, name="laneoff")
    assert [a[0] for a in with_lane] == [a[0] for a in without]
    for ours, theirs in zip(with_lane, without, strict=True):
        assert ours == theirs
    statuses = {label: status for label, status, _, _ in with_lane}
    # The script covers what it claims to: each kind of answer, not only successes.
    assert {statuses["enqueue"], statuses["dequeue"], statuses["ack and dequeue"]} == {200, 201}
    assert {s for s in statuses.values() if s >= 400} >= {400, 401, 403, 404, 409, 413}


async def test_the_lane_takes_the_hot_calls_and_only_them(
    app: Litestar, alpha: Caller, queue: str
) -> None:
    lane = app.asgi_handler
    assert isinstance(lane, ExpressLane)
    reached_router: list[str] = []
    router = lane.router

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        reached_router.append(f"{scope['method']} {scope['path']}")
        await router(scope, receive, send)

    lane.router = recording
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/messages", {"messages": [{"id": "a"}, {"id": "b"}]}),
        ("POST", "/dequeue", {"count": 1}),
        ("POST", "/ack", {}),
        ("POST", "/messages/a/extend", {"lease_id": "00000000-0000-0000-0000-000000000000"}),
        ("POST", "/messages/a/fail", {"lease_id": "00000000-0000-0000-0000-000000000000"}),
        ("POST", "/messages/a/complete", {"lease_id": "00000000-0000-0000-0000-000000000000"}),
    ]
    for method, path, body in calls:
        await alpha.request(method, queue + path, json=body)
    assert reached_router == []
    for method, path in [
        ("GET", "/messages"),
        ("POST", "/messages/a/cancel"),
        ("POST", "/requeue"),
        ("GET", "/messages/a"),
        ("POST", "/messages/"),
    ]:
        await alpha.request(method, queue + path, json={})
    assert len(reached_router) == 5


def test_the_lane_labels_metrics_with_the_routes_templates(app: Litestar) -> None:
    templates = {route.path_format for route in app.routes}
    base = "/v1/namespaces/n/queues/q"
    paths = ["/messages", "/dequeue", "/ack", "/messages/m/complete", "/messages/m/fail"]
    for path in [*paths, "/messages/m/extend"]:
        found = route_of("POST", base + path)
        assert found is not None
        assert found[0].template in templates


@pytest.mark.parametrize(
    "path",
    [
        "/v1/namespaces//queues/q/messages",
        "/v1/namespaces/n/queues//messages",
        "/v1/namespaces/n/queues/q/messages//complete",
        "/v1/namespaces/n/queue/q/messages",
        "/v1/namespaces/n/queues/q/messages/",
        "/v1/namespaces/n/queues/q",
        "/v2/namespaces/n/queues/q/messages",
    ],
)
def test_other_paths_go_to_the_router(path: str) -> None:
    assert route_of("POST", path) is None


def test_other_methods_go_to_the_router() -> None:
    for method in ("GET", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"):
        assert route_of(method, "/v1/namespaces/n/queues/q/messages") is None
