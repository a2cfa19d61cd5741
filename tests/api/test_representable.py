"""Representable values only: whatever a client sends at the extremes of a field — timestamps
around years 1 and 9999 with offsets up to ±23:59, integers around the 32- and 64-bit limits and
beyond, long, empty and odd text (NUL, lone surrogates), payload numbers beyond ``numeric`` —
to any write endpoint of the API or the dashboard, the answer is one of two:

- a 4xx in the error shape (a 400 names the field), and nothing stored changed (every row of
  ``namespaces``, ``tokens``, ``queues`` and ``messages``, read as text by PostgreSQL itself, is
  the same before and after); or
- a 2xx, and every read still works: the namespace, token and queue listings, every queue and
  its message listing (all pages), each message the request touched with its dashboard page
  and its queue's message browser, and — after a request about queues rather than messages,
  and once more after the last example — the dashboard's overview, dead-letter and queue pages.

Each body holds one or two drawn fields, so that one extreme value at a time is often accepted
(the ends of every range are drawn often) and the answer is about that value. Hypothesis
draws the operations in a bounded, derandomized run (about 150 requests and their reads); the
issue's own reproductions are explicit examples. ``--hypothesis-show-statistics`` shows how the
answers split between accepted and refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from itertools import count
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core import validation as v
from tests.api.conftest import Caller, namespace_caller
from tests.api.rows import snapshot
from tests.conftest import ADMIN_TOKEN

NS = "alpha"
BASE = f"/v1/namespaces/{NS}/queues"
QUEUES = {
    "q": {},
    "x": {"kind": "exclusive", "exclusive_key": "k"},
    "patched": {},
    "scratch": {},
}
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
LEASE = "\x01lease\x01"
"""Stands for the current lease of the message an operation works on."""
CSRF_FIELD = re.compile(r'name="_csrf_token" value="([^"]+)"')

# --- extreme values --------------------------------------------------------------------------

DATES = [
    "0001-01-01T00:00:00",
    "0001-01-01T23:59:59.999999",
    "0001-01-02T00:00:00",
    "0001-01-02T13:59:59.999999",
    "0001-01-02T14:00:00",
    "1970-01-01T00:00:00",
    "2030-06-01T12:00:00.5",
    "9999-12-30T09:59:59.999999",
    "9999-12-30T10:00:00",
    "9999-12-30T23:59:59.999999",
    "9999-12-31T00:00:00",
    "9999-12-31T23:59:59",
]
OFFSETS = ["Z", "+00:00", "+14:00", "-14:00", "+23:59", "-23:59", "+05:30", ""]
ACCEPTED_TIMES = [
    "0001-01-02T00:00:00Z",
    "0001-01-02T14:00:00+14:00",
    "0001-01-01T10:00:00-14:00",
    "0001-01-02T23:59:00+23:59",
    "9999-12-30T23:59:59.999999Z",
    "9999-12-30T09:59:59.999999-14:00",
    "9999-12-31T13:59:59.999999+14:00",
    "9999-12-31T23:58:59+23:59",
]
"""The ends of the accepted range, written with offsets (a day's worth at most)."""
_offsets = st.integers(-(23 * 60 + 59), 23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))
timestamps = st.one_of(
    st.sampled_from(ACCEPTED_TIMES),
    st.builds(str.__add__, st.sampled_from(DATES), st.sampled_from(OFFSETS)),
    st.datetimes(
        min_value=datetime(1, 1, 1),  # noqa: DTZ001 - offsets come from `timezones`
        max_value=datetime(9999, 12, 31, 23, 59, 59, 999999),  # noqa: DTZ001
        timezones=_offsets,
    ).map(datetime.isoformat),
)

