"""The error contract: every non-2xx has the error body; client input never gets a 500;
operations endpoints and the OpenAPI document."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc

from app.bootstrap.database import create_engine
from app.bootstrap.server import create_app
from app.core import errors as core_errors
from app.store import migrate
from app.web.errors import STATUS_BY_CODE, status_for
from tests.api.conftest import BODY_LIMIT, Caller, assert_error, make_settings, serve
from tests.conftest import ADMIN_TOKEN

# docs/api.md, "Errors".
CONTRACT = {
    "validation_error": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "lease_mismatch": 409,
    "invalid_state": 409,
    "queue_paused": 409,
    "payload_too_large": 413,
    "rate_limited": 429,
    "unavailable": 503,
}


def test_status_table_matches_the_contract() -> None:
    for code, status in CONTRACT.items():
        assert STATUS_BY_CODE[code] == status
        assert status_for(code) == status
    core = [
        c for c in vars(core_errors).values()
        if isinstance(c, type) and issubclass(c, core_errors.SundialError)
        and c is not core_errors.SundialError
    ]  # fmt: skip
    assert core
    for error in core:
        assert error.code in CONTRACT, error


async def test_unknown_route_and_method(admin: Caller) -> None:
    for path in ("/v1/nope", "/nope", "/v1/namespaces/a/b/c/d/e/f/g/h"):
        error = assert_error(await admin.get(path), 404, "not_found")
        assert path in error["message"]
    response = await admin.request("PUT", "/v1/namespaces")
    error = assert_error(response, 405, "method_not_allowed")
    assert set(error["details"]["allowed"]) >= {"GET", "POST"}
    assert "GET" in response.headers["allow"]


async def test_bad_bodies(alpha: Caller, queue: str) -> None:
    url = f"{queue}/messages"
    for content in (
        b"{bad",
        b'{"messages": [}',
        b"\xff\xfe",
        b'{"messages": ["\xff"]}',
        b"nul\x00",
    ):
        response = await alpha.post(url, content=content)
        assert_error(response, 400, "validation_error", "body")
    for content in (b"[]", b"1", b'"x"', b"null"):
        response = await alpha.post(url, content=content)
        assert_error(response, 400, "validation_error", "body")
    # a payload that is not UTF-8 is refused before it reaches the database
    response = await alpha.post(url, content=b'{"messages": [{"payload": "\xff"}]}')
    assert_error(response, 400, "validation_error", "body")
    # missing required field names it
    response = await alpha.post(f"{queue}/messages/a/complete", json={})
    assert_error(response, 400, "validation_error", "lease_id")


async def test_body_over_limit_is_413(alpha: Caller, queue: str) -> None:
    body = b'{"messages": [{"payload": "' + b"x" * BODY_LIMIT + b'"}]}'
    response = await alpha.post(f"{queue}/messages", content=body)
    assert_error(response, 413, "payload_too_large")


async def test_streamed_body_over_limit_is_413(alpha: Caller, queue: str) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"messages": [{"payload": "'
        for _ in range(BODY_LIMIT // 1024 + 1):
            yield b"x" * 1024
        yield b'"}]}'

    response = await alpha.post(f"{queue}/messages", content=chunks())
    assert_error(response, 413, "payload_too_large")


async def test_client_gone_mid_body_is_not_an_error(
    alpha: Caller, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    events = iter(
        [
            {"type": "http.request", "body": b'{"messages": [', "more_body": True},
            {"type": "http.disconnect"},
        ]
    )
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(events)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": f"{queue}/messages",
        "raw_path": f"{queue}/messages".encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"authorization", f"Bearer {alpha.token}".encode())],
        "client": ("127.0.0.1", 1),
        "server": ("sundial.test", 80),
    }
    with caplog.at_level(logging.INFO, logger="sundial.api"):
        await alpha.app(scope, receive, send)  # type: ignore[arg-type]
    assert sent[0]["status"] == 400
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_hostile_input_never_500(admin: Caller, alpha: Caller, queue: str) -> None:
    requests: list[tuple[str, str, Any]] = [
        ("GET", "/v1/namespaces/alpha/queues/a%00b", None),
        ("PUT", "/v1/namespaces/alpha/queues/a%00b", {}),
        ("GET", f"{queue}/messages/a%00b", None),
        ("POST", f"{queue}/messages/a%00b/complete", {"lease_id": "x\x00"}),
        ("POST", f"{queue}/ack", {"complete": [{"id": "a\x00", "lease_id": "x"}]}),
        ("POST", f"{queue}/ack", {"fail": [{"id": "a", "lease_id": "x", "error": "\x00"}]}),
        ("POST", f"{queue}/requeue", {"ids": ["a\x00"]}),
        ("POST", f"{queue}/messages", {"messages": [{"metadata": {"k": "\x00"}}]}),
        ("POST", f"{queue}/messages", {"messages": [{"visible_at": "9999-12-31T23:59:59Z"}]}),
        ("POST", f"{queue}/messages", {"messages": [{"expires_at": "0001-01-01T00:00:00Z"}]}),
        ("POST", f"{queue}/messages", {"messages": [{"delay_seconds": 2**70}]}),
        ("POST", f"{queue}/messages", {"messages": [{"priority": -(2**63)}]}),
        ("POST", f"{queue}/dequeue", {"metadata": {"\x00": "v"}}),
        ("POST", f"{queue}/messages/a/cancel", {"reason": "\x00"}),
        ("POST", f"{queue}/messages/a/fail", {"lease_id": "x", "error": "\x00"}),
        ("POST", f"{queue}/messages/a/extend", {"lease_id": "x", "lease_seconds": 2**64}),
        ("GET", f"{queue}/messages?metadata.k=%00", None),
        ("GET", f"{queue}/messages?cursor=%00", None),
        ("GET", f"{queue}/messages?cursor=WzEsMiwzXQ", None),
        ("POST", "/v1/namespaces", {"name": "x", "description": "\x00"}),
        ("POST", "/v1/namespaces/alpha/tokens", {"label": "\x00"}),
        ("POST", "/v1/namespaces/alpha/tokens", {"expires_at": "9999-12-31T23:59:59Z"}),
        ("DELETE", "/v1/namespaces/alpha/tokens/%00", None),
        ("PATCH", f"{queue}/messages/a", {"metadata": {"a" * 65: "v"}}),
        ("PUT", "/v1/namespaces/alpha/queues/x", {"kind": "exclusive", "exclusive_key": "\x00"}),
    ]
    for method, path, body in requests:
        for caller in (alpha, admin):
            response = await caller.request(method, path, json=body)
            assert response.status_code < 500, (method, path, body, response.text)
            assert response.is_success or set(response.json()) == {"error"}


async def test_unexpected_exception_is_logged_500(
    admin: Caller, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def boom() -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(admin.runtime.service, "list_namespaces", boom)
    with caplog.at_level(logging.ERROR, logger="sundial.api"):
        response = await admin.get("/v1/namespaces")
    assert_error(response, 500, "internal")
    assert "kaboom" not in response.text
    assert any(r.exc_info and "kaboom" in str(r.exc_info[1]) for r in caplog.records)


async def test_pool_exhaustion_is_503(admin: Caller, monkeypatch: pytest.MonkeyPatch) -> None:
    async def exhausted() -> None:
        raise sa_exc.TimeoutError("QueuePool limit reached")

    monkeypatch.setattr(admin.runtime.service, "list_namespaces", exhausted)
    response = await admin.get("/v1/namespaces")
    assert_error(response, 503, "unavailable")
    assert response.headers["retry-after"] == "1"


async def test_database_down_is_503() -> None:
    engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none", pool_size=1)
    app = create_app(make_settings(None), engine=engine)
    try:
        async with serve(app) as client:
            assert not app.state.runtime.listener.connected
            for token in (ADMIN_TOKEN, "sdl_some_namespace_token"):
                caller = Caller(client, app, token)
                response = await caller.get("/v1/namespaces/alpha/queues")
                assert_error(response, 503, "unavailable")
                assert response.headers["retry-after"] == "1"
            assert_error(await client.get("/readyz"), 503, "unavailable")
            assert (await client.get("/healthz")).status_code == 200
    finally:
        await engine.dispose()


async def test_no_database_configured_fails_at_startup() -> None:
    app = create_app(make_settings(None))
    with pytest.raises(BaseException) as info:  # Litestar's lifespan may wrap it in a group
        async with serve(app):
            pass
    error = info.value
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, RuntimeError)
    assert "SUNDIAL_DATABASE_URL" in str(error)


async def test_health_and_readiness(anonymous: Caller, monkeypatch: pytest.MonkeyPatch) -> None:
    response = await anonymous.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    response = await anonymous.get("/readyz")
    assert response.status_code == 200
    head = migrate.head_revision()
    assert response.json() == {
        "status": "ready",
        "revision": head,
        "pools": {"default": {"status": "ready", "revision": head}},
    }
    monkeypatch.setattr(anonymous.runtime, "head_revision", "f00")
    error = assert_error(await anonymous.get("/readyz"), 503, "unavailable")
    assert error["details"]["head"] == "f00"


async def test_openapi_document(anonymous: Caller) -> None:
    response = await anonymous.get("/schema/openapi.json")
    assert response.status_code == 200
    doc = response.json()
    assert doc["info"]["title"] == "Sundial"
    assert doc["info"]["version"]
    assert "Bearer" in doc["info"]["description"]
    assert '{"error": {"code"' in doc["info"]["description"]
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    paths = doc["paths"]
    enqueue = paths["/v1/namespaces/{ns}/queues/{queue}/messages"]["post"]
    schema = enqueue["requestBody"]["content"]["application/json"]["schema"]
    assert "messages" in schema["properties"]
    assert "priority" in schema["properties"]["messages"]["items"]["properties"]
    assert enqueue["security"] == [{"bearer": []}]
    assert (
        "ErrorBody" in enqueue["responses"]["400"]["content"]["application/json"]["schema"]["$ref"]
    )
    assert "security" not in paths["/healthz"]["get"]
    query = paths["/v1/namespaces/{ns}/queues/{queue}/messages"]["get"]
    assert {"state", "priority_lt", "priority_gte", "limit", "cursor", "order"} <= {
        p["name"] for p in query["parameters"]
    }
    expected = {
        "/v1/namespaces", "/v1/namespaces/{ns}", "/v1/namespaces/{ns}/tokens",
        "/v1/namespaces/{ns}/tokens/{token_id}", "/v1/namespaces/{ns}/queues",
        "/v1/namespaces/{ns}/queues/{queue}", "/v1/namespaces/{ns}/queues/{queue}/purge",
        "/v1/namespaces/{ns}/queues/{queue}/messages", "/v1/namespaces/{ns}/queues/{queue}/dequeue",
        "/v1/namespaces/{ns}/queues/{queue}/ack", "/v1/namespaces/{ns}/queues/{queue}/requeue",
        "/v1/namespaces/{ns}/queues/{queue}/messages/{message_id}",
        "/healthz", "/readyz",
    }  # fmt: skip
    assert expected <= set(paths)
    for action in ("complete", "fail", "extend", "cancel", "requeue"):
        assert f"/v1/namespaces/{{ns}}/queues/{{queue}}/messages/{{message_id}}/{action}" in paths
    page = await anonymous.get("/schema")
    assert page.status_code == 200
    assert "text/html" in page.headers["content-type"]
