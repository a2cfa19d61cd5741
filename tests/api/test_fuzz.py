"""Property-based fuzzing of the whole HTTP API with Schemathesis, against its own OpenAPI.

Schemathesis takes the OpenAPI document the application serves at ``/schema/openapi.json`` (built
at import time from ``create_app(...).openapi_schema``, which needs no database, so that pytest can
collect one test per operation; :func:`test_fuzzed_document_is_the_served_one` proves it is the
served one) and makes one test per operation: explicit examples, boundary values (its "coverage"
phase), then random valid and invalid parameters and bodies. The requests go in-process over
ASGI to the real application (``create_app`` on this test's database, with its own engine, pool
and listener, running in Schemathesis' event loop), with the admin token, which may call
everything. Every answer must

- not be a server error (``not_a_server_error``: no 5xx for any input a client can send), and
- conform to the document: a documented status code, the documented content type, a body that
  matches the documented response schema, and the documented headers.

So that the fuzzer reaches the real handlers and not only 404s, each test's database holds
namespaces ``alpha`` and ``scratch``, each with a namespace token and two queues, ``simple`` and
``exclusive``, holding messages ``m0``..``m7`` (three running, one canceled, the rest pending),
a topic ``orders`` both queues subscribe to (``exclusive`` on tags of ``customer``) and a
periodic job ``nightly`` on ``simple``; the test steers most generated path parameters (``ns``,
``queue``, ``message_id``, ``token_id``, ``topic``, ``name``) to those names, and half of the
lease-taking calls (complete, fail, extend, cancel) to a running message with its current lease.

(``schemathesis.pytest.from_fixture``, the lazy loader, is not used: with pytest 9.2 it fails
on ``Function._nodeid``, which pytest no longer has.)

The run is deterministic (``derandomize``, no deadline) and bounded: ``DEFAULT_EXAMPLES``
generated examples per operation, well under a minute here. For a longer run of the same tests,
set ``SUNDIAL_FUZZ_EXAMPLES`` (examples per operation)::

    SUNDIAL_FUZZ_EXAMPLES=500 .venv/bin/pytest tests/api/test_fuzz.py -p no:cacheprovider
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from litestar import Litestar
from schemathesis.checks import not_a_server_error
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.bootstrap.server import create_app
from tests.api.conftest import BODY_LIMIT, make_settings
from tests.conftest import ADMIN_TOKEN

T = TypeVar("T")
DEFAULT_EXAMPLES = 20
EXAMPLES = int(os.environ.get("SUNDIAL_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
DOCUMENT = "/schema/openapi.json"
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]

NAMESPACES = ("alpha", "scratch")
QUEUES: dict[str, dict[str, Any]] = {
    "simple": {},
    "exclusive": {"kind": "exclusive", "exclusive_key": "customer"},
}
MESSAGE_IDS = [f"m{i}" for i in range(8)]
RUNNING = 3
LEASE_OPERATIONS = ("/complete", "/fail", "/extend", "/cancel")
TOPIC = "orders"
JOB = "nightly"


def _document() -> dict[str, Any]:
    """The OpenAPI document the app serves (it needs no database to build it)."""
    document: dict[str, Any] = create_app(make_settings(None)).openapi_schema.to_schema()
    return document


schema = schemathesis.openapi.from_dict(
    _document(),
    config=schemathesis.Config.from_dict(
        {
            "headers": AUTH,
            "generation": {"max-examples": EXAMPLES, "deterministic": True},
            "phases": {"stateful": {"enabled": False}},
        }
    ),
)


@dataclass
class Data:
    """The application under test and the things in its database that the fuzzer aims at."""

    app: Litestar
    token_ids: list[str] = field(default_factory=list)
    leases: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        """One request to the app, in its (Schemathesis') event loop, with the admin token."""
        with asgi.get_client(self.app) as client:
            return client.request(method, path, headers=AUTH, **kwargs)

    def call(self, method: str, path: str, *, expect: int, json: Any = None) -> Any:
        response = self.request(method, path, json=json)
        assert response.status_code == expect, (method, path, response.status_code, response.text)
        return response.json() if response.content else None

    def seed(self) -> None:
        """Each namespace with a token, both queues, and messages in three states."""
        for ns in NAMESPACES:
            self.call("POST", "/v1/namespaces", expect=201, json={"name": ns})
            issued = self.call("POST", f"/v1/namespaces/{ns}/tokens", expect=201, json={})
            self.token_ids.append(issued["id"])
            for queue, config in QUEUES.items():
                base = f"/v1/namespaces/{ns}/queues/{queue}"
                self.call("PUT", base, expect=201, json=config)
                messages = [
                    {"id": m, "priority": i % 3, "payload": {"n": i}, "metadata": {"customer": m}}
                    for i, m in enumerate(MESSAGE_IDS)
                ]
                self.call("POST", f"{base}/messages", expect=201, json={"messages": messages})
                leased = self.call("POST", f"{base}/dequeue", expect=200, json={"count": RUNNING})
                self.leases[ns, queue] = [(m["id"], m["lease_id"]) for m in leased["messages"]]
                assert len(self.leases[ns, queue]) == RUNNING
                waiting = [m for m in MESSAGE_IDS if m not in dict(self.leases[ns, queue])]
                self.call("POST", f"{base}/messages/{waiting[-1]}/cancel", expect=200, json={})
            subscriptions = [
                "simple",
                {"queue": "exclusive", "tag_key": "customer", "tags": MESSAGE_IDS[:2]},
            ]
            self.call(
                "PUT",
                f"/v1/namespaces/{ns}/topics/{TOPIC}",
                expect=201,
                json={"subscriptions": subscriptions},
            )
            job = {"queue": "simple", "schedule": "0 3 * * *", "payload": {"nightly": True}}
            self.call("PUT", f"/v1/namespaces/{ns}/periodic/{JOB}", expect=201, json=job)

    def known(self, parameter: str) -> list[str]:
        """The existing values a path parameter can be steered to."""
        return {
            "ns": list(NAMESPACES),
            "queue": list(QUEUES),
            "message_id": MESSAGE_IDS,
            "token_id": self.token_ids,
            "topic": [TOPIC],
            "name": [JOB],
        }.get(parameter, [])

    def steer(self, case: schemathesis.Case) -> None:
        """Point most path parameters at existing things (the generated value stays possible),
        and half of the lease-taking calls at a running message with its current lease.

        The choices derive from the generated values (a CRC, stable across runs), so the
        generated value is the only source of randomness and a failure replays as generated.
        """
        params = case.path_parameters
        for name, value in list(params.items()):
            known = self.known(name)
            params[name] = _pick([*known, *known, value], f"{name}={value}")
        running = self.leases.get((params.get("ns"), params.get("queue")), [])
        lease = _pick([*running, None, None, None], repr(case.body))
        if case.path.endswith(LEASE_OPERATIONS) and isinstance(case.body, dict) and lease:
            params["message_id"], case.body["lease_id"] = lease


def _pick(options: list[T], seed: str) -> T:
    return options[zlib.crc32(seed.encode()) % len(options)]


@pytest.fixture
def fuzz_app(database_url: str) -> Iterator[Data]:
    """The app on this test's database, nothing in it yet. It makes its own engine: it runs
    in Schemathesis' event loop, not the test's."""
    try:
        yield Data(create_app(make_settings(database_url)))
    finally:
        asgi.shutdown_lifespans()  # close its pool and listener before the database is dropped


@pytest.fixture
def fuzz_data(fuzz_app: Data) -> Data:
    """The app with the namespaces, tokens, queues and messages the fuzzer aims at."""
    fuzz_app.seed()
    return fuzz_app


def test_fuzzed_document_is_the_served_one(fuzz_app: Data) -> None:
    response = fuzz_app.request("GET", DOCUMENT)
    assert response.status_code == 200
    assert response.json() == schema.raw_schema


BODY_OPERATIONS = [
    (method.upper(), path)
    for path, methods in schema.raw_schema["paths"].items()
    for method, operation in methods.items()
    if "requestBody" in operation
]


def test_an_oversized_body_gets_a_documented_413(fuzz_app: Data) -> None:
    """Any client can send a body over the server's limit: every operation that takes a body
    answers 413 ``payload_too_large``, and the document must list that 413."""
    body = b'{"padding": "' + b"x" * BODY_LIMIT + b'"}'
    undocumented = []
    for method, path in BODY_OPERATIONS:
        url = path.format(
            ns="alpha",
            queue="simple",
            message_id="m0",
            token_id="00000000-0000-4000-8000-000000000000",
            topic="orders",
            name="nightly",
        )
        response = fuzz_app.request(method, url, data=body)
        assert response.status_code == 413, (method, url, response.text)
        assert response.json()["error"]["code"] == "payload_too_large"
        documented = schema.raw_schema["paths"][path][method.lower()]["responses"]
        if "413" not in documented:
            undocumented.append(f"{method} {path} (documented: {', '.join(sorted(documented))})")
    title = f"a {len(body)}-byte body answers 413, which the document does not list for:"
    assert undocumented == [], "\n".join([title, *undocumented])


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # the data is shared by the examples on purpose
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
def test_every_answer_is_documented_and_never_a_server_error(
    case: schemathesis.Case, fuzz_data: Data
) -> None:
    fuzz_data.steer(case)
    case.call_and_validate(app=fuzz_data.app, checks=CHECKS)