EDGE_INTS = [
    0,
    1,
    -1,
    v.INT32_MAX,
    v.INT32_MAX + 1,
    -(2**31),
    -(2**31) - 1,
    v.INT64_MAX,
    v.INT64_MAX + 1,
    v.INT64_MIN,
    v.INT64_MIN - 1,
    2**64 - 1,
    2**64,
    10**30,
    v.MAX_LEASE_SECONDS,
    v.MAX_LEASE_SECONDS + 1,
    v.MAX_DELAY_SECONDS,
    v.MAX_DELAY_SECONDS + 1,
    v.MAX_RETENTION_SECONDS,
    v.MAX_RETENTION_SECONDS + 1,
    v.MAX_ATTEMPTS,
    v.MAX_ATTEMPTS + 1,
]
integers = st.one_of(st.sampled_from(EDGE_INTS), st.integers())


def ranged(low: int, high: int) -> st.SearchStrategy[int]:
    """An integer field accepting ``low``..``high``: its ends (often), inside, or anything."""
    return st.one_of(st.sampled_from([low, high]), st.integers(low, high), integers)


priorities = ranged(v.INT64_MIN, v.INT64_MAX)
delays = ranged(0, v.MAX_DELAY_SECONDS)
leases = ranged(1, v.MAX_LEASE_SECONDS)
attempts = ranged(1, v.MAX_ATTEMPTS)
retentions = ranged(0, v.MAX_RETENTION_SECONDS)

EDGE_TEXT = [
    "",
    " ",
    "k",
    "x" * 64,
    "x" * 65,
    "x" * 200,
    "x" * 201,
    "x" * 256,
    "x" * 257,
    "x" * v.MAX_TEXT,
    "x" * (v.MAX_TEXT + 1),
    "é" * v.MAX_TEXT,
    "\U0001f984" * 300,
    "\x00",
    "a\x00b",
    "\ud800",
    "a\udfffb",
    "\ufeff\u2028\u202e",
    "'; DROP TABLE messages; --",
    "\\u0000",
]
texts = st.one_of(st.sampled_from(EDGE_TEXT), st.text(max_size=80))
metadata = st.one_of(
    st.dictionaries(texts, texts, max_size=3),
    st.just({f"k{i}": "v" for i in range(v.MAX_METADATA_PAIRS + 1)}),
)

EDGE_PAYLOADS = [
    "null",
    '{"a": [1, 2.5, true, "\\u00e9"]}',
    "1e63",
    "1e300",
    "1e4000",
    "1e4095",
    "1e4096",
    "1e131071",
    "1e131072",
    "1e-16383",
    "1e-16384",
    "-0.0e-99",
    "0e999999",
    "18446744073709551616",
    "1" * 4000,
    "[" * v.MAX_PAYLOAD_DEPTH + "]" * v.MAX_PAYLOAD_DEPTH,
    "[" * (v.MAX_PAYLOAD_DEPTH + 1) + "]" * (v.MAX_PAYLOAD_DEPTH + 1),
    '"\\u0000"',
    '"\\ud800"',
    '"\\ud83e\\udd84"',
    '"' + "x" * 5000 + '"',
]
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
payloads = st.one_of(st.sampled_from(EDGE_PAYLOADS), _json_values.map(json.dumps))


def _optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.just(None), strategy)


