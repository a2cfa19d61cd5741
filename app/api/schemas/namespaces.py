"""The bodies of the namespace endpoints (admin plane): create, list."""

from __future__ import annotations

from datetime import datetime

from app.api.schemas.common import In, Out
from app.core.models import Namespace


class NamespaceCreate(In):
    """``POST /v1/namespaces``."""

    name: str
    description: str = ""
    pool: str | None = None
    """The pool to hold it (docs/scaling.md); unset: the pool with the fewest waiting messages."""


class NamespaceOut(Out):
    """A namespace."""

    name: str
    description: str
    created_at: datetime
    pool: str
    """The pool (database) that holds its tokens, queues and messages."""

    @classmethod
    def of(cls, namespace: Namespace) -> NamespaceOut:
        """From the core model."""
        return cls(namespace.name, namespace.description, namespace.created_at, namespace.pool)


class NamespaceList(Out):
    """``GET /v1/namespaces``."""

    namespaces: list[NamespaceOut]
