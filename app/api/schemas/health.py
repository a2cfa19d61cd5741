"""The bodies of the operations endpoints at the server root: liveness and readiness."""

from __future__ import annotations

from typing import Literal

from app.api.schemas.common import Out


class Health(Out):
    """``GET /healthz``."""

    status: Literal["ok"] = "ok"


class Ready(Out):
    """``GET /readyz``: the database answers and its schema is at ``revision`` (the head)."""

    status: Literal["ready"]
    revision: str | None