def _fields(**strategies: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A body holding up to two of these fields (a value or ``null``), so that one extreme
    value at a time is often accepted, and the answer is about that value."""
    names = sorted(strategies)
    return st.lists(st.sampled_from(names), max_size=2, unique=True).flatmap(
        lambda chosen: st.fixed_dictionaries({n: _optional(strategies[n]) for n in chosen})
    )


# --- operations ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Raw:
    """JSON text spliced as is into a body (payloads: numbers and escapes as the client wrote
    them)."""

    text: str


@dataclass(frozen=True)
class Op:
    """One write request. ``needs`` is what the targeted message must be before it runs:
    ``pending``, ``running`` (its lease replaces :data:`LEASE` in the body) or ``dead``."""

    method: str
    path: str
    body: Any = None
    needs: str | None = None
    queue: str = "q"


def encode(body: Any) -> str:
    """JSON with ASCII escapes (lone surrogates survive), :class:`Raw` parts spliced in."""
    raws: list[str] = []

    def swap(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(value.text)
            return f"\x02{len(raws) - 1}\x02"
        if isinstance(value, dict):
            return {k: swap(item) for k, item in value.items()}
        if isinstance(value, list):
            return [swap(item) for item in value]
        return value

    text = json.dumps(swap(body))
    for index, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x02{index}\x02"), raw)
    return text


# A queue's mutable settings, as PUT and PATCH take them.
_QUEUE_SETTINGS: dict[str, st.SearchStrategy[Any]] = {
    "lease_seconds": leases,
    "delay_seconds": delays,
    "max_attempts": attempts,
    "retry_delay_seconds": delays,
    "retry_delay_max_seconds": delays,
    "retention_seconds": retentions,
}


def _message_fields() -> st.SearchStrategy[dict[str, Any]]:
    return _fields(
        id=st.sampled_from(["a", "x" * 200, "x" * 201, "", "é", "m:1"]),
        priority=priorities,
        payload=payloads.map(Raw),
        metadata=metadata,
        delay_seconds=delays,
        visible_at=timestamps,
        max_attempts=attempts,
        lease_seconds=leases,
        ttl_seconds=ranged(1, v.MAX_RETENTION_SECONDS),
        expires_at=timestamps,
    )


def _enqueue(queue: str, messages: list[dict[str, Any]]) -> Op:
    if queue == "x":  # an exclusive queue: each message needs its key, unless drawn otherwise
        messages = [{"metadata": {"k": "v"}, **m} for m in messages]
    return Op("POST", f"{BASE}/{queue}/messages", {"messages": messages}, queue=queue)


enqueues = st.builds(
    _enqueue, st.sampled_from(["q", "x"]), st.lists(_message_fields(), min_size=1, max_size=2)
)
patches = st.builds(
    lambda body: Op("PATCH", "{message}", body, needs="pending"),
    _fields(
        priority=priorities, payload=payloads.map(Raw), metadata=metadata, visible_at=timestamps
    ),
)
dequeues = st.builds(
    lambda body: Op("POST", f"{BASE}/q/dequeue", body),
    _fields(
        count=ranged(1, v.MAX_BATCH_DEQUEUE),
        lease_seconds=leases,
        wait_seconds=st.sampled_from([0, -1, v.MAX_WAIT_SECONDS + 1, 2**63]),
        metadata=metadata,
    ),
)
lease_operations = st.one_of(
    st.builds(lambda: Op("POST", "{message}/complete", {"lease_id": LEASE}, needs="running")),
    st.builds(
        lambda body: Op("POST", "{message}/fail", {"lease_id": LEASE, **body}, needs="running"),
        _fields(error=texts, retry_delay_seconds=delays),
    ),
    st.builds(
        lambda seconds: Op(
            "POST",
            "{message}/extend",
            {"lease_id": LEASE, "lease_seconds": seconds},
            needs="running",
        ),
        leases,
    ),
    st.builds(
        lambda body: Op("POST", "{message}/cancel", {"lease_id": LEASE, **body}, needs="running"),
        _fields(force=st.booleans(), reason=texts),
    ),
    st.builds(
        lambda body: Op("POST", "{message}/cancel", body, needs="pending"),
        _fields(force=st.booleans(), reason=texts),
    ),
    st.builds(
        lambda body: Op("POST", "{message}/requeue", body, needs="dead"),
        _fields(delay_seconds=delays),
    ),
    st.builds(
        lambda completes, fails: Op(
            "POST", f"{BASE}/q/ack", {"complete": completes, "fail": fails}, needs="running"
        ),
        st.lists(
            st.fixed_dictionaries(
                {"id": st.just("{id}") | texts, "lease_id": st.just(LEASE) | texts}
            ),
            max_size=2,
        ),
        st.lists(
            st.fixed_dictionaries(
                {"id": st.just("{id}") | texts, "lease_id": st.just(LEASE) | texts},
                optional={"error": _optional(texts)},
            ),
            max_size=2,
        ),
    ),
    st.builds(
        lambda body: Op("POST", f"{BASE}/q/requeue", body, needs="dead"),
        _fields(
            states=st.lists(
                st.sampled_from(["errored", "canceled", "pending", ""]) | texts, max_size=3
            ),
            ids=st.lists(st.just("{id}") | texts, max_size=3),
            limit=ranged(1, 100_000),
        ),
    ),
)
admin_operations = st.one_of(
    st.builds(
        lambda body: Op("POST", "/v1/namespaces", body),
        _fields(name=st.sampled_from(["n1", "x" * 64, "x" * 65, "", "-n", "é"]), description=texts),
    ),
    st.builds(
        lambda body: Op("POST", f"/v1/namespaces/{NS}/tokens", body),
        _fields(label=texts, expires_at=timestamps),
    ),
    st.builds(
        lambda name, body: Op("PUT", f"{BASE}/{name}", body),
        st.sampled_from(["q2", "y" * 64, "y" * 65, "patched"]),
        _fields(
            kind=st.sampled_from(["simple", "exclusive", "fifo"]),
            exclusive_key=texts,
            filter_key=texts,
            **_QUEUE_SETTINGS,
        ),
    ),
    st.builds(
        lambda body: Op("PATCH", f"{BASE}/patched", body),
        _fields(**_QUEUE_SETTINGS, exclusive_key=texts),
    ),
    st.builds(
        lambda body: Op("POST", f"{BASE}/scratch/purge", body),
        _fields(states=st.lists(st.sampled_from(["errored", "bogus", ""]) | texts, max_size=3)),
    ),
)


@dataclass(frozen=True)
class Form:
    """A dashboard form: posted with the CSRF token of ``page``."""

    page: str
    action: str
    fields: list[tuple[str, str]]
    needs: str | None = None


_form_text = st.one_of(st.sampled_from(EDGE_TEXT), st.text(max_size=40)).map(
    lambda s: s.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
)


def _mostly(values: list[str]) -> st.SearchStrategy[str]:
    """One of ``values`` two times in three, else odd text."""
    return st.one_of(st.sampled_from(values), st.sampled_from(values), _form_text)


dashboard_forms = st.one_of(
    st.builds(
        lambda switch, paused: Form(
            "/dashboard/queues/alpha/patched",
            "/dashboard/queues/alpha/patched/switches",
            [("switch", switch), ("paused", paused)],
        ),
        _mostly(["enqueue_paused", "dequeue_paused"]),
        _mostly(["true", "false"]),
    ),
    st.builds(
        lambda action, ids, every, states: Form(
            "/dashboard/queues/alpha/q/dead-letters",
            "/dashboard/queues/alpha/q/dead-letters/apply",
            [
                ("action", action),
                *(("ids", i) for i in ids),
                ("every", every),
                *(("states", s) for s in states),
            ],
            needs="dead",
        ),
        _mostly(["requeue", "delete"]),
        st.lists(_mostly(["{id}"]), min_size=1, max_size=2),
        st.sampled_from(["", "1"]),
        st.lists(_mostly(["errored", "canceled"]), max_size=1),
    ),
)

# --- the harness -----------------------------------------------------------------------------


@dataclass
class Harness:
    """An admin caller, a signed-in dashboard browser and the database, on one app."""

    admin: Caller
    browser: httpx.AsyncClient
    engine: AsyncEngine
    ids: count[int] = field(default_factory=count)

    async def snapshot(self) -> dict[str, list[str]]:
        """Every stored row, as PostgreSQL renders it."""
        return await snapshot(self.engine)

    async def prepare(self, needs: str | None, queue: str) -> tuple[str, str | None]:
        """A fresh message of ``queue`` in the state ``needs``: its id and current lease."""
        message_id = f"t{next(self.ids)}"
        if needs is None:
            return message_id, None
        tag = {"k": message_id, "tag": message_id}
        enqueued = await self.admin.post(
            f"{BASE}/{queue}/messages", json={"messages": [{"id": message_id, "metadata": tag}]}
        )
        assert enqueued.status_code == 201, enqueued.text
        if needs == "pending":
            return message_id, None
        leased = await self.admin.post(
            f"{BASE}/{queue}/dequeue", json={"metadata": {"tag": message_id}}
        )
        [message] = leased.json()["messages"]
        if needs == "running":
            return message_id, message["lease_id"]
        canceled = await self.admin.post(
            f"{BASE}/{queue}/messages/{message_id}/cancel", json={"force": True}
        )
        assert canceled.status_code == 200, canceled.text
        return message_id, None

    async def run(self, op: Op) -> None:
        """Send ``op`` and check the property."""
        message_id, lease = await self.prepare(op.needs, op.queue)
        path = op.path.format(message=f"{BASE}/{op.queue}/messages/{message_id}")
        content = None
        if op.body is not None:
            content = encode(_bind(op.body, message_id, lease))
        before = await self.snapshot()
        response = await self.admin.request(
            op.method, path, content=content, headers={"Content-Type": "application/json"}
        )
        touched = _touched(response, op)
        if op.needs is not None:
            touched.add((op.queue, message_id))
        await self.judge(response, before, touched, settings_changed=not touched)

    async def submit(self, form: Form) -> None:
        """Post ``form`` from its page and check the property."""
        message_id, _ = await self.prepare(form.needs, "q")
        page = await self.browser.get(form.page)
        assert page.status_code == 200, page.text
        match = CSRF_FIELD.search(page.text)
        assert match, page.text
        fields = [(k, val.replace("{id}", message_id)) for k, val in form.fields]
        fields.append(("_csrf_token", match.group(1)))
        before = await self.snapshot()
        response = await self.browser.post(
            form.action,
            content=urlencode(fields),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        await self.judge(response, before, {("q", message_id)}, settings_changed=True)

    async def judge(
        self,
        response: httpx.Response,
        before: dict[str, list[str]],
        touched: set[tuple[str, str]],
        *,
        settings_changed: bool,
    ) -> None:
        assert response.status_code < 500, response.text
        event(f"answered {response.status_code}")  # --hypothesis-show-statistics
        if response.status_code >= 400:
            if response.headers["content-type"].startswith("application/json"):
                error = response.json()["error"]
                if response.status_code == 400:
                    # Named: a field of the request, not the database's catch-all.
                    assert error["details"].get("field") not in (None, "", "request"), error
            assert await self.snapshot() == before, (
                f"refused with {response.status_code}, yet changed"
            )
        else:
            await self.assert_readable(touched, settings_changed=settings_changed)

    async def assert_readable(
        self, touched: set[tuple[str, str]], *, settings_changed: bool = False
    ) -> None:
        """Every listing, every touched message and its dashboard pages answer 200; the
        dashboard's queue pages too when the request was about queues rather than messages."""
        admin = self.admin
        namespaces = await admin.get("/v1/namespaces")
        assert namespaces.status_code == 200, namespaces.text
        for ns in [n["name"] for n in namespaces.json()["namespaces"]]:
            tokens = await admin.get(f"/v1/namespaces/{ns}/tokens")
            assert tokens.status_code == 200, tokens.text
            queues = await admin.get(f"/v1/namespaces/{ns}/queues")
            assert queues.status_code == 200, queues.text
            for queue in [q["name"] for q in queues.json()["queues"]]:
                await self.assert_listing(ns, queue)
        for queue in sorted({queue for queue, _ in touched}):
            page = await self.browser.get(f"/dashboard/queues/{NS}/{queue}/messages")
            assert page.status_code == 200, page.text
        for queue, message_id in touched:
            got = await admin.get(f"{BASE}/{queue}/messages/{message_id}")
            assert got.status_code in (200, 404), got.text
            page = await self.browser.get(f"/dashboard/queues/{NS}/{queue}/messages/{message_id}")
            assert page.status_code == got.status_code, page.text
        if settings_changed:
            await self.assert_dashboard()

    async def assert_dashboard(self) -> None:
        """The dashboard's pages that show queues (their settings and counts) answer 200."""
        for path in (
            "/dashboard/",
            "/dashboard/dead-letters",
            *(f"/dashboard/queues/{NS}/{q}" for q in QUEUES),
        ):
            page = await self.browser.get(path)
            assert page.status_code == 200, (path, page.text)

    async def assert_listing(self, ns: str, queue: str) -> None:
        base = f"/v1/namespaces/{ns}/queues/{queue}"
        detail = await self.admin.get(base)
        assert detail.status_code == 200, detail.text
        cursor = None
        while True:
            params = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
            page = await self.admin.get(f"{base}/messages", params=params)
            assert page.status_code == 200, page.text
            cursor = page.json()["next_cursor"]
            if cursor is None:
                return


def _bind(body: Any, message_id: str, lease: str | None) -> Any:
    if isinstance(body, dict):
        return {k: _bind(item, message_id, lease) for k, item in body.items()}
    if isinstance(body, list):
        return [_bind(item, message_id, lease) for item in body]
    if body == LEASE:
        return lease or "00000000-0000-0000-0000-000000000000"
    if body == "{id}":
        return message_id
    return body


def _touched(response: httpx.Response, op: Op) -> set[tuple[str, str]]:
    """The messages a 2xx answer names (enqueued or leased ones)."""
    if not response.is_success or not response.content:
        return set()
    found = response.json().get("messages")
    if not isinstance(found, list):
        return set()
    return {(op.queue, m["id"]) for m in found}


@pytest.fixture
async def harness(
    client: httpx.AsyncClient, app: Litestar, engine: AsyncEngine
) -> AsyncIterator[Harness]:
    admin = Caller(client, app, ADMIN_TOKEN)
    await namespace_caller(admin, NS)
    for name, config in QUEUES.items():
        created = await admin.put(f"{BASE}/{name}", json=config)
        assert created.status_code == 201, created.text
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://sundial.test") as browser:
        login = await browser.get("/dashboard/login")
        token = CSRF_FIELD.search(login.text)
        assert token, login.text
        signed_in = await browser.post(
            "/dashboard/login",
            content=urlencode({"token": ADMIN_TOKEN, "_csrf_token": token.group(1)}),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert signed_in.status_code == 303, signed_in.text
        harness = Harness(admin, browser, engine)
        yield harness
        # Whatever the examples left behind is readable everywhere.
        await harness.assert_readable(set(), settings_changed=True)


# --- the properties --------------------------------------------------------------------------

ISSUE_TIMESTAMPS = ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00")


@SETTINGS
@given(op=st.one_of(enqueues, patches))
@example(op=Op("POST", f"{BASE}/q/messages", {"messages": [{"visible_at": ISSUE_TIMESTAMPS[0]}]}))
@example(op=Op("POST", f"{BASE}/q/messages", {"messages": [{"visible_at": ISSUE_TIMESTAMPS[1]}]}))
@example(op=Op("POST", f"{BASE}/q/messages", {"messages": [{"expires_at": ISSUE_TIMESTAMPS[0]}]}))
@example(op=Op("POST", f"{BASE}/q/messages", {"messages": [{"expires_at": ISSUE_TIMESTAMPS[1]}]}))
@example(op=Op("PATCH", "{message}", {"visible_at": ISSUE_TIMESTAMPS[0]}, needs="pending"))
@example(op=Op("PATCH", "{message}", {"visible_at": ISSUE_TIMESTAMPS[1]}, needs="pending"))
@example(op=Op("PATCH", "{message}", {"payload": Raw("1e131072")}, needs="pending"))
async def test_producing(harness: Harness, op: Op) -> None:
    await harness.run(op)


@SETTINGS
@given(op=st.one_of(dequeues, lease_operations))
async def test_consuming(harness: Harness, op: Op) -> None:
    await harness.run(op)


@SETTINGS
@given(op=admin_operations)
@example(op=Op("POST", f"/v1/namespaces/{NS}/tokens", {"expires_at": ISSUE_TIMESTAMPS[0]}))
@example(op=Op("POST", f"/v1/namespaces/{NS}/tokens", {"expires_at": ISSUE_TIMESTAMPS[1]}))
async def test_administering(harness: Harness, op: Op) -> None:
    await harness.run(op)


@settings(SETTINGS, max_examples=20)
@given(form=dashboard_forms)
async def test_dashboard_forms(harness: Harness, form: Form) -> None:
    await harness.submit(form)
