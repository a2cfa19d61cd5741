"""Database and driver errors as clients see them (``translate`` in app/store/errors.py).

Validation refuses every value PostgreSQL would refuse or could not give back, so these paths are
reached here by calling the store directly, or by a row written behind the server's back (as
rows stored before the rules existed were). The mapping:

- PostgreSQL refused a value (SQLSTATE class 22, data exception) or a limit was exceeded
  (class 54): the statement failed and changed nothing, so 400 ``validation_error`` with
  ``details.field = "request"`` and a fixed message; PostgreSQL's own text is only logged;
- the driver could not convert a value (a ``DataError`` without SQLSTATE, e.g. a stored timestamp
  Python cannot represent): the statement may have committed, so no 400: 500 ``internal``,
  without the driver's text;
- a lost or unreachable database stays 503 ``unavailable`` (tests/api/test_outage.py).
"""

from __future__ import annotations

import base64
import json
import logging
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import SundialError, ValidationError
from app.core.models import MessageChanges, NewMessage, QueueConfig
from app.core.service import QueueService
from tests.api.conftest import Caller, assert_error

DATABASE_WORDS = ("overflow", "numeric", "stack depth", "timestamp", "year", "psycopg", "SQL")


async def _waiting_message(service: QueueService) -> None:
    await service.create_namespace("ns")
    await service.put_queue("ns", "q", QueueConfig())
    await service.enqueue("ns", "q", [NewMessage(id="m", payload=b"1")])


def _has_no_database_text(message: str) -> None:
    for word in DATABASE_WORDS:
        assert word.lower() not in message.lower(), message


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b'{"n": 1e131072}', "request: a number is outside the range the database stores"),
        (
            b"[" * 100_000 + b"]" * 100_000,
            "request: the request exceeds a database limit (too large, or nested too deeply)",
        ),
    ],
)
async def test_a_value_postgresql_refuses_is_a_400_without_its_text(
    service: QueueService, caplog: pytest.LogCaptureFixture, payload: bytes, message: str
) -> None:
    await _waiting_message(service)
    queue = await service.get_queue_or_404("ns", "q")
    with caplog.at_level(logging.WARNING, "sundial.store"), pytest.raises(ValidationError) as info:
        await service.store.update_message(queue, "m", MessageChanges(payload=payload))
    assert (info.value.field, info.value.message) == ("request", message)
    _has_no_database_text(info.value.message)
    assert "SQLSTATE" in caplog.text  # PostgreSQL's own text is for the operator's log
    stored = await service.get_message("ns", "q", "m")
    assert stored.payload == b"1"


async def test_the_sqlalchemy_path_maps_the_same(service: QueueService) -> None:
    await _waiting_message(service)
    queue = await service.get_queue_or_404("ns", "q")
    with pytest.raises(ValidationError) as info:
        await service.store.update_queue(queue, {"lease_seconds": 2**31})
    assert info.value.message == "request: a number is outside the range the database stores"
    service.store.lookups.forget_all()
    assert (await service.get_queue_or_404("ns", "q")).config == queue.config


async def test_a_value_the_driver_cannot_read_back_is_no_400(service: QueueService) -> None:
    """Why validation must refuse such values first: the statement commits, then its answer
    cannot be read; that error passes through as a bug (a 500), never as the client's 400."""
    await _waiting_message(service)
    queue = await service.get_queue_or_404("ns", "q")
    year_zero = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))
    with pytest.raises(psycopg.DataError) as info:
        await service.store.update_message(queue, "m", MessageChanges(visible_at=year_zero))
    assert not isinstance(info.value, SundialError)


async def test_a_stored_unreadable_row_is_a_500_without_the_driver_text(
    alpha: Caller, queue: str, engine: AsyncEngine
) -> None:
    enqueued = await alpha.post(f"{queue}/messages", json={"messages": [{"id": "old"}]})
    assert enqueued.status_code == 201, enqueued.text
    # As rows stored before the timestamp rules existed: year 0 in UTC.
    async with engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE messages SET visible_at = '0001-01-01T00:00:00+14:00' WHERE id = 'old'")
        )
    for path in (f"{queue}/messages/old", f"{queue}/messages"):
        error = assert_error(await alpha.get(path), 500, "internal")
        assert error["message"] == "internal server error"
        assert error["details"] == {}


UUID = "00000000-0000-4000-8000-000000000000"


@pytest.mark.parametrize("odd", ["%00", "a%00b", "%ED%A0%80", "x" * 300])
async def test_odd_names_in_paths_never_reach_the_driver(
    admin: Caller, queue: str, odd: str
) -> None:
    """A name the driver could not even send (NUL) is refused as not found, on every route."""
    requests = [
        ("PUT", f"/v1/namespaces/{odd}/queues/q", {}),
        ("PATCH", f"/v1/namespaces/{odd}/queues/q", {"lease_seconds": 5}),
        ("DELETE", f"/v1/namespaces/{odd}/queues/q", None),
        ("DELETE", f"/v1/namespaces/alpha/queues/{odd}", None),
        ("GET", f"/v1/namespaces/{odd}/tokens", None),
        ("POST", f"/v1/namespaces/{odd}/tokens", {}),
        ("DELETE", f"/v1/namespaces/{odd}/tokens/{UUID}", None),
        ("DELETE", f"/v1/namespaces/alpha/tokens/{odd}", None),
        ("POST", f"{queue}/messages/{odd}/complete", {"lease_id": UUID}),
        ("POST", f"/v1/namespaces/alpha/queues/{odd}/messages", {"messages": [{}]}),
    ]
    for method, path, body in requests:
        response = await admin.request(method, path, json=body)
        assert 400 <= response.status_code < 500, (method, path, response.text)
        assert set(response.json()) == {"error"}


def _cursor(*values: int) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(values)).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("order", "values"),
    [
        ("priority", (2**64 - 1, 2**63)),
        ("priority", (-(2**63), -1)),
        ("enqueued_at", (2**64 - 1,)),
        ("enqueued_at", (2**64,)),
        ("priority", (10**30, 1)),
    ],
)
async def test_forged_cursors_never_reach_the_database_as_errors(
    alpha: Caller, queue: str, order: str, values: tuple[int, ...]
) -> None:
    params = {"order": order, "cursor": _cursor(*values)}
    response = await alpha.get(f"{queue}/messages", params=params)
    if response.status_code != 200:
        assert_error(response, 400, "validation_error", "cursor")
