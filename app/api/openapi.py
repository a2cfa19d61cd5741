"""The OpenAPI document served at ``/schema``: its description (auth, errors, conventions) and
the request-body documentation of handlers that decode their bodies themselves
(:mod:`app.api.body`), which Litestar cannot see.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Any, cast

import msgspec
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import (
    Components,
    OpenAPIMediaType,
    Operation,
    RequestBody,
    Schema,
    SecurityScheme,
)

BEARER = "bearer"
SECURITY: list[dict[str, list[str]]] = [{BEARER: []}]

DESCRIPTION = """\
Sundial: a priority and delay queue server on PostgreSQL.

**Authentication.** Every `/v1` endpoint needs `Authorization: Bearer <token>`: the admin token
(server configuration, `SUNDIAL_ADMIN_TOKEN`) may call everything; a namespace token may call the
data plane (queues and messages) of its own namespace only. Missing or unknown token: 401
`unauthorized`; a valid token for another namespace or for an admin-only endpoint: 403
`forbidden`. `/healthz`, `/readyz` and `/schema` need no token.

**Errors.** Every non-2xx answer has the body
`{"error": {"code": "<code>", "message": "<text>", "details": {...}}}`. Codes and statuses:
`validation_error` 400 (`details.field` names the field, e.g. `messages[3].priority`; `body` for a
body that is not JSON), `unauthorized` 401, `forbidden` 403, `not_found` 404 (also for a path
that matches no endpoint), `method_not_allowed` 405 (a known path with a method it does not
support; `details.allowed` and the `Allow` header list the methods), `conflict` 409,
`lease_mismatch` 409, `invalid_state` 409, `queue_paused` 409, `payload_too_large` 413 (a payload
over the per-message limit, or a request body over the server's body limit), `rate_limited` 429,
`unavailable` 503 (with `Retry-After`; e.g. the database is unreachable), `internal` 500 (a bug).

**Conventions.** Bodies are JSON; an empty body is read as `{}`. Numbers are strict: `"1"` or
`1.5` where an integer is expected is a 400. Times are RFC 3339 with a time zone. Message
payloads are any JSON value, stored and returned exactly as sent.

**Long polling.** `POST …/dequeue` with `wait_seconds` (0-20) answers as soon as at least one
message is leased, or with an empty list after `wait_seconds`.

**Message query.** `GET …/messages` takes `state` (repeatable or comma-separated),
`metadata.<key>=<value>` (any number; all must match), `priority_gte` (inclusive),
`priority_lt` (exclusive), `order` (`enqueued_at`: newest first, the default; or `priority`:
lowest first), `limit` (1-1000, default 100) and `cursor` (the `next_cursor` of the previous
page).
"""


def package_version() -> str:
    """The installed version of Sundial."""
    try:
        return metadata.version("sundial")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def config() -> OpenAPIConfig:
    """The OpenAPI configuration: served at ``/schema`` (``/schema/openapi.json``)."""
    return OpenAPIConfig(
        title="Sundial",
        version=package_version(),
        description=DESCRIPTION,
        components=Components(
            security_schemes={
                BEARER: SecurityScheme(
                    type="http",
                    scheme="bearer",
                    description="The admin token or a namespace token (`sdl_…`).",
                )
            }
        ),
        path="/schema",
        use_handler_docstrings=True,
    )


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """Replace ``$ref``s to ``$defs`` by the definitions (request types are not recursive)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs)
        return {key: _inline(value, defs) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    return node


def body_schema(kind: type[msgspec.Struct]) -> dict[str, Any]:
    """A self-contained JSON Schema of a request body type."""
    schema = msgspec.json.schema(kind)
    defs = schema.pop("$defs", {})
    inlined: dict[str, Any] = _inline(schema, defs)
    return inlined


def with_body(kind: type[msgspec.Struct]) -> type[Operation]:
    """An ``operation_class`` that documents ``kind`` as the JSON request body."""
    media = OpenAPIMediaType(schema=cast(Schema, body_schema(kind)))
    body = RequestBody(content={"application/json": media}, required=False)

    @dataclass
    class WithBody(Operation):
        def __post_init__(self) -> None:
            self.request_body = body

    return WithBody
