"""The OpenAPI document served at ``/schema``: its description (auth, errors, conventions), the
request-body documentation of handlers that decode their bodies themselves
(:mod:`app.api.body`), which Litestar cannot see, and the browsable documentation.

The browsable documentation is Swagger UI, served from files in this package
(``app/api/static/swagger-ui``, copied unmodified from the npm package ``swagger-ui-dist``, with
their licenses): Litestar's render plugins load their scripts, styles and icons from public
CDNs by default, which an air-gapped host cannot reach. ``/schema`` and ``/schema/swagger`` are
the page; ``/schema/openapi.json`` and ``/schema/openapi.yaml`` the document.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, cast

import msgspec
from litestar import Router
from litestar.datastructures import CacheControlHeader
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin, YamlRenderPlugin
from litestar.openapi.spec import (
    Components,
    OpenAPIMediaType,
    Operation,
    RequestBody,
    Schema,
    SecurityScheme,
)
from litestar.static_files import create_static_files_router

BEARER = "bearer"
SECURITY: list[dict[str, list[str]]] = [{BEARER: []}]

SCHEMA_PATH = "/schema"
ASSETS_PATH = f"{SCHEMA_PATH}/static"
"""Where the Swagger UI files are served."""
SWAGGER_UI = Path(__file__).parent / "static" / "swagger-ui"
SWAGGER_UI_VERSION = "5.35.0"
"""The version of the files in :data:`SWAGGER_UI` (its ``SOURCE.txt`` says how to update)."""

DESCRIPTION = """\
Sundial: a priority and delay queue server on PostgreSQL.

**Authentication.** Every `/v1` endpoint needs `Authorization: Bearer <token>`: the admin token
(server configuration, `SUNDIAL_ADMIN_TOKEN`) may call everything; a namespace token may call the
data plane (queues and messages) of its own namespace only. Missing or unknown token: 401
`unauthorized`; a valid token for another namespace or for an admin-only endpoint: 403
`forbidden`. A client address that sent too many unknown tokens recently gets 429 `rate_limited`
with `Retry-After` for any token until then. `/healthz`, `/readyz` and `/schema` need no token.

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


class PackagedSwaggerUI(SwaggerRenderPlugin):
    """Swagger UI at ``/schema`` and ``/schema/swagger``, every file it loads served from this
    package under :data:`ASSETS_PATH` (same origin, no CDN)."""

    def __init__(self) -> None:
        super().__init__(
            version=SWAGGER_UI_VERSION,
            js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            css_url=f"{ASSETS_PATH}/swagger-ui.css",
            standalone_preset_js_url=f"{ASSETS_PATH}/swagger-ui-standalone-preset.js",
            favicon=f"<link rel='icon' type='image/png' href='{ASSETS_PATH}/favicon-32x32.png'>",
            path=["/", "/swagger"],
        )

    def receive_router(self, router: Router) -> None:
        """Add the static files to the schema's router (next to the OAuth2 redirect page)."""
        super().receive_router(router)
        router.register(
            create_static_files_router(
                ASSETS_PATH.removeprefix(SCHEMA_PATH),
                directories=[SWAGGER_UI],
                name="schema-static",
                include_in_schema=False,
                cache_control=CacheControlHeader(max_age=3600),
            )
        )


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
        path=SCHEMA_PATH,
        render_plugins=[
            PackagedSwaggerUI(),
            JsonRenderPlugin(),
            YamlRenderPlugin(),
        ],
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
