"""The bodies of the operations endpoints at the server root: liveness and readiness."""

from __future__ import annotations

from typing import Literal

from app.api.schemas.common import Out


class Health(Out):
    """``GET /healthz``."""

    status: Literal["ok"] = "ok"


class PoolReady(Out):
    """One pool in ``GET /readyz``: ``ready`` (answers, schema at the head) or ``unavailable``
    (does not answer: only its namespaces answer 503)."""

    status: Literal["ready", "unavailable"]
    revision: str | None


class Ready(Out):
    """``GET /readyz``: the catalogue's database answers and its schema is at ``revision`` (the
    head), and so is every pool's that answers; ``pools`` says how each pool is."""

    status: Literal["ready"]
    revision: str | None
    pools: dict[str, PoolReady]
